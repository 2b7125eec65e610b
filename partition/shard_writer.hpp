// Writes an index directory from a document table and a source of postings keyed by input
// position: assigns documents to shards (input ranges or GS tiers), numbers them in GS order,
// compresses every list into 128-posting blocks with block-max impacts, and writes each shard's
// files and manifests (checksums computed while writing). The index builder and the
// re-partitioner both end here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/index_format.hpp"
#include "partition/string_table.hpp"

namespace gpusearch {

// Per document, by input position (the order the corpus gave).
struct DocTable {
  std::vector<std::uint32_t> length;
  std::vector<float> pagerank;  // PageRank / max PageRank
  std::vector<float> global_score;
  std::vector<GlobalRank> global_rank;  // position in the collection-wide GS order
  StringTable external_ids;
  std::size_t size() const { return length.size(); }
};

class PostingSource {
 public:
  virtual ~PostingSource() = default;
  virtual std::uint32_t num_terms() const = 0;                // the final, sorted vocabulary
  virtual std::string_view term(std::uint32_t t) const = 0;   // strictly increasing in t
  virtual std::uint32_t df(std::uint32_t t) const = 0;
  // (input position, tf) pairs of term t in any order. Called from several threads at once.
  virtual void postings(std::uint32_t t,
                        std::vector<std::pair<std::uint32_t, std::uint32_t>>& out) const = 0;
};

// Token streams by input position: term IDs of the final vocabulary (PostingSource's), in
// document order; what the optional forward index stores. Called from one thread.
class TokenStreamSource {
 public:
  virtual ~TokenStreamSource() = default;
  virtual void tokens(std::uint32_t input_position, std::vector<TermId>& out) const = 0;
};

struct WriteOptions {
  std::uint32_t num_shards = 1;
  SplitMode split = SplitMode::kInputRanges;
  codec::Codec codec = codec::Codec::kPForDelta;
  bool progress = true;
  bool force = false;  // replace an existing index in the output directory
  bool directory_prepared = false;  // the caller already ran prepare_output_directory
  // Non-null: write each shard's forward index (common/forward_index.hpp) from these streams.
  const TokenStreamSource* token_streams = nullptr;
};

// params: the collection statistics and scoring parameters (codec, shards, split are set from
// options). Returns the write report (bytes, bits per posting, shards) as JSON; `build_info` is
// stored in the root manifest together with it.
nlohmann::json write_index(const std::filesystem::path& dir, const DocTable& docs,
                           const PostingSource& source, IndexParams params,
                           const WriteOptions& options, const nlohmann::json& build_info);

// Checks that `dir` can receive an index (absent, empty, or an index and force is set) and
// clears a replaced index (its manifest, shards and query logs).
void prepare_output_directory(const std::filesystem::path& dir, bool force);

}  // namespace gpusearch
