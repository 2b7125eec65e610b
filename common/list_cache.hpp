// The host side of the GPU list cache (paper 000, 3.1.2, 3.1.5, 3.4), shared by the GPU engine
// (gpu/device_list_cache) and its CPU twin (isn/cached_cpu_engine), so that the addressing and
// the batching are tested on machines without a GPU (tests/unit/list_cache_test.cpp):
//   DeviceBlockNumbering  where each block's metadata and offset sit on the device: every list's
//                         blocks, then one spare slot that ends the list's last available block;
//   ListCacheDirectory    the directory (term -> cached prefix, its words in the cache region)
//                         and the cache region's allocation, moved toward a plan by apply()
//                         (common/list_cache_directory.cpp);
//   plan_list_batches     batches cut so that the lists their queries need and the cache lacks
//                         fit the shipping region, the lists each ships, the block-offset table
//                         entries they re-point, and each query's horizon (docIDs below it are
//                         complete in every list the GPU sees);
//   prefix_answer_is_final  the test after the GPU: whether the top-k below a query's horizon
//                         is its answer, or the CPU must complete it from the horizon on.
// Words and offsets count 32-bit posting words.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/cache_plan.hpp"
#include "common/flat_term_map.hpp"
#include "common/query.hpp"
#include "common/search_result.hpp"
#include "common/types.hpp"

namespace gpusearch {

class ShardIndex;

class DeviceBlockNumbering {
 public:
  explicit DeviceBlockNumbering(const ShardIndex& shard);
  // Device slot of the list's first block; its blocks follow, then its spare slot.
  std::uint64_t first_slot(TermId t) const { return first_slot_[t]; }
  std::uint64_t num_slots() const { return num_slots_; }
  // The shard's per-block arrays laid out by slot (a spare slot repeats the list's last value).
  std::vector<DocId> slot_last_docid(const ShardIndex& shard) const;
  std::vector<float> slot_block_max(const ShardIndex& shard) const;

 private:
  std::vector<std::uint64_t> first_slot_;
  std::uint64_t num_slots_ = 0;
};

// One entry of a device block-offset table: slot -> word offset in the pool (relative to a
// region's base where the caller says so).
struct OffsetPatch {
  std::uint64_t slot = 0;
  std::uint64_t word_offset = 0;
};

// Posting words of the first `blocks` blocks of t's list.
std::uint64_t list_prefix_words(const ShardIndex& shard, TermId t, std::uint32_t blocks);
// Table entries of a list prefix placed at word `offset`: its blocks' starts and the end of its
// last block (the next slot: a later block of the list, or the spare slot).
void append_prefix_table_entries(const ShardIndex& shard, const DeviceBlockNumbering& numbering,
                                 TermId t, std::uint32_t blocks, std::uint64_t offset,
                                 std::vector<OffsetPatch>& out);

// Posting words to copy from the shard's mapped postings into the pool.
struct WordCopy {
  std::uint64_t host_word_begin = 0, words = 0, pool_word_offset = 0;
};

struct CacheEntry {
  std::uint32_t blocks = 0;       // the list's first `blocks` blocks are cached
  std::uint64_t word_offset = 0;  // where they start in the cache region
  std::uint64_t words = 0;
  // Its position in the last plan that wanted it (0: the most valuable). Once a plan leaves it
  // out, it stays cached until a wanted list needs its room; the worst-placed goes first.
  std::uint32_t rank = 0;
};

// Words a rebuild slides down within the cache region (a list kept across the rebuild).
// host_word_begin says where they come from in the shard, for a device that copies them again
// instead.
struct WordRelocation {
  std::uint64_t from = 0, to = 0, words = 0;
  std::uint64_t host_word_begin = 0;
};

// Table entries of a relocated list, moved with it: every entry of slots [first_slot,
// first_slot + slots) gets delta added (modulo 2^64: a move down adds a negative delta). Valid
// because between calls every lane table holds the cache's own entries for the cached prefixes
// (a batch that ships over one restores them after its kernels), and a relocated prefix keeps
// its length: its blocks move as one. Regenerating its entries instead was 70% of apply()'s
// host time (perf, 2.5M documents, vfb at 1/10: 616K entries a change).
struct TableShift {
  std::uint64_t first_slot = 0, slots = 0, delta = 0;
};

// What apply() asks of the device: relocations within the cache region (in order: by `from`,
// each `to` at or below its `from` and its range ending at or before the next one's `from`, so
// that moving them one after another, or a group at a time through a scratch region, never
// overwrites words still to move), then copies into the region, then table entries (absolute
// word offsets) for every lane's table: the relocated lists' entries shifted (shifts), the
// copied lists' entries set (patches; no slot is in both).
struct CacheChange {
  std::vector<WordRelocation> relocations;
  std::vector<WordCopy> copies;
  std::vector<TableShift> shifts;
  std::vector<OffsetPatch> patches;
  std::uint64_t lists_added = 0, lists_removed = 0, lists_shrunk = 0, lists_skipped = 0;
  std::uint64_t lists_relocated = 0;
  std::uint64_t words_copied = 0;     // from the host
  std::uint64_t words_relocated = 0;  // within the region
  bool rebuilt = false;  // fragmentation: the region was compacted
  nlohmann::json to_json() const;
};

// One piece of a relocation through a scratch region: gathered from `from` to scratch offset
// `scratch`, then scattered to `to`.
struct RelocationPiece {
  std::uint64_t from = 0, to = 0, scratch = 0, words = 0;
};
// The relocations cut into groups that each fit scratch_words (pieces of at most
// max_piece_words, at most max_pieces a group), in order. A group gathered whole and then
// scattered, one group after another, moves every word right (the order apply() gives them);
// a relocation onto itself is left out.
std::vector<std::vector<RelocationPiece>> relocation_groups(
    std::span<const WordRelocation> relocations, std::uint64_t scratch_words,
    std::uint64_t max_piece_words, std::size_t max_pieces);

class ListCacheDirectory {
 public:
  ListCacheDirectory(const ShardIndex& shard, const DeviceBlockNumbering& numbering,
                     std::uint64_t capacity_bytes);
  // Moves the cache toward `target` (lists in priority order, most valuable first): shrunk
  // prefixes keep their place; new or longer prefixes are copied in priority order while
  // max_copy_bytes lasts, and the first copy of a change goes in whatever its size (at 1/50 of
  // the postings a sixteenth of the region, the online policy's limit, is less than many a
  // frequent list, which then never came in: session 36); a list that does not fit is
  // skipped. Lists not in `target` leave only when a copied list needs their room, worst rank
  // first: until then they still serve hits. Where fragmentation alone keeps lists out (over
  // 1/32 of the region), the region is laid out again (every list copied, whatever
  // max_copy_bytes says). At an eighth, a qtf cache at 1/25 of the postings stayed 8% empty and
  // served fewer queries than the offline plan on the H200 (0.86-0.97 of it); at 1/32 it fills,
  // for rebuilds at 2-8 of 23 changes (qtf; vfb 10-21) in bench_drift_headroom's replay
  // (session 36, NOTES-list-cache.md). Best fit
  // instead of first fit filled it only to 96.5% without the rebuilds. A rebuild compacts: the
  // lists it keeps slide down within the region (relocations, device to device), in their
  // order, and only lists it did not hold are copied from the host, in priority order within
  // max_copy_bytes (the first whatever its size). Rebuilds that copied the whole region from
  // the host took 17 ms a change for vfb at 1/10 on the H200, and calls that came meanwhile
  // waited (session 37). Call only while no batch that reads the cache is in flight.
  CacheChange apply(std::span<const CachedList> target, std::uint64_t max_copy_bytes = ~0ull);
  // Whether a rebuild's copies from the host keep to max_copy_bytes (default: no, as before).
  void set_compaction_copy_limit(bool on) { compaction_copy_limit_ = on; }

