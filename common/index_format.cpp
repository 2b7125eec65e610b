#include "common/index_format.hpp"

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "common/mapped_file.hpp"

namespace gpusearch {

using nlohmann::json;

std::string_view to_string(SplitMode m) {
  switch (m) {
    case SplitMode::kInputRanges:
      return "input-ranges";
    case SplitMode::kGsTiers:
      return "gs-tiers";
    case SplitMode::kRoundRobin:
      return "round-robin";
  }
  return "?";
}

SplitMode parse_split_mode(std::string_view s) {
  if (s == "input-ranges") return SplitMode::kInputRanges;
  if (s == "gs-tiers") return SplitMode::kGsTiers;
  if (s == "round-robin") return SplitMode::kRoundRobin;
  throw InputError("--split", 0, "unknown split mode '" + std::string(s) +
                                     "' (input-ranges, gs-tiers, round-robin)");
}

std::string shard_dir_name(std::uint32_t shard_id) { return fmt::format("shard-{:04d}", shard_id); }

json to_json(const IndexParams& p) {
  return json{{"format_version", p.format_version},
              {"codec", std::string(codec::to_string(p.codec))},
              {"bm25", {{"k1", p.bm25.k1}, {"b", p.bm25.b}}},
              {"gs_alpha", p.gs_alpha},
              {"pagerank", {{"damping", p.pagerank_damping},
                            {"iterations", p.pagerank_iterations},
                            {"has_links", p.has_links}}},
              {"collection", {{"num_docs", p.collection.num_docs},
                              {"total_tokens", p.collection.total_tokens},
                              {"avg_doc_length", p.collection.avg_doc_length},
                              {"num_terms", p.num_terms},
                              {"num_postings", p.num_postings_total}}},
              {"num_shards", p.num_shards},
              {"split", std::string(to_string(p.split))}};
}

namespace {

template <typename F>
auto field(const std::string& file, const char* what, F&& f) {
  try {
    return f();
  } catch (const json::exception& e) {
    throw IndexFormatError(file, fmt::format("bad or missing field '{}': {}", what, e.what()));
  } catch (const InputError& e) {
    throw IndexFormatError(file, fmt::format("bad field '{}': {}", what, e.what()));
  }
}

void check_version(const json& j, const std::string& file) {
  const int v = field(file, "format_version", [&] { return j.at("format_version").get<int>(); });
  if (v != kIndexFormatVersion)
    throw IndexFormatError(file, fmt::format("format version {} is not the supported version {}",
                                             v, kIndexFormatVersion));
}

json read_json_file(const std::filesystem::path& file, const char* expected_format) {
  std::ifstream in(file);
  if (!in) throw IndexFormatError(file.string(), "cannot open (is this an index directory?)");
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    throw IndexFormatError(file.string(), std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object() || j.value("format", "") != expected_format)
    throw IndexFormatError(file.string(), fmt::format("not a {} manifest", expected_format));
  check_version(j, file.string());
  return j;
}

}  // namespace

IndexParams params_from_json(const json& j, const std::string& file) {
  IndexParams p;
  check_version(j, file);
  p.codec = field(file, "codec", [&] { return codec::parse_codec(j.at("codec").get<std::string>()); });
  field(file, "bm25", [&] {
    p.bm25.k1 = j.at("bm25").at("k1").get<double>();
    p.bm25.b = j.at("bm25").at("b").get<double>();
    return 0;
  });
  p.gs_alpha = field(file, "gs_alpha", [&] { return j.at("gs_alpha").get<double>(); });
  field(file, "pagerank", [&] {
    const json& pr = j.at("pagerank");
    p.pagerank_damping = pr.at("damping").get<double>();
    p.pagerank_iterations = pr.at("iterations").get<int>();
    p.has_links = pr.at("has_links").get<bool>();
    return 0;
  });
  field(file, "collection", [&] {
    const json& c = j.at("collection");
    p.collection.num_docs = c.at("num_docs").get<std::uint64_t>();
    p.collection.total_tokens = c.at("total_tokens").get<std::uint64_t>();
    p.collection.avg_doc_length = c.at("avg_doc_length").get<double>();
    p.num_terms = c.at("num_terms").get<std::uint64_t>();
    p.num_postings_total = c.at("num_postings").get<std::uint64_t>();
    return 0;
  });
  p.num_shards = field(file, "num_shards", [&] { return j.at("num_shards").get<std::uint32_t>(); });
  p.split = field(file, "split", [&] { return parse_split_mode(j.at("split").get<std::string>()); });
  if (p.num_shards == 0) throw IndexFormatError(file, "num_shards is 0");
  if (p.collection.num_docs > 0 && !(p.collection.avg_doc_length > 0))
    throw IndexFormatError(file, "avg_doc_length must be positive");
  return p;
}

json to_json(const ShardManifest& m) {
  json files = json::object();
  for (const auto& [name, rec] : m.files) files[name] = {{"bytes", rec.bytes}, {"xxh3", rec.xxh3}};
  json j = to_json(m.params);
  j["format"] = "gpusearch-shard";
  j["shard"] = {{"id", m.shard_id},
                {"num_docs", m.num_docs},
                {"num_postings", m.num_postings},
                {"num_blocks", m.num_blocks},
                {"postings_words", m.postings_words}};
  j["files"] = files;
  return j;
}

ShardManifest shard_manifest_from_json(const json& j, const std::string& file) {
  ShardManifest m;
  m.params = params_from_json(j, file);
  field(file, "shard", [&] {
    const json& s = j.at("shard");
    m.shard_id = s.at("id").get<std::uint32_t>();
    m.num_docs = s.at("num_docs").get<std::uint32_t>();
    m.num_postings = s.at("num_postings").get<std::uint64_t>();
    m.num_blocks = s.at("num_blocks").get<std::uint64_t>();
    m.postings_words = s.at("postings_words").get<std::uint64_t>();
    return 0;
  });
  field(file, "files", [&] {
    for (const char* name : shard_files::kAll) {
      const json& f = j.at("files").at(name);
      m.files[name] = {f.at("bytes").get<std::uint64_t>(), f.at("xxh3").get<std::uint64_t>()};
    }
    return 0;
  });
  return m;
}

ShardManifest read_shard_manifest(const std::filesystem::path& file) {
  return shard_manifest_from_json(read_json_file(file, "gpusearch-shard"), file.string());
}

RootManifest read_root_manifest(const std::filesystem::path& file) {
  const json j = read_json_file(file, "gpusearch-index");
  RootManifest m;
  m.params = params_from_json(j, file.string());
  field(file.string(), "shards", [&] {
    for (const json& s : j.at("shards")) {
      RootManifest::Shard sh;
      sh.dir = s.at("dir").get<std::string>();
      sh.num_docs = s.at("num_docs").get<std::uint32_t>();
      sh.num_postings = s.at("num_postings").get<std::uint64_t>();
      sh.manifest = {s.at("manifest_bytes").get<std::uint64_t>(),
                     s.at("manifest_xxh3").get<std::uint64_t>()};
      m.shards.push_back(std::move(sh));
    }
    return 0;
  });
  if (m.shards.size() != m.params.num_shards)
    throw IndexFormatError(file.string(), fmt::format("lists {} shards but num_shards is {}",
                                                      m.shards.size(), m.params.num_shards));
  return m;
}

void write_root_manifest(const std::filesystem::path& file, const RootManifest& m,
                         const json& extra) {
  json j = to_json(m.params);
  j["format"] = "gpusearch-index";
  json shards = json::array();
  for (const auto& s : m.shards)
    shards.push_back({{"dir", s.dir},
                      {"num_docs", s.num_docs},
                      {"num_postings", s.num_postings},
                      {"manifest_bytes", s.manifest.bytes},
                      {"manifest_xxh3", s.manifest.xxh3}});
  j["shards"] = shards;
  if (!extra.is_null()) j["build"] = extra;
  std::ofstream out(file);
  out << j.dump(2) << '\n';
  if (!out) throw Error("cannot write " + file.string());
}

std::uint64_t xxh3_of_file(const std::filesystem::path& file) {
  MappedFile f(file);
  return XXH3_64bits(f.data(), f.size());
}

}  // namespace gpusearch
