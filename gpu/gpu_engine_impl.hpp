// The GPU engine's private state (gpu_engine.cpp plans a call and runs its pipeline,
// gpu_engine_launch.cpp packs, issues and finishes one launch, gpu_engine_setup.cpp builds the
// engine and reports its figures): the lanes a call's launches rotate over, a call's plan, and
// Impl.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cache_swapper.hpp"
#include "common/kth_impact_table.hpp"
#include "common/online_cache_policy.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/device_list_cache.hpp"
#include "gpu/device_shard.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/post_processing.hpp"
#include "gpu/query_kernels.hpp"
#include "gpu/segment_plan.hpp"

namespace gpusearch::gpu {

inline double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// One of the pipelines (GpuEngine::Impl::lanes): its stream, its pinned and device buffers, the
// batch it carries.
struct Lane {
  CudaStream stream;
  PinnedBuffer<std::byte> host_in, host_out;
  DeviceBuffer<std::byte> dev_in, dev_out, dev_scratch;
  CudaEvent start, after_h2d, after_kernels, after_d2h;
  std::vector<std::size_t> query_index;  // positions in the caller's span
  std::vector<DocId> horizon;            // list cache: per slot, [0, horizon) was processed
  std::size_t out_bytes = 0, in_bytes = 0;
  GpuBatchStats stats;
  bool pending = false;

  // The device steps of the timeline, from the lane's events against the call's start.
  void record_device_timeline(const CudaEvent& call_start) {
    GpuBatchStats::Timeline& t = stats.timeline;
    t.device_h2d_begin = start.ms_since(call_start);
    t.device_kernels_begin = after_h2d.ms_since(call_start);
    t.device_kernels_end = after_kernels.ms_since(call_start);
  }
};

// One search() call's plan (gpu_engine.cpp, plan_call and plan_launches): which queries the
// kernels take, in what order and cut into which launches, and the kernels' shape. Every launch
// of the call reads it.
struct CallPlan {
  CallPlan(std::span<const Query> q, const SearchParams& p) : queries(q), params(p), k(p.k) {}

  std::span<const Query> queries;
  const SearchParams& params;
  unsigned k = 0;
  bool run_and = false, run_or = false;
  // The algorithm's choices (gpu_engine.cpp, plan_call, says why).
  bool bmw_always = false, bmw_small_batches = false, pruned = false, warp_or = false;
  unsigned warp_max_k = 0;  // the warp kernel runs launches of k up to this
  DeviceListCache* cache = nullptr;  // the list cache, or none (the whole shard is resident)
  bool decoded_layout = false;
  DocId shard_end = 0;
  std::vector<std::size_t> gpu_queries, host_queries;  // positions in `queries`
  // Costs per query: the shortest list (AND's candidates) and the sum of the lists (OR's
  // postings), and the shortest and longest lists themselves.
  std::vector<std::uint64_t> and_cost, or_cost;
  std::vector<const TermInfo*> shortest, longest;
  std::vector<ListBatch> list_batches;  // list cache: launch i ships list_batches[i]
  double list_batches_seconds = 0;      // planning them (plan_launches)
  std::vector<std::size_t> bounds;      // launch i runs gpu_queries [bounds[i], bounds[i + 1])
  OrKernelConfig or_config;
  std::size_t num_lanes = 1;  // lanes the call uses

