// The ISN's side of a ranker store (common/ranker/store_index.hpp): loads a ranker by name,
// checks its files against the store's checksum, reads and compiles it (isn/ranker/ranker_file.hpp)
// for the feature-extraction rows. And the tool that indexes a folder of ranker files.
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>

#include "common/ranker/model_layout.hpp"
#include "common/ranker/store_index.hpp"
#include "isn/ranker/ranker_file.hpp"

namespace gpusearch::ranker {

class RankerStore {
 public:
  // Reads store.json (throws InputError naming it).
  static RankerStore open(const std::filesystem::path& dir);
  explicit RankerStore(StoreIndex index) : index_(std::move(index)) {}

  const StoreIndex& index() const { return index_; }
  const std::filesystem::path& dir() const { return index_.dir; }

  // Reads, verifies and compiles ranker `name`. Throws RankerError naming store.json for a name
  // it does not list, else the file at fault: missing, changed since indexing (checksum), or
  // malformed. A compiled size other than the index's is an error too (the aggregator plans
  // the caches with it).
  std::shared_ptr<const CompiledRanker> load(std::string_view name) const;

 private:
  StoreIndex index_;
};

// XXH3-64 over the files' contents, in order. Throws RankerError naming a file it cannot read.
std::uint64_t checksum_files(const std::vector<std::filesystem::path>& files);

// Reads and compiles every *.ranker.json in `dir` and writes store.json. Throws RankerError
// naming the first file that does not load.
StoreIndex index_ranker_store(const std::filesystem::path& dir);

}  // namespace gpusearch::ranker
