// The on-disk index: one root manifest.json naming N shard folders, each self-contained for one
// ISN (shard.json plus flat, mmap-able little-endian arrays). Every shard carries the global
// vocabulary and the collection-wide N, df and avgdl, so a score never depends on the
// partitioning. Readers check the format version, every file's size, and (unless told not to)
// every file's XXH3 checksum, and name the offending file when one is wrong.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/block_codec.hpp"
#include "common/scoring.hpp"
#include "common/types.hpp"

namespace gpusearch {

inline constexpr int kIndexFormatVersion = 1;
inline constexpr const char* kRootManifestName = "manifest.json";
inline constexpr const char* kShardManifestName = "shard.json";

// Files of a shard folder. Element types in the comments; n = documents of the shard, T = terms
// of the global vocabulary, B = blocks of the shard.
namespace shard_files {
inline constexpr const char* kLexiconOffsets = "lexicon.offsets";  // u64[T+1]
inline constexpr const char* kLexiconStrings = "lexicon.strings";  // bytes, terms sorted
inline constexpr const char* kTerms = "terms.bin";                 // TermInfo[T]
inline constexpr const char* kBlockLastDocid = "blocks.last_docid";  // u32[B]
inline constexpr const char* kBlockMaxImpact = "blocks.max_impact";  // f32[B]
inline constexpr const char* kBlockOffsets = "blocks.offsets";  // u64[B+1], words in postings
inline constexpr const char* kPostings = "postings.bin";        // u32 words, posting blocks
inline constexpr const char* kDocLengths = "docs.length";       // u32[n], tokens
inline constexpr const char* kDocPagerank = "docs.pagerank";    // f32[n], PageRank / max
inline constexpr const char* kDocGlobalScore = "docs.gs";       // f32[n], non-increasing
inline constexpr const char* kDocGlobalRank = "docs.global_rank";    // u32[n]
inline constexpr const char* kDocInputPosition = "docs.input_pos";   // u32[n]
inline constexpr const char* kDocIdOffsets = "docs.extid.offsets";   // u64[n+1]
inline constexpr const char* kDocIdStrings = "docs.extid.strings";   // bytes
inline constexpr const char* kAll[] = {kLexiconOffsets, kLexiconStrings, kTerms, kBlockLastDocid,
                                       kBlockMaxImpact, kBlockOffsets,   kPostings, kDocLengths,
                                       kDocPagerank,    kDocGlobalScore, kDocGlobalRank,
                                       kDocInputPosition, kDocIdOffsets, kDocIdStrings};
}  // namespace shard_files

// One term of a shard. Its posting list is blocks [first_block, first_block + num_blocks).
struct TermInfo {
  std::uint64_t first_block;
  std::uint32_t num_blocks;
  std::uint32_t df_shard;   // postings in this shard
  std::uint32_t df_global;  // documents containing the term in the whole collection
  float max_impact;         // largest impact(d, t) over the shard's postings (0 if none)
};
static_assert(sizeof(TermInfo) == 24);

// How documents are split into shards.
//  input-ranges: shard s holds a contiguous range of the input order (as URL order would give)
//    and numbers its documents in GS order. Every shard gets a fair mix of high- and low-GS
//    documents, so load is even and each shard terminates early on its own.
//  gs-tiers: shard s holds a contiguous range of the global GS order. Shard 0 holds the best
//    documents; later tiers can often be skipped by a tiered aggregator, but load is skewed.
//  round-robin: document p of the input order goes to shard p mod S (as hashing documents to
//    shards would): every shard is a uniform sample of the collection, so a query's lists split
//    evenly and the shards' work per query is as equal as it gets. Input ranges follow the
//    input's locality (sites, topics): four quarter shards of the synthetic 1M collection took
//    up to 7% more or less than their mean per batch (issue 16).
enum class SplitMode { kInputRanges, kGsTiers, kRoundRobin };
std::string_view to_string(SplitMode m);
SplitMode parse_split_mode(std::string_view s);

struct FileRecord {
  std::uint64_t bytes = 0;
  std::uint64_t xxh3 = 0;
};

// Parameters and statistics every shard and the root manifest repeat.
struct IndexParams {
  int format_version = kIndexFormatVersion;
  codec::Codec codec = codec::Codec::kPForDelta;
  Bm25Params bm25;
  double gs_alpha = 0.3;  // the alpha GS(d) and the docID order were built with
  double pagerank_damping = 0.85;
  int pagerank_iterations = 0;
  bool has_links = false;
  CollectionStats collection;
  std::uint64_t num_terms = 0;           // global vocabulary
  std::uint64_t num_postings_total = 0;  // all shards
  std::uint32_t num_shards = 1;
  SplitMode split = SplitMode::kInputRanges;
};

struct ShardManifest {
  IndexParams params;
  std::uint32_t shard_id = 0;
  std::uint32_t num_docs = 0;
  std::uint64_t num_postings = 0;
  std::uint64_t num_blocks = 0;
  std::uint64_t postings_words = 0;
  std::map<std::string, FileRecord> files;
};

struct RootManifest {
  IndexParams params;
  struct Shard {
    std::string dir;
    std::uint32_t num_docs = 0;
    std::uint64_t num_postings = 0;
    FileRecord manifest;
  };
  std::vector<Shard> shards;
};

nlohmann::json to_json(const IndexParams& p);
IndexParams params_from_json(const nlohmann::json& j, const std::string& file);
nlohmann::json to_json(const ShardManifest& m);
ShardManifest shard_manifest_from_json(const nlohmann::json& j, const std::string& file);

// Reads and validates a manifest file; throws IndexFormatError naming it.
ShardManifest read_shard_manifest(const std::filesystem::path& file);
RootManifest read_root_manifest(const std::filesystem::path& file);
// Writes the root manifest; `extra` (e.g. the build report) is stored under "build".
void write_root_manifest(const std::filesystem::path& file, const RootManifest& m,
                         const nlohmann::json& extra);

std::uint64_t xxh3_of_file(const std::filesystem::path& file);
std::string shard_dir_name(std::uint32_t shard_id);

}  // namespace gpusearch