  // Read for every term of every query when a call is planned and packed: an array by term.
  std::uint32_t cached_blocks(TermId t) const {
    return t < blocks_by_term_.size() ? blocks_by_term_[t] : 0;
  }
  const CacheEntry* find(TermId t) const;
  // Every table entry the cache defines (a fresh lane table's contents).
  std::vector<OffsetPatch> table_entries() const;
  // The cached prefixes (unordered): what the online policy's gate compares a plan with.
  std::vector<CachedList> held_lists() const;
  std::uint64_t capacity_words() const { return capacity_words_; }
  std::uint64_t used_words() const { return used_words_; }
  std::uint64_t cached_blocks_total() const { return cached_blocks_total_; }
  std::size_t lists() const { return entries_.size(); }
  const std::unordered_map<TermId, CacheEntry>& entries() const { return entries_; }
  const DeviceBlockNumbering& numbering() const { return numbering_; }
  const ShardIndex& shard() const { return shard_; }

 private:
  bool allocate(std::uint64_t words, std::uint64_t& offset);
  void release(std::uint64_t offset, std::uint64_t words);
  void place(TermId t, std::uint32_t blocks, std::uint64_t offset, CacheChange& change);
  void clear();
  CacheChange apply_entries(std::span<const CachedList> target, std::uint64_t max_copy_bytes);
  // The rebuild: the region laid out again from the lists held before apply_entries began.
  CacheChange compact(std::span<const CachedList> target,
                      const std::unordered_map<TermId, std::uint32_t>& want,
                      const std::unordered_map<TermId, CacheEntry>& held_before,
                      std::uint64_t max_copy_bytes);
  // blocks_by_term_ from entries_ (after every change; only the terms held before and now).
  void refresh_blocks_by_term();
  const ShardIndex& shard_;
  const DeviceBlockNumbering& numbering_;
  std::uint64_t capacity_words_ = 0, used_words_ = 0, cached_blocks_total_ = 0;
  std::unordered_map<TermId, CacheEntry> entries_;
  std::vector<std::uint32_t> blocks_by_term_;    // entries_[t].blocks, 0 where t is not held
  std::vector<TermId> terms_held_;               // the terms blocks_by_term_ has nonzero
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> words, coalesced
  bool compaction_copy_limit_ = false;
};

// A list a batch ships: its first `blocks` blocks, at copy.pool_word_offset relative to the
// lane's shipping region.
struct ShippedList {
  TermId term = 0;
  std::uint32_t blocks = 0;
  WordCopy copy;
};

struct ListBatch {
  std::size_t begin = 0, end = 0;  // positions [begin, end) of the query order
  std::vector<DocId> horizon;      // per query of the batch: [0, horizon) is complete
  std::vector<ShippedList> shipped;
  std::vector<OffsetPatch> patches;  // word offsets relative to the shipping region
  // ship_tails: the cache's own entries (absolute) of the cached-in-part lists this batch
  // shipped whole, written back into the lane's table after the batch's kernels.
  std::vector<OffsetPatch> restores;
  std::uint64_t shipped_words = 0;
  // Bytes of the lane's shipping region the batch fills: its words, then (16-byte aligned) its
  // table entries and restores, which the device scatters into the lane's block-offset table.
  std::uint64_t region_bytes() const;
  // Per query and term: blocks (and bytes) the cache serves, the batch ships, neither (left to
  // post-processing if the query's answer needs them).
  std::uint64_t blocks_hit = 0, blocks_shipped = 0, blocks_unavailable = 0;
  std::uint64_t bytes_hit = 0, bytes_shipped = 0, bytes_unavailable = 0;
  std::uint32_t truncated_queries = 0;  // horizon below the shard's end
  // Blocks of term t the GPU sees in this batch.
  std::uint32_t available_blocks(const ListCacheDirectory& cache, TermId t) const;
  FlatTermMap shipped_blocks;
  // Empty again, its vectors' capacity kept (plan_list_batches' storage).
  void reset();
};

inline constexpr std::uint64_t kShipAlignmentBytes = 16;  // the table entries' alignment

struct ListBatchOptions {
  std::size_t max_queries = 4096;
  std::uint64_t ship_capacity_bytes = 0;  // one lane's shipping region (words and entries)
  // Beyond paper 000: a list cached in part ships whole where the region has room, instead
  // of truncating its queries at the cached prefix (post-processing traded for shipping).
  bool ship_tails = false;
};

// Counters of a run through the list cache, for the metrics JSON.
struct ListCacheCounters {
  std::uint64_t queries = 0, truncated = 0, post_processed = 0, cpu_only = 0, batches = 0;
  std::uint64_t blocks_hit = 0, blocks_shipped = 0, blocks_unavailable = 0;
  std::uint64_t bytes_hit = 0, bytes_shipped = 0, bytes_unavailable = 0;
  std::uint64_t bytes_shipped_deduplicated = 0;  // what the batches' copies carried
  double post_processing_seconds = 0;            // busy time of the post-processing threads
  void add(const ListBatch& batch);
  void add(const ListCacheCounters& o);
  // Hit rates (blocks, bytes: cache / (cache + shipped)), bytes shipped per batch, the
  // post-processed fraction.
  nlohmann::json to_json() const;
};

// Cuts queries (taken in `order`) into batches of at most max_queries whose shipped lists (words
// and table entries) fit ship_capacity_bytes. A list the cache lacks ships whole with the first
// batch query that needs it; a list cached in part is used as its cached prefix (paper 000, 3.1.2)
// or, with ship_tails, ships whole where it fits; a query whose lists do not fit an empty batch
// ships the prefixes that fit (its shorter lists first). With `storage`, batches a previous call
// returned there are reused (their vectors keep their capacity): a call's batches are built in
// memory already mapped (H200 host: planning them took 2-3x as long in fresh memory, whose pages
// fault as they are first written; session 39).
std::vector<ListBatch> plan_list_batches(const ListCacheDirectory& cache,
                                         std::span<const Query> queries,
                                         std::span<const std::size_t> order,
                                         const ListBatchOptions& options,
                                         std::vector<ListBatch>* storage = nullptr);

// The end (exclusive) of the docIDs the first `available` blocks of t cover completely: the
// shard's end when the list is whole.
DocId list_prefix_end(const ShardIndex& shard, TermId t, std::uint32_t available);

// Whether `prefix`, the query's answer over docIDs [0, horizon) (as ShardResult for the mode,
// and-or with and_matches and or_hits), is its answer over the whole shard: it holds k documents
// whose k-th score beats every later document's bound (the GS bound and the block maxima past
// the horizon), or no later document can match. Scores as SearchParams says. bound_scale
// multiplies the bound (1 keeps it safe; the tests weaken it and expect wrong answers).
bool prefix_answer_is_final(const ShardIndex& shard, const Query& query, const SearchParams& params,
                            DocId horizon, const ShardResult& prefix, double bound_scale = 1.0);

}  // namespace gpusearch
