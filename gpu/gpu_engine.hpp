// The GPU engine behind the ISN's QueryEngine interface: the shard lives in device memory
// (DeviceShard) and every call to search() runs its queries in batches of batch_size, sorted
// into cost order first (paper 003) so that one long query does not hold up a launch, through
// two CUDA streams so that one batch's copies overlap another's kernels; each batch goes in with
// one host-to-device copy and comes back with one device-to-host copy. Within a batch each
// query is cut into docID segments, one thread block each, in proportion to its cost, so that
// a small batch fills the GPU as well as a large one (batch_layout.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cache_swapper.hpp"
#include "common/list_cache.hpp"
#include "common/query_engine.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {
class OnlineCachePolicy;
}

namespace gpusearch::gpu {

struct GpuEngineOptions {
  int device = -1;                // -1: the process's current device
  // bmw: OR by block-max WAND over each query's threads (paper 002), AND with GS early
  // termination; window: OR by accumulator windows skipped on block-max bounds; exhaustive:
  // no pruning at all; warp: the OR phase by the warp kernel (below) where it applies, window
  // elsewhere; auto (the default): the warp kernel where it applies, else bmw for batches of at
  // most 256 long queries (lower latency on long lists), window otherwise (gpu_engine.cpp,
  // kLongQueryPostings); for OR-mode launches of 2,048 or more long queries, window on
  // 4,096-document windows of 128 threads instead of or_window:or_threads (kAutoNarrowOrMinBatch).
  std::string algorithm = "auto";
  unsigned batch_size = 4096;     // queries per launch
  unsigned or_window = 8192;      // OR accumulator window, in documents (shared memory)
  unsigned or_threads = 256;      // threads per OR segment (32 ... 1024) sharing a window
  // warp: OR with one accumulator window of or_warp_window documents per warp, MaxScore-pruned
  // (gpu/or_warp_kernel.hpp), where the posting layout is decoded, k <= 1024 and a launch's
  // queries have at most 32 terms; other launches run window. auto and exhaustive (unpruned)
  // take it where k <= 32 as well.
  unsigned or_warp_window = 1536;
  bool or_stage_blocks = false;   // OR: stage each posting block in shared memory to decode it
  // AND and OR: where each segment's running top-k lives: auto (shared memory unless a
  // global-memory row lets more blocks reside, as at k = 1000), shared or global
  // (query_kernels.hpp, TopKMemory).
  std::string topk_memory = "auto";
  // How the OR kernel reads postings (device_shard.hpp, PostingLayout): compressed (decoded by
  // the kernel), decoded (each posting's docID and impact, 8 bytes, built on the device when
  // the engine starts) or auto: decoded where it takes at most half of the device's free
  // memory and the whole shard is resident (no list cache).
  std::string posting_layout = "auto";
  unsigned bmw_threads = 128;     // bmw: P, threads that split a query's docID space
  bool cost_order = true;         // sort queries by shortest-list length before batching
  // A call of more than batch_size queries: its first launch (in cost order the costliest
  // queries, the last to finish) takes the remainder n % batch_size, so that the copy and the
  // unpacking after the last kernel are the smallest launch's (gpu_engine.cpp, plan_launches).
  bool remainder_first = true;
  // and-or's cost order counts the OR phase of the queries expected to run it (gpu_engine.cpp,
  // and_or_costs); false: by the AND phase's cost alone.
  bool and_or_cost_estimate = true;
  // Work decomposition: a batch aims at blocks_per_sm thread blocks per multiprocessor; a query
  // gets one segment per min_segment_postings of its cost at least, and at most
  // max_segments_per_query (1: one block per query). 0: by batch size (finer for small
  // batches, whose latency is their slowest query's; gpu_engine.cpp, segment_targets).
  unsigned blocks_per_sm = 0;
  unsigned min_segment_postings = 0;
  unsigned max_segments_per_query = 64;
  // Tests only: every pruning bound is multiplied by this (1 keeps them safe); the weakened-bound
  // test sets 0.97 and expects wrong answers.
  float bound_scale = 1.0f;
  // OR (window, bmw): each query's running k-th score starts from a lower bound instead of 0:
  // the largest weight_t * (k-th largest impact of t's list) over its terms
  // (common/kth_impact_table.hpp, built when the engine starts). Whole-shard engines without
  // the list cache only.
  bool threshold_seed = true;
  // Tests only: the seed is multiplied by this (1 keeps it a lower bound); the inflated-seed
  // test sets it above 1 and expects wrong answers.
  double threshold_seed_scale = 1.0;
  // Several GPUs per ISN (gpu/multi_gpu_engine.hpp): this engine answers over the shard's
  // docIDs [doc_begin, doc_end) only (doc_end 0: to the end of the shard).
  std::uint32_t doc_begin = 0, doc_end = 0;
  // The GPU list cache (paper 000; gpu/device_list_cache.hpp): the shard's posting words are
  // not uploaded whole; a cache region of cache_bytes holds the prefixes apply_cache_plan()
  // gives, and each batch ships what it lacks within batch_bytes (both lanes). Queries the GPU
  // saw truncated lists for are completed on postprocess_threads CPU threads (0: the host's
  // hardware threads less one) by the post-processor (set_post_processor).
  bool list_cache = false;
  std::uint64_t cache_bytes = 0, batch_bytes = 0;
  unsigned postprocess_threads = 0;
  bool ship_tails = false;  // a list cached in part ships whole where it fits (ListBatchOptions)
  // Tests only: scales the bound the host's finality test uses after a truncated batch (1
  // keeps it safe; the weakened-bound test lowers it and expects wrong answers).
  double finality_bound_scale = 1.0;
  // Tests only: from this search() call on (counting from 1), the engine makes a real failing
  // CUDA call and throws CudaError through its checked path; 0: never.
  std::uint64_t inject_fault_at_call = 0;
};

// Timings and traffic of one launch.
struct GpuBatchStats {
  std::uint32_t queries = 0;
  double pack_ms = 0, h2d_ms = 0, kernel_ms = 0, d2h_ms = 0, unpack_ms = 0;
  std::uint64_t h2d_bytes = 0, d2h_bytes = 0, postings_bytes_read = 0, postings_decoded = 0;
  std::uint64_t early_termination_rounds_saved = 0;  // AND rounds and OR windows not run
  std::uint32_t and_segments = 0, or_segments = 0;   // thread blocks of the two phases
  std::uint64_t shipped_bytes = 0;                   // list cache: lists shipped with the batch
  std::uint32_t post_processed = 0;                  // list cache: queries completed on the CPU
  unsigned or_window = 0, or_threads = 0;            // the OR kernel's shape in this launch
  unsigned or_warp_window = 0;  // > 0: the warp kernel ran this launch's OR, with this window
  // Timeline, ms from the start of the engine call that ran the batch: host steps on the host's
  // steady clock, device steps from CUDA events against an event recorded at the call's start
  // (an idle stream runs it at once, so both clocks start together). Shows which side of the
  // pipeline waits: the host in `finish_launch` (host_wait) or the device between batches.
  struct Timeline {
    double host_pack_begin = 0, host_launched = 0;                  // packing, then issuing
    double device_h2d_begin = 0, device_kernels_begin = 0, device_kernels_end = 0,
           device_d2h_end = 0;
    double host_wait_begin = 0, host_wait_end = 0, host_unpack_end = 0;  // `finish_launch`
  } timeline;
};


std::vector<std::string> gpu_algorithms();
// Whether a CUDA device is usable by this process, and how many.
bool gpu_available();
int gpu_device_count();

class GpuEngine final : public QueryEngine {
 public:
  // Uploads the shard. Throws CudaError when there is no device or it runs out of memory.
  GpuEngine(const ShardIndex& shard, std::uint32_t shard_id, GpuEngineOptions options = {});
  ~GpuEngine() override;
  std::string_view name() const override { return "gpu"; }
  bool runs_batch_in_parallel() const override { return true; }  // its own launches
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;
  nlohmann::json stats() const override;
  const std::vector<GpuBatchStats>& batch_stats() const { return batches_; }
  void clear_stats();  // per-batch figures and list-cache counters
  // The engine for queries the kernels do not take (more than kMaxGpuTerms terms); without
  // one, the reference engine answers them. The ISN's factory sets the CPU engine.
  void set_host_engine(std::unique_ptr<QueryEngine> engine);
  // Several GPUs per ISN: runs `queries` (at most batch_size, each with at most kMaxGpuTerms
  // terms, k > 0) as one launch in the order given, and leaves the answers on the device
  // instead of copying them back: the returned pointer (device memory, valid until the next
  // call) holds 2 * queries rows of width k in gpu/topk_rows.hpp's layout, row 2q query q's
  // first answer (AND for and-or, with its AND matches), row 2q + 1 and-or's OR answer. The
  // launch is complete when this returns.
  const void* search_into_device_rows(std::span<const Query> queries, const SearchParams& params);

