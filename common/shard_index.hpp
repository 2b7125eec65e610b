// Read side of the index: a shard folder mapped into memory, and the set of shards of an index.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/huge_page_array.hpp"
#include "common/index_format.hpp"
#include "common/mapped_file.hpp"

namespace gpusearch {

struct OpenOptions {
  // Hash every file and compare with the manifest. Sizes and structure are always checked.
  bool verify_checksums = true;
  // Copy the documents' external ids (their offsets and strings) out of the mapped files into
  // anonymous memory that asks for huge pages. An answer's ids are documents at random: with
  // 4 KiB pages of a mapped file, each look-up after the engine's work is two cache misses and
  // two TLB misses. The ISN's answer of 64 queries x 10 hits, 1M documents, caches swept: 25.7
  // -> 16.7 us on the build machine (bench_answer_path; NOTES-cluster.md, session 50). Costs the
  // tables' size in memory (about 20 bytes a document), not shared with the page cache.
  bool external_ids_in_huge_pages = false;
};

// The base b with ranks[d] == b + d for every d; nullopt where the run is broken (or empty).
std::optional<GlobalRank> contiguous_run_base(std::span<const GlobalRank> ranks);

class ShardIndex {
 public:
  // Opens and validates the shard folder `dir`; throws IndexFormatError naming the bad file.
  static std::unique_ptr<ShardIndex> open(const std::filesystem::path& dir,
                                          const OpenOptions& options = {});

  const ShardManifest& manifest() const { return manifest_; }
  const IndexParams& params() const { return manifest_.params; }
  const std::filesystem::path& dir() const { return dir_; }
  std::uint32_t num_docs() const { return manifest_.num_docs; }
  std::uint32_t num_terms() const { return static_cast<std::uint32_t>(terms_.size()); }

  // Vocabulary (global, sorted): binary search.
  std::optional<TermId> find_term(std::string_view term) const;
  std::string_view term_string(TermId t) const;
  const TermInfo& term(TermId t) const { return terms_[t]; }

  // Blocks of all lists, indexed by global block number.
  std::span<const DocId> block_last_docid() const { return block_last_docid_; }
  std::span<const float> block_max_impact() const { return block_max_impact_; }
  std::span<const std::uint64_t> block_offsets() const { return block_offsets_; }
  std::span<const std::uint32_t> postings() const { return postings_; }
  const std::uint32_t* block_data(std::uint64_t block) const {
    return postings_.data() + block_offsets_[block];
  }
  // Smallest docID block `block` of term t can hold: one past the previous block's last docID.
  DocId block_floor(const TermInfo& t, std::uint64_t block) const {
    return block == t.first_block ? 0 : block_last_docid_[block - 1] + 1;
  }

  // Documents, by shard-local docID (GS order).
  std::span<const std::uint32_t> doc_lengths() const { return doc_lengths_; }
  std::span<const float> pagerank() const { return pagerank_; }  // PageRank / max PageRank
  std::span<const float> global_scores() const { return global_scores_; }
  std::span<const GlobalRank> global_ranks() const { return global_ranks_; }
  // Where the shard's GS ranks are one contiguous run, rank(d) = base + d (a docID-range
  // partition of the GS-ordered collection: every index the builder writes), that base: a
  // reader computes the rank instead of a random read of global_ranks() (the GPU engine's
  // unpacking of k = 1000 answers spent 60% of its time on those reads). Else nullopt.
  std::optional<GlobalRank> contiguous_rank_base() const { return contiguous_rank_base_; }
  std::span<const std::uint32_t> input_positions() const { return input_positions_; }
  std::string_view external_id(DocId d) const;
  // Cache hints for a batch of external_id(d) calls: stage 0 asks for d's offsets, stage 1
  // (reading them: after stage 0) for its string. An answer's ids are the documents at random,
  // two dependent misses each (the ISN's encoding of 640 hits: 46 us).
  void prefetch_external_id(DocId d, int stage) const {
    if (stage <= 0)
      __builtin_prefetch(&docid_offsets_[d]);
    else
      __builtin_prefetch(docid_strings_.data() + docid_offsets_[d]);
  }

  // Decodes the whole posting list of t (for the reference engine and tools).
  void decode_list(TermId t, std::vector<DocId>& docs, std::vector<std::uint32_t>& freqs) const;

 private:
  ShardIndex() = default;
  std::filesystem::path dir_;
  ShardManifest manifest_;
  std::vector<MappedFile> files_;
  std::span<const std::uint64_t> lexicon_offsets_;
  std::span<const char> lexicon_strings_;
  std::span<const TermInfo> terms_;
  std::span<const DocId> block_last_docid_;
  std::span<const float> block_max_impact_;
  std::span<const std::uint64_t> block_offsets_;
  std::span<const std::uint32_t> postings_;
  std::span<const std::uint32_t> doc_lengths_;
  std::span<const float> pagerank_;
  std::span<const float> global_scores_;
  std::span<const GlobalRank> global_ranks_;
  std::optional<GlobalRank> contiguous_rank_base_;
  std::span<const std::uint32_t> input_positions_;
  std::span<const std::uint64_t> docid_offsets_;
  std::span<const char> docid_strings_;
  // OpenOptions::external_ids_in_huge_pages: the copies that docid_offsets_ and docid_strings_
  // then view.
  HugePageArray<std::uint64_t> docid_offsets_copy_;
  HugePageArray<char> docid_strings_copy_;
};

// An index: the root manifest and some or all of its shards.
class Index {
 public:
  // Opens every shard.
  static Index open(const std::filesystem::path& dir, const OpenOptions& options = {});
  // Opens only shard `shard_id` (what one ISN serves).
  static Index open_shard(const std::filesystem::path& dir, std::uint32_t shard_id,
                          const OpenOptions& options = {});

  const RootManifest& manifest() const { return manifest_; }
  const IndexParams& params() const { return manifest_.params; }
  const std::filesystem::path& dir() const { return dir_; }
  std::size_t num_open_shards() const { return shards_.size(); }
  const ShardIndex& shard(std::size_t i) const { return *shards_[i]; }
  std::uint32_t shard_id(std::size_t i) const { return shard_ids_[i]; }

 private:
  static void open_into(Index& index, std::uint32_t shard_id, const OpenOptions& options);
  std::filesystem::path dir_;
  RootManifest manifest_;
  std::vector<std::unique_ptr<ShardIndex>> shards_;
  std::vector<std::uint32_t> shard_ids_;
};

}  // namespace gpusearch
