// The GPU engine's pipeline: a call's queries planned into launches (this file) that rotate over
// the lanes, each packed, issued and finished in gpu_engine_launch.cpp (copies, kernels, copies
// back, results unpacked); construction and statistics are in gpu_engine_setup.cpp, the private
// state in gpu_engine_impl.hpp.
#include "gpu/gpu_engine.hpp"
#include "gpu/gpu_engine_impl.hpp"
#include "gpu/or_warp_kernel.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/online_cache_policy.hpp"
#include "common/reference_engine.hpp"
#include "gpu/device_list_cache.hpp"
#include "gpu/device_shard.hpp"
#include "gpu/post_processing.hpp"
#include "gpu/query_kernels.hpp"
#include "gpu/segment_plan.hpp"

namespace gpusearch::gpu {

namespace {

// algorithm auto: batches of at most this many queries run their OR phase by block-max WAND.
constexpr std::size_t kAutoBmwMaxBatch = 256;
// auto, OR mode, launches of at least this many long queries: the OR kernel on windows of 4,096
// documents and 128 threads instead of the options' (8,192:256 by default). H100, synthetic
// 2.5M index, batch 4,096: OR k = 10 +4.5% and +7% in two sessions' calls, k = 1000 +35%;
// and-or and batch 1,024 lose 3-12% with it, so they keep the options' shape.
constexpr std::size_t kAutoNarrowOrMinBatch = 2048;
constexpr unsigned kAutoNarrowOrWindow = 4096, kAutoNarrowOrThreads = 128;
// ... and whose queries are long: mean sum of list lengths (postings) at least this. Block-max
// WAND's per-thread cursors pay off on long lists only (Debian descriptions through the cluster,
// batches of 64: bmw 0.86 ms per batch against the window kernel's 0.24).
constexpr std::uint64_t kLongQueryPostings = 128 * 1024;
}  // namespace

void GpuEngine::search(std::span<const Query> queries, const SearchParams& params,
                       std::span<ShardResult> out) {
  // The online policy's planner pauses while this call is served (never the other way round).
  const OnlineCachePolicy::ServingCall serving(impl_->online ? impl_->online->serving_gaps()
                                                             : nullptr);
  // After marking the call: a cache swapper that has not begun a swap now leaves it for later.
  std::unique_lock call_lock(impl_->call_mutex, std::try_to_lock);
  if (!call_lock.owns_lock()) {
    const auto t0 = std::chrono::steady_clock::now();
    call_lock.lock();  // a swap in progress, or a second caller
    ++impl_->calls_waited_for_swap;
    impl_->call_wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  try {
    search_batches(queries, params, out);
  } catch (...) {
    // A failed call leaves no launch pending: the next call (or a CPU fallback) starts clean,
    // and no copy still in flight writes into buffers the next call reuses.
    for (Lane& lane : impl_->lanes) {
      try {
        lane.stream.synchronize();
      } catch (...) {
      }
      lane.pending = false;
    }
    // Post-processing tasks write into `out`: none may outlive the call.
    if (impl_->post) {
      try {
        impl_->post->wait();
      } catch (...) {
      }
    }
    throw;
  }
}

// The pipeline: launches rotate over the lanes; a lane's previous launch is finished (its
// results unpacked) just before the lane is packed again, so that while one lane's kernels
// run the others' results come back and the next launch is packed.
void GpuEngine::search_batches(std::span<const Query> queries, const SearchParams& params,
                               std::span<ShardResult> out) {
  Impl& m = *impl_;
  ScopedDevice scoped(m.device);
  const auto planning_begins = std::chrono::steady_clock::now();
  m.start_call();
  CallPlan plan = m.plan_call(queries, params);
  m.answer_on_host(plan, out);
  if (plan.k == 0) {
    for (std::size_t i : plan.gpu_queries) out[i] = ShardResult{};
    return;
  }
  const auto launches_begin = std::chrono::steady_clock::now();
  m.plan_launches(plan);
  const auto buffers_begin = std::chrono::steady_clock::now();
  CallScratch scratch;
  m.reserve_lane_buffers(plan, scratch);

  m.call_host_start = std::chrono::steady_clock::now();
  m.call_launch_plan_seconds += std::chrono::duration<double>(buffers_begin - launches_begin).count();
  m.call_list_batches_seconds += plan.list_batches_seconds;
  m.call_buffers_seconds += std::chrono::duration<double>(m.call_host_start - buffers_begin).count();
  m.call_plan_seconds += std::chrono::duration<double>(m.call_host_start - planning_begins).count();
  m.call_start.record(m.lanes[0].stream.get());
  std::size_t launch = 0;
  for (; launch < plan.launches(); ++launch) {
    Lane& lane = m.lanes[launch % plan.num_lanes];
    if (lane.pending) {
      // Launches finish out of order (the first holds the longest queries): unpack every one
      // already back before waiting for this lane's.
      for (Lane& other : m.lanes)
        if (&other != &lane && other.pending && other.after_d2h.completed())
          m.finish_launch(other, plan, out, batches_);
      m.finish_launch(lane, plan, out, batches_);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const LaunchLayout layout = m.pack_launch(lane, plan, launch, scratch, t0);
    m.issue_launch(lane, plan, layout);
    if (m.rows_on_device) {
      m.keep_rows_on_device(lane, layout, batches_);
      break;  // one launch (search_into_device_rows checked the batch size)
    }
    m.copy_results_back(lane, plan, layout);
  }
  // The online cache policy sees the call's queries while the last launches run: it needs only
  // the queries, and at the end of the call its 0.2 ms (1,000 queries, H200) were on every
  // call's time (0.97x the offline plan's throughput on the drifting log, session 31).
  if (m.online) {
    const auto t0 = std::chrono::steady_clock::now();
    m.online->observe(queries);
    m.observe_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // The last launches, each unpacked as soon as it is back: the host polls rather than waits for
  // the oldest, which holds the longest queries and is often the last back (H100, k = 1000,
  // and-or: the other two launches were back 5 and 15 ms before it and waited to be unpacked).
  while (true) {
    bool any_pending = false, finished_one = false;
    for (std::size_t i = 0; i < plan.num_lanes; ++i) {
      Lane& lane = m.lanes[(launch + i) % plan.num_lanes];
      if (!lane.pending) continue;
      any_pending = true;
      if (lane.after_d2h.completed()) {
        m.finish_launch(lane, plan, out, batches_);
        finished_one = true;
      }
    }
    if (!any_pending) break;
    if (!finished_one) std::this_thread::yield();
  }
  const auto finishing_begins = std::chrono::steady_clock::now();
  if (m.post) m.post->wait();
  m.call_finish_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - finishing_begins).count();
  for (ListBatch& b : plan.list_batches) m.list_batch_storage.push_back(std::move(b));
}

void GpuEngine::Impl::start_call() {
  ++calls;
  if (options.inject_fault_at_call > 0 && calls >= options.inject_fault_at_call) {
    // A real CUDA failure (an invalid argument; not sticky, so the device stays usable).
    const cudaError_t status = cudaMemsetAsync(nullptr, 0, 1, lanes[0].stream.get());
    throw_cuda_error(status == cudaSuccess ? cudaErrorUnknown : status,
                     "injected GPU fault (--inject-gpu-fault-at-batch): cudaMemsetAsync(nullptr)",
                     __FILE__, __LINE__);
  }
  // CacheSwapTiming::kCalls: the online policy's latest plan goes in here, before the call's
  // first batch (no batch is in flight). kGaps: the swapper applies it between calls.
  if (online && cache && !swapper) {
    if (auto plan = online->take_plan()) apply_online_plan(std::move(*plan), /*in_gap=*/false);
  }
}

void GpuEngine::Impl::apply_online_plan(std::vector<CachedList>&& plan, bool in_gap) {
  const CacheChange change = cache->apply(plan, online_max_copy_bytes);
  if (online_changes.size() < 1000) {
    nlohmann::json c = change.to_json();
    c["in_gap"] = in_gap;
    online_changes.push_back(std::move(c));
  }
  online->report_cache(cache->directory().held_lists());
}

CallPlan GpuEngine::Impl::plan_call(std::span<const Query> queries,
                                    const SearchParams& params) const {
  CallPlan plan(queries, params);
  // auto: block-max WAND for the OR phase of small batches, the window kernel for large ones
  // (H100, k = 10, batch 64: OR p50 0.97 ms against 1.94, and-or 1.05 against 2.08; at 1,024
  // the window kernel's throughput is 1.4x bmw's).
  plan.bmw_always = options.algorithm == "bmw";
  plan.bmw_small_batches = options.algorithm == "auto";
  plan.pruned = options.algorithm != "exhaustive";
  // warp and auto: the warp kernel (gpu/or_warp_kernel.hpp) for every launch it can run:
  // decoded layout, k <= 32, at most 32 terms a query (H100, k = 10: OR 1.8x the window
  // kernel's throughput at batches of 4,096 and 64, tests/benchmarks/NOTES-gpu-engine.md); other
  // launches take window (warp) or auto's choice below. exhaustive: the warp kernel unpruned
  // where it applies (the fastest exhaustive OR). Above k = 32 only when asked for (warp): its
  // block top-k, flushed by one warp under a lock, made it slower than the window kernel at
  // k = 1000 (H100: OR 121K against 144K q/s at batch 4,096, 33K against 67K at batch 64).
  plan.warp_or = options.algorithm == "warp" || options.algorithm == "auto" ||
                 options.algorithm == "exhaustive";
  plan.warp_max_k = options.algorithm == "warp" ? kOrWarpMaxLargeK : kOrWarpMaxK;
  plan.run_and = params.mode != Mode::kOr;
  plan.run_or = params.mode != Mode::kAnd;

  // Queries the kernels cannot take (more terms than their shared memory plans for) go to the
  // host engine; none exist under the default query limits.
  plan.gpu_queries.reserve(queries.size());
  for (std::size_t i = 0; i < queries.size(); ++i)
    (queries[i].terms.size() <= kMaxGpuTerms ? plan.gpu_queries : plan.host_queries).push_back(i);
  return plan;
}

void GpuEngine::Impl::answer_on_host(const CallPlan& plan, std::span<ShardResult> out) {
  if (plan.host_queries.empty()) return;
  std::vector<Query> batch;
  for (std::size_t i : plan.host_queries) batch.push_back(plan.queries[i]);
  std::vector<ShardResult> results(batch.size());
  if (host_engine) {
    host_engine->search(batch, plan.params, results);
  } else {
    ReferenceEngine ref(shard, shard_id);
    ref.search(batch, plan.params, results);
  }
  for (std::size_t j = 0; j < plan.host_queries.size(); ++j)
    out[plan.host_queries[j]] = std::move(results[j]);
}

// and-or's cost: its AND phase, plus its OR phase where that is expected to run (fewer than k
// AND matches in the shard, estimated as if the terms were independent: N * prod(df_t / N)).
// By the AND cost alone the cheapest launch held the queries whose OR phase runs over long
// lists, and ended last (H100, k = 1000: the launch of the 1,808 cheapest queries ran 38 ms).
std::vector<std::uint64_t> GpuEngine::Impl::and_or_costs(const CallPlan& plan) const {
  std::vector<std::uint64_t> cost(plan.queries.size(), 0);
  const double n = std::max<double>(1, shard.num_docs());
  for (std::size_t i : plan.gpu_queries) {
    double matches = n;
    for (TermId t : plan.queries[i].terms) matches *= double(shard.term(t).df_shard) / n;
    cost[i] = plan.and_cost[i] + (matches < double(plan.k) ? plan.or_cost[i] : 0);
  }
  return cost;
}

// The GPU queries' costs and order, the launches they are cut into, the OR kernel's shape and
// the lanes the call uses.
void GpuEngine::Impl::plan_launches(CallPlan& plan) const {
  const std::span<const Query> queries = plan.queries;
  const SearchParams& params = plan.params;
  std::vector<std::size_t>& gpu_queries = plan.gpu_queries;
  // Costs: the shortest list (AND's candidates) and the sum of the lists (OR's postings).
  plan.and_cost.resize(queries.size());
  plan.or_cost.resize(queries.size());
  plan.shortest.resize(queries.size());
  plan.longest.resize(queries.size());
  for (std::size_t i : gpu_queries) {
    std::uint64_t lo = ~std::uint64_t(0), total = 0, hi = 0;
    for (TermId t : queries[i].terms) {
      const TermInfo& ti = shard.term(t);
      if (ti.df_shard < lo) lo = ti.df_shard, plan.shortest[i] = &ti;
      if (ti.df_shard >= hi) hi = ti.df_shard, plan.longest[i] = &ti;
      total += ti.df_shard;
    }
    plan.and_cost[i] = queries[i].terms.empty() ? 0 : lo;
    plan.or_cost[i] = total;
  }
  const unsigned batch_size = options.batch_size;
  plan.cache = cache.get();
  plan.decoded_layout = !plan.cache && image->view().decoded_docs != nullptr;
  // Cost order (paper 003): long queries first, so that a launch's blocks finish together.
  // (Dealing the sorted queries round-robin over a call's launches, to give them equal costs,
  // was measured and dropped: H100, AND k = 1000, launches of 4,096, the device's busy time
  // rose from 13.4 to 19.3 ms; NOTES-gpu-engine.md, seventh session.)
  if (options.cost_order && !rows_on_device) {  // device rows: in the caller's order
    std::vector<std::uint64_t> and_or_cost;
    if (params.mode == Mode::kAndOr && options.and_or_cost_estimate)
      and_or_cost = and_or_costs(plan);
    const auto& c = params.mode == Mode::kOr      ? plan.or_cost
                    : and_or_cost.empty() ? plan.and_cost
                                          : and_or_cost;
    std::stable_sort(gpu_queries.begin(), gpu_queries.end(),
                     [&](std::size_t a, std::size_t b) { return c[a] > c[b]; });
  }
  // Batches: batch_size queries each; with the list cache, also cut where the lists a batch
  // must ship would overflow a lane's shipping region (common/list_cache.hpp).
  if (plan.cache) {
    const auto t0 = std::chrono::steady_clock::now();
    plan.list_batches =
        plan_list_batches(plan.cache->directory(), queries, gpu_queries,
                          {batch_size, plan.cache->ship_capacity_bytes(), options.ship_tails},
                          &list_batch_storage);
    plan.list_batches_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const ListBatch& b : plan.list_batches) plan.bounds.push_back(b.begin);
  } else {
    // In cost order the first launch holds the costliest queries and its kernels end last, so
    // its result copy and unpacking (k = 1000: 16 KB and 1,000 hits a query) are the call's
    // tail: the remainder launch goes first, the tail is the smallest launch's.
    const std::size_t n = gpu_queries.size();
    const bool sorted = options.cost_order && !rows_on_device;
    std::size_t begin = 0;
    if (sorted && options.remainder_first && n > batch_size && n % batch_size != 0) {
      plan.bounds.push_back(0);
      begin = n % batch_size;
    }
    for (; begin < n; begin += batch_size) plan.bounds.push_back(begin);
  }
  plan.bounds.push_back(gpu_queries.size());
  plan.shard_end = shard.num_docs();
  const bool narrow_or =
      options.algorithm == "auto" && params.mode == Mode::kOr &&
      std::min<std::size_t>(batch_size, gpu_queries.size()) >= kAutoNarrowOrMinBatch &&
      plan.long_queries(0, gpu_queries.size());
  const unsigned or_window = narrow_or ? kAutoNarrowOrWindow : options.or_window;
  const unsigned or_threads = narrow_or ? kAutoNarrowOrThreads : options.or_threads;
  plan.or_config = OrKernelConfig{or_window, or_threads, options.or_stage_blocks};
  plan.or_config.topk_memory = options.topk_memory == "global"   ? TopKMemory::kGlobal
                               : options.topk_memory == "shared" ? TopKMemory::kShared
                                                                 : TopKMemory::kAuto;
  // Lanes this call uses: no more than it has launches (an unused lane keeps no buffers).
  plan.num_lanes = std::max<std::size_t>(
      1, std::min<std::size_t>(plan.cache ? 2 : lanes.size(), plan.launches()));
}

// A batch of long queries: the mean sum of its queries' list lengths is at least
// kLongQueryPostings (the synthetic 2.5M index's, not Debian's 64K-document lists).
bool CallPlan::long_queries(std::size_t begin, std::size_t end) const {
  std::uint64_t total = 0;
  for (std::size_t j = begin; j < end; ++j) total += or_cost[gpu_queries[j]];
  return end > begin && total / (end - begin) >= kLongQueryPostings;
}

// The launch's OR phase by the warp kernel: where it applies (decoded layout, k <= warp_max_k,
// at most 32 terms a query) and the algorithm takes it.
bool CallPlan::warp_launch(unsigned max_terms) const {
  return run_or && warp_or && decoded_layout && k <= warp_max_k && max_terms <= kOrWarpMaxTerms;
}

// The launch of gpu_queries [begin, end), where the warp kernel does not run it, runs its OR
// phase by block-max WAND too: bmw always, auto on small batches of long queries.
bool CallPlan::bmw_launch(std::size_t begin, std::size_t end) const {
  return bmw_always ||
         (bmw_small_batches && end - begin <= kAutoBmwMaxBatch && long_queries(begin, end));
}

// Segments per query of one batch: about target_blocks in all, in proportion to cost.
void GpuEngine::Impl::plan_segments(const CallPlan& plan, std::size_t begin, std::size_t end,
                                    std::vector<SegmentPlan>& and_plan,
                                    std::vector<SegmentPlan>& or_plan) const {
  // Cut as the call's largest launch is: a remainder launch of a call of several batches is
  // not cut finer than its batches are (H100, OR k = 1000: the remainder of 1,808 queries cut
  // as a small batch, 16 blocks per SM, ran 30% longer than in a launch of 4,096).
  std::size_t call_launch = 0;
  for (std::size_t i = 0; i + 1 < plan.bounds.size(); ++i)
    call_launch = std::max(call_launch, plan.bounds[i + 1] - plan.bounds[i]);
  const SegmentTargets targets = segment_targets(options, std::max(end - begin, call_launch),
                                                 plan.long_queries(begin, end));
  const std::uint64_t target_blocks = std::uint64_t(targets.blocks_per_sm) * multiprocessors;
  const std::uint64_t min_segment_postings = targets.min_segment_postings;
  std::uint64_t and_total = 0, or_total = 0;
  for (std::size_t j = begin; j < end; ++j) {
    and_total += plan.and_cost[plan.gpu_queries[j]];
    or_total += plan.or_cost[plan.gpu_queries[j]];
  }
  const std::uint64_t and_seg_cost =
      std::max<std::uint64_t>(min_segment_postings / 8, and_total / target_blocks);
  // OR blocks of more than 256 threads: proportionally fewer of them fill the device.
  const std::uint64_t or_target =
      std::max<std::uint64_t>(1, target_blocks * 256 / plan.or_config.threads);
  const std::uint64_t or_seg_cost =
      std::max<std::uint64_t>(min_segment_postings, or_total / or_target);
  and_plan.assign(end - begin, SegmentPlan{});
  or_plan.assign(end - begin, SegmentPlan{});
  for (std::size_t j = begin; j < end; ++j) {
    const std::size_t i = plan.gpu_queries[j];
    if (plan.queries[i].terms.empty()) continue;
    if (plan.run_and && plan.shortest[i]->num_blocks > 0)
      and_plan[j - begin] = {
          segment_count(plan.and_cost[i], and_seg_cost, options.max_segments_per_query,
                        plan.shortest[i]->num_blocks),
          plan.shortest[i]};
    if (plan.run_or)
      or_plan[j - begin] = {
          segment_count(plan.or_cost[i], or_seg_cost, options.max_segments_per_query,
                        plan.longest[i]->num_blocks),
          plan.longest[i]};
  }
}

// Bytes of an AND / OR segment's global top-k row for a launch of `segments` segments whose
// longest query has max_terms terms; 0 where the kernel keeps its top-k in shared memory.
// (The buffers are sized with a batch's planned segments, never fewer than it launches, and
// auto chooses global memory only above a number of segments: sized for every launch.)
std::size_t CallPlan::and_topk_row(unsigned max_terms, std::size_t segments, std::size_t nq) const {
  return run_and && and_topk_in_global(k, max_terms, or_config.topk_memory, segments, nq)
             ? and_topk_row_bytes(k)
             : 0;
}

std::size_t CallPlan::or_topk_row(unsigned max_terms, std::size_t segments, std::size_t nq) const {
  return run_or && or_topk_in_global(k, max_terms, or_config, segments, nq)
             ? or_topk_row_bytes(k, or_config.threads)
             : 0;
}

}  // namespace gpusearch::gpu
