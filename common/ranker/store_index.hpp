// The index of a ranker store (paper 004, 3.6: "the index server has a ranker store"): a folder
// of ranker files (isn/ranker/ranker_file.hpp) and store.json naming each ranker with its file,
// the bytes it occupies in a ranker cache once compiled, and a checksum of its files. The ISN
// loads rankers from the folder; the aggregator reads only store.json, to know every ranker's
// size when it plans the ISNs' caches.
//
// store.json:
//   {"format": "gpusearch-ranker-store", "version": 1,
//    "rankers": [{"name": "R-S-BLG", "file": "R-S-BLG.ranker.json", "bytes": 10240,
//                 "inputs": 125, "trees": 0, "layers": 1, "checksum_xxh3": 123...}, ...]}
// Rankers are listed by name; that order is the rank order of a Zipf ranker mix.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace gpusearch::ranker {

inline constexpr const char* kStoreIndexName = "store.json";

// Ranker names travel on the wire and name files: 1-128 of [A-Za-z0-9._-], not starting with '.'.
bool valid_ranker_name(std::string_view name);
inline constexpr int kStoreFormatVersion = 1;

struct StoreEntry {
  std::string name;
  std::string file;         // the ranker file, relative to the store
  std::uint64_t bytes = 0;  // compiled: transforms, tree nodes, net weights
  std::uint32_t inputs = 0, trees = 0, layers = 0;
  std::uint64_t checksum = 0;  // XXH3-64 over the ranker's files, in the order it reads them
};

struct StoreIndex {
  std::filesystem::path dir;
  std::vector<StoreEntry> rankers;  // sorted by name
  const StoreEntry* find(std::string_view name) const;
  std::filesystem::path index_file() const { return dir / kStoreIndexName; }
};

// Throws InputError naming store.json when it is missing or malformed (unknown format or
// version, a bad ranker name, a name twice, a file outside the store).
StoreIndex read_store_index(const std::filesystem::path& dir);
void write_store_index(const StoreIndex& index);

}  // namespace gpusearch::ranker