  // List cache (options.list_cache) only. Completes a query over [from_doc, end of shard) given
  // its answer over [0, from_doc) (CpuEngine::resume's contract); the ISN's factory sets the CPU
  // engine's resume. Without one, the reference engine answers the whole query again.
  using PostProcessor = std::function<ShardResult(const Query&, const SearchParams&, DocId from_doc,
                                                  const ShardResult& running)>;
  void set_post_processor(PostProcessor post_processor);
  // Moves the cache toward `lists` (a plan, most valuable first; ListCacheDirectory::apply).
  // Between search() calls only.
  CacheChange apply_cache_plan(std::span<const CachedList> lists,
                               std::uint64_t max_copy_bytes = ~0ull);
  // An online policy (common/online_cache_policy.hpp) that watches the queries; its new plans
  // are applied, at most max_copy_bytes copied each, in the gaps between search() calls by a
  // thread of the engine's (kGaps, common/cache_swapper.hpp), or at the start of the next call
  // (kCalls).
  void set_online_policy(std::shared_ptr<OnlineCachePolicy> policy, std::uint64_t max_copy_bytes,
                         CacheSwapTiming swap = CacheSwapTiming::kGaps);
  // Blocks until every plan the online policy has made is applied (tests, benchmarks; kGaps).
  void settle_cache_swaps() const;
  bool has_list_cache() const;
  // Adds `value` under `key` to stats() (how the engine was set up).
  void annotate_stats(const std::string& key, nlohmann::json value);
  const ListCacheCounters& list_cache_counters() const;

 private:
  void search_batches(std::span<const Query> queries, const SearchParams& params,
                      std::span<ShardResult> out);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<GpuBatchStats> batches_;
};

}  // namespace gpusearch::gpu
