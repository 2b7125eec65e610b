#include "common/ranker/store_index.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace gpusearch::ranker {

namespace fs = std::filesystem;

namespace {
bool plain_name(std::string_view name) {
  if (name.empty() || name.size() > 160 || name.front() == '.') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}
}  // namespace

bool valid_ranker_name(std::string_view name) {
  return plain_name(name) && name.size() <= 128;
}

const StoreEntry* StoreIndex::find(std::string_view name) const {
  const auto it =
      std::lower_bound(rankers.begin(), rankers.end(), name,
                       [](const StoreEntry& e, std::string_view n) { return e.name < n; });
  return it != rankers.end() && it->name == name ? &*it : nullptr;
}

StoreIndex read_store_index(const fs::path& dir) {
  StoreIndex index;
  index.dir = dir;
  const std::string src = index.index_file().string();
  std::ifstream in(index.index_file());
  if (!in)
    throw InputError(src, 0,
                     "cannot open the ranker store's index (make it with `gpusearch "
                     "ranker-store index --store DIR`)");
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (j.value("format", "") != "gpusearch-ranker-store")
      throw InputError(src, 0, "not a ranker store index");
    if (j.value("version", 0) != kStoreFormatVersion)
      throw InputError(src, 0,
                       fmt::format("version {} (this build reads {})", j.value("version", 0),
                                   kStoreFormatVersion));
    for (const auto& r : j.at("rankers")) {
      StoreEntry e;
      e.name = r.at("name").get<std::string>();
      e.file = r.at("file").get<std::string>();
      e.bytes = r.at("bytes").get<std::uint64_t>();
      e.inputs = r.value("inputs", 0u);
      e.trees = r.value("trees", 0u);
      e.layers = r.value("layers", 0u);
      e.checksum = r.at("checksum_xxh3").get<std::uint64_t>();
      if (!plain_name(e.name) || e.name.size() > 128)
        throw InputError(src, 0, fmt::format("'{}' is not a valid ranker name", e.name));
      if (!plain_name(e.file))
        throw InputError(src, 0,
                         fmt::format("ranker '{}': file '{}' is not a plain file name in "
                                     "the store",
                                     e.name, e.file));
      index.rankers.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(src, 0, fmt::format("malformed: {}", e.what()));
  }
  std::sort(index.rankers.begin(), index.rankers.end(),
            [](const StoreEntry& a, const StoreEntry& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < index.rankers.size(); ++i)
    if (index.rankers[i].name == index.rankers[i - 1].name)
      throw InputError(src, 0, fmt::format("ranker '{}' listed twice", index.rankers[i].name));
  return index;
}

void write_store_index(const StoreIndex& index) {
  nlohmann::json rankers = nlohmann::json::array();
  for (const StoreEntry& e : index.rankers)
    rankers.push_back({{"name", e.name},
                       {"file", e.file},
                       {"bytes", e.bytes},
                       {"inputs", e.inputs},
                       {"trees", e.trees},
                       {"layers", e.layers},
                       {"checksum_xxh3", e.checksum}});
  const nlohmann::json j = {
      {"format", "gpusearch-ranker-store"}, {"version", kStoreFormatVersion}, {"rankers", rankers}};
  std::ofstream out(index.index_file());
  out << j.dump(1) << '\n';
  if (!out) throw Error("cannot write " + index.index_file().string());
}

}  // namespace gpusearch::ranker