  std::size_t launches() const { return bounds.size() - 1; }
  bool long_queries(std::size_t begin, std::size_t end) const;
  bool warp_launch(unsigned max_terms) const;
  bool bmw_launch(std::size_t begin, std::size_t end) const;
  std::size_t and_topk_row(unsigned max_terms, std::size_t segments, std::size_t nq) const;
  std::size_t or_topk_row(unsigned max_terms, std::size_t segments, std::size_t nq) const;
};

// Host vectors a call reuses from launch to launch (allocated once a call, not once a launch).
struct CallScratch {
  std::vector<SegmentPlan> and_plan, or_plan;  // per query of a launch
  std::vector<SegmentDesc> and_segments, or_segments;
  std::vector<std::uint32_t> serial_dfs;  // a serial pack's scratch
  std::vector<unsigned> serial_order;
};

// Byte offsets of one batch's regions in the lane's input, output and scratch buffers
// (gpu_engine_launch.cpp, batch_regions).
struct BatchRegions {
  std::size_t terms_at = 0, order_at = 0, and_seg_at = 0, or_seg_at = 0, in_bytes = 0;
  std::size_t hits_at = 0, out_bytes = 0;
  std::size_t topk_rows_at = 0, partial_count_at = 0, theta_and_at = 0, theta_or_at = 0,
              scratch_bytes = 0;
};

// One launch as packed into its lane (gpu_engine_launch.cpp, pack_launch): what issuing it needs.
struct LaunchLayout {
  std::size_t launch = 0;                 // its number in the call
  const ListBatch* list_batch = nullptr;  // list cache: the lists it ships
  std::size_t nq = 0;
  unsigned max_terms = 1;
  std::uint32_t and_segments = 0, or_segments = 0;  // thread blocks of the two phases
  bool warp_kernel = false, bmw = false;  // its OR phase: the warp kernel; block-max WAND too
  std::size_t and_row = 0, or_row = 0;    // bytes of a segment's global top-k row (0: shared)
  BatchRegions regions;
};

struct GpuEngine::Impl {
  const ShardIndex& shard;
  std::uint32_t shard_id;
  GpuEngineOptions options;
  int device = 0;
  int multiprocessors = 1;
  std::unique_ptr<DeviceShard> image;      // the whole shard, or
  std::unique_ptr<DeviceListCache> cache;  // the list cache (options.list_cache)
  std::unique_ptr<KthImpactTable> seeds;   // OR threshold seeds (options.threshold_seed)
  // Launches rotate over the lanes: while one lane's kernels run, the others' results are
  // copied back and unpacked and the next launch is packed. Three, so that a long launch (cost
  // order puts the longest queries first) does not hold the launch after next until its own
  // results are unpacked; two with the list cache, whose shipping regions are per lane.
  std::array<Lane, 3> lanes;
  CudaEvent call_start;  // the timeline's origin on the device (GpuBatchStats::Timeline)
  std::chrono::steady_clock::time_point call_host_start;  // ... and on the host
  std::unique_ptr<QueryEngine> host_engine;
  std::uint64_t calls = 0;
  std::uint32_t doc_begin = 0, doc_end = 0;  // the docID range answered (the shard by default)
  // search_into_device_rows: the call leaves its rows on the device, here.
  bool rows_on_device = false;
  const void* device_rows = nullptr;
  // List cache: post-processing, its counters, the online policy.
  std::unique_ptr<PostProcessingThreads> post;
  GpuEngine::PostProcessor post_processor;
  ListCacheCounters counters;
  std::shared_ptr<OnlineCachePolicy> online;
  std::uint64_t online_max_copy_bytes = ~0ull;
  double post_busy_at_clear = 0;
  nlohmann::json annotations = nlohmann::json::object();
  nlohmann::json online_changes = nlohmann::json::array();  // guarded by call_mutex
  // Held by every call and by the cache swapper while it applies a plan: a call never sees a
  // change in progress. Calls that found a swap holding it, and how long they waited.
  mutable std::mutex call_mutex;
  std::uint64_t calls_waited_for_swap = 0;
  double call_wait_seconds = 0;
  double observe_seconds = 0;  // inside calls: handing the served queries to the online policy
  // Host time of the calls outside their launch pipeline: planning (queries to launches, the
  // list batches against the cache directory, buffers) and finishing (post-processing's wait).
  double call_plan_seconds = 0, call_finish_seconds = 0;
  // The planning's parts: the launches (costs, order, list batches), the list batches alone,
  // and the lanes' buffers (the rest is the call's set-up and its queries for the host).
  double call_launch_plan_seconds = 0, call_list_batches_seconds = 0, call_buffers_seconds = 0;
  // The list batches of the last call, reused by the next (their memory stays mapped;
  // plan_list_batches). Guarded by call_mutex, as the calls are.
  mutable std::vector<ListBatch> list_batch_storage;
  // Applies the online plans between calls (CacheSwapTiming::kGaps); stopped first in
  // ~GpuEngine, before the cache it writes to.
  std::unique_ptr<CacheSwapper> swapper;
  // A plan change applied now (the swapper's thread or start_call; call_mutex held).
  void apply_online_plan(std::vector<CachedList>&& plan, bool in_gap);

  Impl(const ShardIndex& s, std::uint32_t id, GpuEngineOptions o)
      : shard(s), shard_id(id), options(std::move(o)) {}

  // A call, in the order search_batches runs it. gpu_engine.cpp: the call's start and plan.
  void start_call();
  CallPlan plan_call(std::span<const Query> queries, const SearchParams& params) const;
  void answer_on_host(const CallPlan& plan, std::span<ShardResult> out);
  void plan_launches(CallPlan& plan) const;
  std::vector<std::uint64_t> and_or_costs(const CallPlan& plan) const;
  void plan_segments(const CallPlan& plan, std::size_t begin, std::size_t end,
                     std::vector<SegmentPlan>& and_plan, std::vector<SegmentPlan>& or_plan) const;
  // gpu_engine_launch.cpp: the lanes' buffers, and each launch's steps.
  void reserve_lane_buffers(const CallPlan& plan, CallScratch& scratch);
  LaunchLayout pack_launch(Lane& lane, const CallPlan& plan, std::size_t launch,
                           CallScratch& scratch, std::chrono::steady_clock::time_point t0);
  void pack_queries(Lane& lane, const CallPlan& plan, const LaunchLayout& layout,
                    std::span<QueryDesc> qd, CallScratch& scratch) const;
  void issue_launch(Lane& lane, const CallPlan& plan, const LaunchLayout& layout);
  void keep_rows_on_device(Lane& lane, const LaunchLayout& layout,
                           std::vector<GpuBatchStats>& batches);
  void copy_results_back(Lane& lane, const CallPlan& plan, const LaunchLayout& layout);
  void finish_launch(Lane& lane, const CallPlan& plan, std::span<ShardResult> out,
                     std::vector<GpuBatchStats>& batches);
  void unpack_results(const Lane& lane, const CallPlan& plan, std::span<ShardResult> out) const;
  void complete_truncated_queries(Lane& lane, const CallPlan& plan, std::span<ShardResult> out);
};

}  // namespace gpusearch::gpu
