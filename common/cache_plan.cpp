#include "common/cache_plan.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "common/error.hpp"
#include "common/index_format.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

std::string_view to_string(CachePolicy p) {
  switch (p) {
    case CachePolicy::kVfb: return "vfb";
    case CachePolicy::kQtf: return "qtf";
    case CachePolicy::kQtfDf: return "qtfdf";
  }
  return "?";
}

CachePolicy parse_cache_policy(std::string_view s) {
  if (s == "vfb") return CachePolicy::kVfb;
  if (s == "qtf") return CachePolicy::kQtf;
  if (s == "qtfdf") return CachePolicy::kQtfDf;
  throw InputError("--policy", 0, fmt::format("unknown cache policy '{}' (vfb, qtf, qtfdf)", s));
}

std::uint64_t cached_block_bytes(std::uint64_t posting_words) { return posting_words * 4; }

namespace {

nlohmann::json body_json(const CachePlan& p) {
  nlohmann::json shards = nlohmann::json::array();
  for (const ShardCachePlan& s : p.shards) {
    nlohmann::json lists = nlohmann::json::array();
    for (const CachedList& l : s.lists) lists.push_back({l.term, l.blocks, l.bytes});
    shards.push_back({{"shard", s.shard},
                      {"bytes", s.bytes},
                      {"blocks", s.blocks},
                      {"lists_cached", s.lists.size()},
                      {"training_block_reads", s.training_block_reads},
                      {"training_block_reads_cached", s.training_block_reads_cached},
                      {"lists", std::move(lists)}});
  }
  return {{"format", kCachePlanFormat},
          {"version", kCachePlanVersion},
          {"policy", to_string(p.policy)},
          {"lambda", p.lambda},
          {"budget_bytes", p.budget_bytes},
          {"k", p.k},
          {"scoring", p.scoring},
          {"training", {{"file", p.training_file}, {"queries", p.training_queries}}},
          {"index_manifest_xxh3", p.index_manifest_xxh3},
          {"shards", std::move(shards)}};
}

std::uint64_t checksum_of(const nlohmann::json& body) {
  const std::string text = body.dump();
  return XXH3_64bits(text.data(), text.size());
}

}  // namespace

void CachePlan::write(const std::filesystem::path& file) const {
  nlohmann::json j = body_json(*this);
  const std::uint64_t sum = checksum_of(j);
  j["checksum_xxh3"] = sum;
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw InputError(file.string(), 0, "cannot write the cache plan");
    out << j.dump() << '\n';
    if (!out) throw InputError(file.string(), 0, "cannot write the cache plan");
  }
  std::filesystem::rename(tmp, file);
}

CachePlan CachePlan::read(const std::filesystem::path& file, const Index* index) {
  const std::string name = file.string();
  std::ifstream in(file);
  if (!in) throw InputError(name, 0, "cannot read the cache plan");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(name, 0, fmt::format("not a cache plan (truncated or corrupt JSON: {})", e.what()));
  }
  CachePlan p;
  try {
    if (j.value("format", "") != kCachePlanFormat)
      throw InputError(name, 0, "not a gpusearch cache plan");
    if (j.at("version").get<int>() != kCachePlanVersion)
      throw InputError(name, 0, fmt::format("cache plan version {}, this build reads {}",
                                            j.at("version").get<int>(), kCachePlanVersion));
    const std::uint64_t stored = j.at("checksum_xxh3").get<std::uint64_t>();
    nlohmann::json body = j;
    body.erase("checksum_xxh3");
    if (checksum_of(body) != stored)
      throw InputError(name, 0, "checksum mismatch: the cache plan was changed or damaged");
    p.policy = parse_cache_policy(j.at("policy").get<std::string>());
    p.lambda = j.at("lambda").get<double>();
    p.budget_bytes = j.at("budget_bytes").get<std::uint64_t>();
    p.k = j.at("k").get<unsigned>();
    p.scoring = j.at("scoring").get<std::string>();
    p.training_file = j.at("training").at("file").get<std::string>();
    p.training_queries = j.at("training").at("queries").get<std::uint64_t>();
    p.index_manifest_xxh3 = j.at("index_manifest_xxh3").get<std::uint64_t>();
    for (const auto& s : j.at("shards")) {
      ShardCachePlan sp;
      sp.shard = s.at("shard").get<std::uint32_t>();
      sp.bytes = s.at("bytes").get<std::uint64_t>();
      sp.blocks = s.at("blocks").get<std::uint64_t>();
      sp.training_block_reads = s.at("training_block_reads").get<std::uint64_t>();
      sp.training_block_reads_cached = s.at("training_block_reads_cached").get<std::uint64_t>();
      for (const auto& l : s.at("lists"))
        sp.lists.push_back({l.at(0).get<TermId>(), l.at(1).get<std::uint32_t>(),
                            l.at(2).get<std::uint64_t>()});
      p.shards.push_back(std::move(sp));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(name, 0, fmt::format("malformed cache plan: {}", e.what()));
  }
  if (index) {
    const std::uint64_t now = xxh3_of_file(index->dir() / kRootManifestName);
    if (now != p.index_manifest_xxh3)
      throw InputError(name, 0, fmt::format("stale cache plan: made for another index than {} "
                                            "(its manifest changed); make it again with "
                                            "`gpusearch plan-cache`",
                                            index->dir().string()));
    for (std::size_t i = 0; i < index->num_open_shards(); ++i) {
      const ShardIndex& shard = index->shard(i);
      const std::uint32_t id = index->shard_id(i);
      for (const ShardCachePlan& sp : p.shards) {
        if (sp.shard != id) continue;
        for (const CachedList& l : sp.lists) {
          if (l.term >= shard.num_terms() || l.blocks > shard.term(l.term).num_blocks)
            throw InputError(name, 0, fmt::format("shard {}: term {} with {} cached blocks does "
                                                  "not exist in the index",
                                                  id, l.term, l.blocks));
        }
      }
    }
  }
  return p;
}

}  // namespace gpusearch
