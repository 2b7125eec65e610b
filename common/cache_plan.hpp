// A GPU list-cache plan (paper 000, 3.3): for each shard, which block-aligned prefix of which
// posting lists the GPU list cache holds. Made offline from a training query log by
// partition/cache_planner; read by the ISN at start. A JSON file beside the index, versioned,
// with an XXH3 checksum of its contents and of the index manifest it was made for, so that a
// corrupt, stale or mismatched plan is refused with an error naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/types.hpp"

namespace gpusearch {

class Index;

inline constexpr const char* kCachePlanFormat = "gpusearch-cache-plan";
// Version 2: a list's bytes are its posting words only (block metadata stays resident on the
// device for the whole shard, gpu/device_list_cache), not words + 16 bytes per block.
inline constexpr int kCachePlanVersion = 2;

enum class CachePolicy { kVfb, kQtf, kQtfDf };
std::string_view to_string(CachePolicy p);
CachePolicy parse_cache_policy(std::string_view s);  // vfb | qtf | qtfdf; throws InputError

struct CachedList {
  TermId term = 0;
  std::uint32_t blocks = 0;  // the list's first `blocks` blocks are cached
  std::uint64_t bytes = 0;   // their posting words (cached_block_bytes)
};

struct ShardCachePlan {
  std::uint32_t shard = 0;
  std::vector<CachedList> lists;  // by term id
  std::uint64_t bytes = 0, blocks = 0;
  // Training-log block reads (as the engine's early-terminating AND would make them) and how
  // many of them the plan serves from the cache.
  std::uint64_t training_block_reads = 0, training_block_reads_cached = 0;
  // Of the lists, those no training query asked for (the spare budget's fill); made by the
  // planner, not kept in the plan file.
  std::uint64_t unqueried_lists = 0, unqueried_bytes = 0;
};

struct CachePlan {
  CachePolicy policy = CachePolicy::kVfb;
  double lambda = 1.0;              // most of a list admitted (VFB)
  std::uint64_t budget_bytes = 0;   // per shard (one GPU's list cache)
  unsigned k = 10;
  std::string scoring = "bm25";
  std::string training_file;
  std::uint64_t training_queries = 0;
  std::uint64_t index_manifest_xxh3 = 0;  // the index's manifest.json when the plan was made
  std::vector<ShardCachePlan> shards;

  void write(const std::filesystem::path& file) const;
  // Reads and checks a plan: format, version, checksum; with `index`, that it was made for
  // this index (manifest checksum) and that every list and block count exists in it. Throws
  // InputError naming the file.
  static CachePlan read(const std::filesystem::path& file, const Index* index = nullptr);
};

// Bytes the cache spends on posting words (block metadata is resident for the whole shard).
std::uint64_t cached_block_bytes(std::uint64_t posting_words);

}  // namespace gpusearch
