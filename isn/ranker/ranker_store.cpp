#include "isn/ranker/ranker_store.hpp"

#include <xxhash.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

namespace gpusearch::ranker {

namespace fs = std::filesystem;

RankerStore RankerStore::open(const fs::path& dir) {
  return RankerStore(read_store_index(dir));
}

std::uint64_t checksum_files(const std::vector<fs::path>& files) {
  XXH3_state_t* state = XXH3_createState();
  if (!state) throw Error("out of memory");
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> owner(state, &XXH3_freeState);
  XXH3_64bits_reset(state);
  std::vector<char> buf(1 << 16);
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw RankerError(f.string(), "cannot open");
    while (in) {
      in.read(buf.data(), std::streamsize(buf.size()));
      XXH3_64bits_update(state, buf.data(), std::size_t(in.gcount()));
    }
  }
  return XXH3_64bits_digest(state);
}

std::shared_ptr<const CompiledRanker> RankerStore::load(std::string_view name) const {
  const StoreEntry* e = index_.find(name);
  if (!e)
    throw RankerError(index_.index_file().string(),
                      fmt::format("no ranker named '{}' in the store", name));
  const fs::path file = index_.dir / e->file;
  RankerSpec spec = read_ranker_file(file);
  if (spec.name != e->name)
    throw RankerError(file.string(), fmt::format("names ranker '{}' but {} lists it as '{}'",
                                                 spec.name, index_.index_file().string(), e->name));
  const std::uint64_t sum = checksum_files(spec.files);
  if (sum != e->checksum)
    throw RankerError(
        file.string(),
        fmt::format("its files changed since the store was indexed (checksum {:016x}, "
                    "{} records {:016x}; re-run `gpusearch ranker-store index`)",
                    sum, index_.index_file().string(), e->checksum));
  auto compiled =
      std::make_shared<CompiledRanker>(compile(spec, ColumnSpace::kCatalog, file.string()));
  if (compiled->bytes() != e->bytes)
    throw RankerError(file.string(),
                      fmt::format("compiles to {} bytes but {} records {} (a store indexed by an "
                                  "older gpusearch: re-run `gpusearch ranker-store index`)",
                                  compiled->bytes(), index_.index_file().string(), e->bytes));
  return compiled;
}

StoreIndex index_ranker_store(const fs::path& dir) {
  StoreIndex index;
  index.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(dir.string(), 0, "not a directory");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string fname = entry.path().filename().string();
    const std::string suffix = kRankerFileSuffix;
    if (fname.size() <= suffix.size() ||
        fname.compare(fname.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const RankerSpec spec = read_ranker_file(entry.path());
    const CompiledRanker r = compile(spec, ColumnSpace::kCatalog, entry.path().string());
    StoreEntry e;
    e.name = spec.name;
    e.file = fname;
    e.bytes = r.bytes();
    e.inputs = r.model_inputs;
    e.trees = r.trees;
    e.layers = std::uint32_t(r.layers.size());
    e.checksum = checksum_files(spec.files);
    index.rankers.push_back(std::move(e));
  }
  std::sort(index.rankers.begin(), index.rankers.end(),
            [](const StoreEntry& a, const StoreEntry& b) { return a.name < b.name; });
  write_store_index(index);
  return index;
}

}  // namespace gpusearch::ranker
