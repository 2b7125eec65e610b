// The GPU engine's pipeline: a call's queries packed into launches that rotate over the lanes
// (copies, kernels, copies back, results unpacked); construction and statistics are in
// gpu_engine_setup.cpp, the private state in gpu_engine_impl.hpp.
#include "gpu/gpu_engine.hpp"
#include "gpu/gpu_engine_impl.hpp"
#include "gpu/or_warp_kernel.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "common/kth_impact_table.hpp"
#include "common/reference_engine.hpp"
#include "common/scoring.hpp"
#include "common/online_cache_policy.hpp"
#include "gpu/device_list_cache.hpp"
#include "gpu/device_shard.hpp"
#include "gpu/kernel_limits.hpp"
#include "gpu/post_processing.hpp"
#include "gpu/query_kernels.hpp"
#include "gpu/range_rows_kernel.hpp"
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

// Hits per batch above which the results are unpacked on every core (see finish()).
constexpr std::size_t kParallelUnpackHits = 16 * 1024;
// A launch of at least this many queries is packed on every core (H100 host: 0.3 us a query
// on one thread, 1.3 ms for 4,096, during which the device has nothing of this call to run).
constexpr std::size_t kParallelPackQueries = 512;

constexpr std::size_t align_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

// Byte offsets of one batch's regions in the lane's input, output and scratch buffers.
struct BatchRegions {
  std::size_t terms_at = 0, order_at = 0, and_seg_at = 0, or_seg_at = 0, in_bytes = 0;
  std::size_t hits_at = 0, out_bytes = 0;
  std::size_t topk_rows_at = 0, partial_count_at = 0, theta_and_at = 0, theta_or_at = 0,
              scratch_bytes = 0;
};

// and_topk_row / or_topk_row: bytes of an AND / OR segment's global top-k row, 0 where the
// kernel keeps its top-k in shared memory; the kernels run in turn, so one region serves both.
// Scratch past theta_and_at is zeroed per batch; the rows before it are not.
BatchRegions batch_regions(std::size_t nq, std::size_t nt, std::size_t and_segments,
                           std::size_t or_segments, unsigned k, std::size_t and_topk_row = 0,
                           std::size_t or_topk_row = 0) {
  BatchRegions r;
  r.terms_at = align_up(nq * sizeof(QueryDesc), 16);
  r.order_at = r.terms_at + align_up(nt * sizeof(TermDesc), 16);
  r.and_seg_at = r.order_at + align_up(nt, 16);
  r.or_seg_at = r.and_seg_at + align_up(and_segments * sizeof(SegmentDesc), 16);
  r.in_bytes = r.or_seg_at + align_up(or_segments * sizeof(SegmentDesc), 16);
  r.hits_at = align_up(nq * sizeof(QueryOut), 16);
  r.out_bytes = r.hits_at + nq * 2 * std::size_t(k) * sizeof(HitOut);
  const std::size_t rows = std::max(and_segments, or_segments);
  r.topk_rows_at = align_up(rows * std::size_t(k) * sizeof(HitOut), 16);
  r.partial_count_at =
      r.topk_rows_at +
      align_up(std::max(and_segments * and_topk_row, or_segments * or_topk_row), 16);
  r.theta_and_at = r.partial_count_at + align_up(rows * 4, 16);
  r.theta_or_at = r.theta_and_at + nq * 8;
  r.scratch_bytes = r.theta_or_at + nq * 8;
  return r;
}
}  // namespace

void GpuEngine::search(std::span<const Query> queries, const SearchParams& params,
                       std::span<ShardResult> out) {
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

void GpuEngine::search_batches(std::span<const Query> queries, const SearchParams& params,
                               std::span<ShardResult> out) {
  Impl& m = *impl_;
  ScopedDevice scoped(m.device);
  ++m.calls;
  if (m.options.inject_fault_at_call > 0 && m.calls >= m.options.inject_fault_at_call) {
    // A real CUDA failure (an invalid argument; not sticky, so the device stays usable).
    const cudaError_t status = cudaMemsetAsync(nullptr, 0, 1, m.lanes[0].stream.get());
    throw_cuda_error(status == cudaSuccess ? cudaErrorUnknown : status,
                     "injected GPU fault (--inject-gpu-fault-at-batch): cudaMemsetAsync(nullptr)",
                     __FILE__, __LINE__);
  }
  // The online policy's latest plan goes in here, between calls: no batch is in flight.
  if (m.online && m.cache) {
    if (auto plan = m.online->take_plan()) {
      const CacheChange change = m.cache->apply(*plan, m.online_max_copy_bytes);
      if (m.online_changes.size() < 1000) m.online_changes.push_back(change.to_json());
      m.online->report_cache(m.cache->directory().held_lists());
    }
  }
  const ShardIndex& shard = m.shard;
  const IndexParams& ip = shard.params();
  const unsigned k = params.k;
  // auto: block-max WAND for the OR phase of small batches, the window kernel for large ones
  // (H100, k = 10, batch 64: OR p50 0.97 ms against 1.94, and-or 1.05 against 2.08; at 1,024
  // the window kernel's throughput is 1.4x bmw's).
  const bool bmw_always = m.options.algorithm == "bmw";
  const bool bmw_small_batches = m.options.algorithm == "auto";
  const bool pruned = m.options.algorithm != "exhaustive";
  // warp and auto: the warp kernel (gpu/or_warp_kernel.hpp) for every launch it can run:
  // decoded layout, k <= 32, at most 32 terms a query (H100, OR k = 10: 1.08x the window
  // kernel's throughput at batch 4,096, 2.3x block-max WAND's at batch 64, tests/benchmarks/
  // NOTES-gpu-engine.md); other launches take window (warp) or auto's choice below.
  // exhaustive: the warp kernel unpruned where it applies (the fastest exhaustive OR).
  const bool warp_or = m.options.algorithm == "warp" || m.options.algorithm == "auto" ||
                       m.options.algorithm == "exhaustive";
  const bool run_and = params.mode != Mode::kOr, run_or = params.mode != Mode::kAnd;

  // Queries the kernels cannot take (more terms than their shared memory plans for) go to the
  // host engine; none exist under the default query limits.
  std::vector<std::size_t> gpu_queries, host_queries;
  gpu_queries.reserve(queries.size());
  for (std::size_t i = 0; i < queries.size(); ++i)
    (queries[i].terms.size() <= kMaxGpuTerms ? gpu_queries : host_queries).push_back(i);
  if (!host_queries.empty()) {
    std::vector<Query> batch;
    for (std::size_t i : host_queries) batch.push_back(queries[i]);
    std::vector<ShardResult> results(batch.size());
    if (m.host_engine) {
      m.host_engine->search(batch, params, results);
    } else {
      ReferenceEngine ref(shard, m.shard_id);
      ref.search(batch, params, results);
    }
    for (std::size_t j = 0; j < host_queries.size(); ++j) out[host_queries[j]] = std::move(results[j]);
  }
  if (k == 0) {
    for (std::size_t i : gpu_queries) out[i] = ShardResult{};
    return;
  }
  // Costs: the shortest list (AND's candidates) and the sum of the lists (OR's postings).
  std::vector<std::uint64_t> and_cost(queries.size()), or_cost(queries.size());
  std::vector<const TermInfo*> shortest(queries.size()), longest(queries.size());
  for (std::size_t i : gpu_queries) {
    std::uint64_t lo = ~std::uint64_t(0), total = 0, hi = 0;
    for (TermId t : queries[i].terms) {
      const TermInfo& ti = shard.term(t);
      if (ti.df_shard < lo) lo = ti.df_shard, shortest[i] = &ti;
      if (ti.df_shard >= hi) hi = ti.df_shard, longest[i] = &ti;
      total += ti.df_shard;
    }
    and_cost[i] = queries[i].terms.empty() ? 0 : lo;
    or_cost[i] = total;
  }
  const unsigned batch_size = m.options.batch_size;
  DeviceListCache* const cache = m.cache.get();
  const bool decoded_layout = !cache && m.image->view().decoded_docs != nullptr;
  // Cost order (paper 003): long queries first, so that a launch's blocks finish together.
  // (Dealing the sorted queries round-robin over a call's launches, to give them equal costs,
  // was measured and dropped: H100, AND k = 1000, launches of 4,096, the device's busy time
  // rose from 13.4 to 19.3 ms; NOTES-gpu-engine.md, seventh session.)
  if (m.options.cost_order && !m.rows_on_device) {  // device rows: in the caller's order
    const auto& c = params.mode == Mode::kOr ? or_cost : and_cost;
    std::stable_sort(gpu_queries.begin(), gpu_queries.end(),
                     [&](std::size_t a, std::size_t b) { return c[a] > c[b]; });
  }
  // Batches: batch_size queries each; with the list cache, also cut where the lists a batch
  // must ship would overflow a lane's shipping region (common/list_cache.hpp).
  std::vector<ListBatch> list_batches;
  std::vector<std::size_t> bounds;  // batch i is gpu_queries [bounds[i], bounds[i + 1])
  if (cache) {
    list_batches = plan_list_batches(cache->directory(), queries, gpu_queries,
                                     {batch_size, cache->ship_capacity_bytes(), m.options.ship_tails});
    for (const ListBatch& b : list_batches) bounds.push_back(b.begin);
  } else {
    for (std::size_t begin = 0; begin < gpu_queries.size(); begin += batch_size)
      bounds.push_back(begin);
  }
  bounds.push_back(gpu_queries.size());
  const DocId shard_end = shard.num_docs();
  // Segments per query of one batch: about target_blocks in all, in proportion to cost.
  // A batch of long queries: the mean sum of its queries' list lengths is at least
  // kLongQueryPostings (the synthetic 2.5M index's, not Debian's 64K-document lists).
  auto long_queries = [&](std::size_t begin, std::size_t end) {
    std::uint64_t total = 0;
    for (std::size_t j = begin; j < end; ++j) total += or_cost[gpu_queries[j]];
    return end > begin && total / (end - begin) >= kLongQueryPostings;
  };
  const bool narrow_or = m.options.algorithm == "auto" && params.mode == Mode::kOr &&
                         std::min<std::size_t>(batch_size, gpu_queries.size()) >= kAutoNarrowOrMinBatch &&
                         long_queries(0, gpu_queries.size());
  const unsigned or_window = narrow_or ? kAutoNarrowOrWindow : m.options.or_window;
  const unsigned or_threads = narrow_or ? kAutoNarrowOrThreads : m.options.or_threads;
  auto plan_batch = [&](std::size_t begin, std::size_t end, std::vector<SegmentPlan>& and_plan,
                        std::vector<SegmentPlan>& or_plan) {
    const SegmentTargets targets = segment_targets(m.options, end - begin, long_queries(begin, end));
    const std::uint64_t target_blocks = std::uint64_t(targets.blocks_per_sm) * m.multiprocessors;
    const std::uint64_t min_segment_postings = targets.min_segment_postings;
    std::uint64_t and_total = 0, or_total = 0;
    for (std::size_t j = begin; j < end; ++j) {
      and_total += and_cost[gpu_queries[j]];
      or_total += or_cost[gpu_queries[j]];
    }
    const std::uint64_t and_seg_cost =
        std::max<std::uint64_t>(min_segment_postings / 8, and_total / target_blocks);
    // OR blocks of more than 256 threads: proportionally fewer of them fill the device.
    const std::uint64_t or_target = std::max<std::uint64_t>(1, target_blocks * 256 / or_threads);
    const std::uint64_t or_seg_cost =
        std::max<std::uint64_t>(min_segment_postings, or_total / or_target);
    and_plan.assign(end - begin, SegmentPlan{});
    or_plan.assign(end - begin, SegmentPlan{});
    for (std::size_t j = begin; j < end; ++j) {
      const std::size_t i = gpu_queries[j];
      if (queries[i].terms.empty()) continue;
      if (run_and && shortest[i]->num_blocks > 0)
        and_plan[j - begin] = {segment_count(and_cost[i], and_seg_cost, m.options.max_segments_per_query,
                                             shortest[i]->num_blocks), shortest[i]};
      if (run_or)
        or_plan[j - begin] = {segment_count(or_cost[i], or_seg_cost, m.options.max_segments_per_query,
                                            longest[i]->num_blocks), longest[i]};
    }
  };

  OrKernelConfig or_config{or_window, or_threads, m.options.or_stage_blocks};
  or_config.topk_memory = m.options.topk_memory == "global"   ? TopKMemory::kGlobal
                          : m.options.topk_memory == "shared" ? TopKMemory::kShared
                                                              : TopKMemory::kAuto;
  // Bytes of an AND / OR segment's global top-k row for a launch of `segments` segments whose
  // longest query has max_terms terms; 0 where the kernel keeps its top-k in shared memory.
  // (The buffers are sized with a batch's planned segments, never fewer than it launches, and
  // auto chooses global memory only above a number of segments: sized for every launch.)
  auto and_topk_row = [&](unsigned max_terms, std::size_t segments,
                          std::size_t nq) -> std::size_t {
    return run_and && and_topk_in_global(k, max_terms, or_config.topk_memory, segments, nq)
               ? and_topk_row_bytes(k)
               : 0;
  };
  auto or_topk_row = [&](unsigned max_terms, std::size_t segments, std::size_t nq) -> std::size_t {
    return run_or && or_topk_in_global(k, max_terms, or_config, segments, nq)
               ? or_topk_row_bytes(k, or_config.threads)
               : 0;
  };

  // Lanes this call uses: no more than it has launches (an unused lane keeps no buffers).
  const std::size_t num_lanes = std::max<std::size_t>(
      1, std::min<std::size_t>(cache ? 2 : m.lanes.size(), bounds.size() - 1));
  // Buffers grow once per call, ahead of the pipeline, to the largest batch's needs: never a
  // cudaMalloc or cudaFree (each synchronizes the device) between the batches of a call.
  std::vector<SegmentPlan> and_plan, or_plan;
  {
    BatchRegions largest{};
    std::size_t largest_in = 0, largest_out = 0, largest_scratch = 0;
    for (std::size_t bi = 0; bi + 1 < bounds.size(); ++bi) {
      const std::size_t begin = bounds[bi], end = bounds[bi + 1];
      plan_batch(begin, end, and_plan, or_plan);
      std::size_t nt = 0, nas = 0, nos = 0;
      unsigned max_terms = 1;
      for (std::size_t j = begin; j < end; ++j) {
        nt += queries[gpu_queries[j]].terms.size();
        max_terms = std::max<unsigned>(max_terms, unsigned(queries[gpu_queries[j]].terms.size()));
        nas += run_and ? and_plan[j - begin].count : 0;
        nos += run_or ? or_plan[j - begin].count : 0;
      }
      // The sizing may call for rows where the launch (fewer segments) does not: never less.
      largest = batch_regions(end - begin, nt, nas, nos, k,
                              std::max(and_topk_row(max_terms, nas, end - begin),
                                       and_topk_row(max_terms, nas, nas)),
                              std::max(or_topk_row(max_terms, nos, end - begin),
                                       or_topk_row(max_terms, nos, nos)));
      largest_in = std::max(largest_in, largest.in_bytes);
      largest_out = std::max(largest_out, largest.out_bytes + (m.rows_on_device ? row_meta_bytes(end - begin) : 0));
      largest_scratch = std::max(largest_scratch, largest.scratch_bytes);
    }
    for (std::size_t l = 0; l < num_lanes; ++l) {
      Lane& lane = m.lanes[l];
      lane.host_in.reserve(largest_in);
      lane.host_out.reserve(largest_out);
      lane.dev_in.reserve(largest_in);
      lane.dev_out.reserve(largest_out);
      lane.dev_scratch.reserve(largest_scratch);
    }
  }

  const auto call_t0 = std::chrono::steady_clock::now();
  m.call_start.record(m.lanes[0].stream.get());
  auto device_timeline = [&](Lane& lane) {
    GpuBatchStats::Timeline& t = lane.stats.timeline;
    t.device_h2d_begin = lane.start.ms_since(m.call_start);
    t.device_kernels_begin = lane.after_h2d.ms_since(m.call_start);
    t.device_kernels_end = lane.after_kernels.ms_since(m.call_start);
  };

  auto finish = [&](Lane& lane) {
    lane.stats.timeline.host_wait_begin = ms_since(call_t0);
    lane.after_d2h.synchronize();
    lane.stats.timeline.host_wait_end = ms_since(call_t0);
    lane.stats.h2d_ms = lane.after_h2d.ms_since(lane.start);
    lane.stats.kernel_ms = lane.after_kernels.ms_since(lane.after_h2d);
    lane.stats.d2h_ms = lane.after_d2h.ms_since(lane.after_kernels);
    device_timeline(lane);
    lane.stats.timeline.device_d2h_end = lane.after_d2h.ms_since(m.call_start);
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t nq = lane.query_index.size();
    const auto* qout = reinterpret_cast<const QueryOut*>(lane.host_out.data());
    const auto* hits = reinterpret_cast<const HitOut*>(
        lane.host_out.data() + align_up(nq * sizeof(QueryOut), 16));
    const auto ranks = shard.global_ranks();
    // A result the kernels cannot have produced (a count above k, a docID past the shard) is
    // refused with the batch's details instead of being read: the caller falls back.
    auto to_ranked = [&](const HitOut* h, std::uint32_t n, std::size_t slot, const char* what) {
      std::vector<RankedDoc> v(n);
      for (std::uint32_t j = 0; j < n; ++j) {
        if (h[j].doc >= shard.num_docs())
          throw CudaError(fmt::format(
              "GPU engine: corrupt {} result of batch slot {} of {} (k {}, launch of {} AND and "
              "{} OR segments): hit {} of {} has docID {} in a shard of {} documents",
              what, slot, lane.query_index.size(), k, lane.stats.and_segments,
              lane.stats.or_segments, j, n, h[j].doc, shard.num_docs()));
        v[j] = RankedDoc{h[j].score, ranks[h[j].doc], m.shard_id, h[j].doc};
      }
      return v;
    };
    auto unpack = [&](std::size_t slot) {
      const QueryOut& o = qout[slot];
      const HitOut* h = hits + slot * 2 * std::size_t(k);
      ShardResult& r = out[lane.query_index[slot]];
      r = ShardResult{};
      r.counters.postings_decoded = o.postings_decoded;
      r.counters.blocks_decoded = o.blocks_decoded;
      r.counters.blocks_skipped = o.blocks_skipped;
      r.counters.docs_scored = o.docs_scored;
      r.counters.early_terminations = o.early_terminated ? 1 : 0;
      if (o.num_hits > k || o.num_or_hits > k)
        throw CudaError(fmt::format("GPU engine: corrupt result counts in batch slot {}: {} and {} "
                                    "hits for k {}", slot, o.num_hits, o.num_or_hits, k));
      r.hits = to_ranked(h, o.num_hits, slot, "first");
      if (params.mode == Mode::kAndOr) {
        r.and_matches = o.and_matches;
        if (o.and_matches < k) r.or_hits = to_ranked(h + k, o.num_or_hits, slot, "or");
      }
    };
    // At k = 1000 a batch of 4,096 carries 4 M hits, each a random read of the shard's GS ranks:
    // done on one thread, it outlasted the next batch's kernels (the pipeline waited on it), so
    // large batches are unpacked on every core. Small ones stay on this thread.
    if (nq * std::size_t(k) >= kParallelUnpackHits)
      tbb::parallel_for(tbb::blocked_range<std::size_t>(0, nq, 4),
                        [&](const tbb::blocked_range<std::size_t>& r) {
                          for (std::size_t slot = r.begin(); slot < r.end(); ++slot) unpack(slot);
                        });
    else
      for (std::size_t slot = 0; slot < nq; ++slot) unpack(slot);
    for (std::size_t slot = 0; slot < nq; ++slot) {
      const QueryOut& o = qout[slot];
      lane.stats.postings_bytes_read += o.bytes_read;
      lane.stats.postings_decoded += o.postings_decoded;
      lane.stats.early_termination_rounds_saved += o.rounds_saved;
    }
    // List cache (paper 000, 3.4): a query whose lists were truncated at its horizon is done if
    // its answer below the horizon is final; else a post-processing thread completes it from
    // the horizon on while this thread packs and launches the next batch.
    if (cache) {
      for (std::size_t slot = 0; slot < nq; ++slot) {
        const DocId horizon = lane.horizon[slot];
        if (horizon >= shard_end) continue;
        const std::size_t qi = lane.query_index[slot];
        if (horizon > 0 && prefix_answer_is_final(shard, queries[qi], params, horizon, out[qi],
                                                  m.options.finality_bound_scale))
          continue;
        if (horizon == 0) ++m.counters.cpu_only;
        ++m.counters.post_processed;
        ++lane.stats.post_processed;
        m.post->submit([&m, &queries, &params, &out, qi, horizon, running = std::move(out[qi])] {
          ShardResult done;
          if (m.post_processor) {
            done = m.post_processor(queries[qi], params, horizon, running);
          } else {
            ReferenceEngine ref(m.shard, m.shard_id);
            std::vector<ShardResult> one(1);
            ref.search(std::span<const Query>(&queries[qi], 1), params, one);
            done = std::move(one[0]);
          }
          done.counters.add(running.counters);
          out[qi] = std::move(done);
        });
      }
    }
    lane.stats.unpack_ms = ms_since(t0);
    lane.stats.timeline.host_unpack_end = ms_since(call_t0);
    batches_.push_back(lane.stats);
    lane.pending = false;
  };

  std::vector<SegmentDesc> and_segments, or_segments;
  std::vector<std::uint32_t> serial_dfs;  // a serial pack's scratch
  std::vector<unsigned> serial_order;
  std::size_t launch = 0;
  for (std::size_t bi = 0; bi + 1 < bounds.size(); ++bi, ++launch) {
    Lane& lane = m.lanes[launch % num_lanes];
    if (lane.pending) {
      // Launches finish out of order (the first holds the longest queries): unpack every one
      // already back before waiting for this lane's.
      for (Lane& other : m.lanes)
        if (&other != &lane && other.pending && other.after_d2h.completed()) finish(other);
      finish(lane);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t begin = bounds[bi], end = bounds[bi + 1];
    const ListBatch* list_batch = cache ? &list_batches[bi] : nullptr;
    if (list_batch) {
      lane.horizon = list_batch->horizon;
      m.counters.add(*list_batch);
    } else {
      lane.horizon.assign(end - begin, shard_end);
    }
    lane.query_index.assign(gpu_queries.begin() + std::ptrdiff_t(begin),
                            gpu_queries.begin() + std::ptrdiff_t(end));
    const std::size_t nq = lane.query_index.size();
    plan_batch(begin, end, and_plan, or_plan);
    and_segments.clear();
    or_segments.clear();
    std::size_t nt = 0;
    unsigned max_terms = 1;
    for (std::size_t i : lane.query_index) {
      nt += queries[i].terms.size();
      max_terms = std::max<unsigned>(max_terms, unsigned(queries[i].terms.size()));
    }
    // Above k = 32 only when asked for (`warp`): its block top-k, flushed by one warp under a
    // lock, made it slower than the window kernel at k = 1000 (H100: OR 121K against 144K q/s
    // at batch 4,096, 33K against 67K at batch 64).
    const unsigned warp_max_k = m.options.algorithm == "warp" ? kOrWarpMaxLargeK : kOrWarpMaxK;
    const bool warp_kernel = run_or && warp_or && decoded_layout && k <= warp_max_k &&
                             max_terms <= kOrWarpMaxTerms;
    const bool bmw = !warp_kernel && (bmw_always || (bmw_small_batches && nq <= kAutoBmwMaxBatch &&
                                                     long_queries(begin, end)));
    std::vector<QueryDesc> qd(nq);
    for (std::size_t slot = 0; slot < nq; ++slot) {
      QueryDesc& d = qd[slot];
      d.and_segment_begin = std::uint32_t(and_segments.size());
      d.or_segment_begin = std::uint32_t(or_segments.size());
      const DocId horizon = lane.horizon[slot];
      if (run_and)
        append_segments(shard, std::uint32_t(slot), and_plan[slot], horizon, and_segments);
      if (run_or) append_segments(shard, std::uint32_t(slot), or_plan[slot], horizon, or_segments);
      clip_segments(and_segments, d.and_segment_begin, m.doc_begin, m.doc_end);
      clip_segments(or_segments, d.or_segment_begin, m.doc_begin, m.doc_end);
      d.and_segment_count = std::uint32_t(and_segments.size()) - d.and_segment_begin;
      d.or_segment_count = std::uint32_t(or_segments.size()) - d.or_segment_begin;
    }
    const std::size_t and_row = and_topk_row(max_terms, and_segments.size(), nq);
    const std::size_t or_row = or_topk_row(max_terms, or_segments.size(), nq);
    const BatchRegions R =
        batch_regions(nq, nt, and_segments.size(), or_segments.size(), k, and_row, or_row);
    lane.in_bytes = R.in_bytes;
    lane.out_bytes = R.out_bytes;
    // Reserved for the call's largest batch above; these only check that.
    lane.host_in.reserve(R.in_bytes);
    lane.host_out.reserve(R.out_bytes);
    lane.dev_in.reserve(R.in_bytes);
    lane.dev_out.reserve(R.out_bytes + (m.rows_on_device ? row_meta_bytes(nq) : 0));
    lane.dev_scratch.reserve(R.scratch_bytes);
    auto* td = reinterpret_cast<TermDesc*>(lane.host_in.data() + R.terms_at);
    auto* od = reinterpret_cast<std::uint8_t*>(lane.host_in.data() + R.order_at);
    // Each query's terms start where the previous query's end (a prefix sum), so the queries
    // pack independently: on every core for a large launch.
    std::vector<std::uint32_t> term_begin(nq + 1, 0);
    for (std::size_t slot = 0; slot < nq; ++slot)
      term_begin[slot + 1] =
          term_begin[slot] + std::uint32_t(queries[lane.query_index[slot]].terms.size());
    auto pack_query = [&](std::size_t slot, std::vector<std::uint32_t>& dfs,
                          std::vector<unsigned>& order) {
      const Query& q = queries[lane.query_index[slot]];
      const unsigned T = unsigned(q.terms.size());
      const std::uint32_t term_pos = term_begin[slot];
      dfs.clear();
      for (TermId t : q.terms) dfs.push_back(shard.term(t).df_global);
      const QueryWeights w = make_query_weights(params.scoring, params.alpha, ip.bm25,
                                                ip.collection.num_docs, dfs);
      const auto factor = gs_bound_factor(w, ip.gs_alpha);
      QueryDesc& d = qd[slot];
      d.term_begin = term_pos;
      d.num_terms = T;
      d.static_weight = w.static_weight;
      d.gs_bound_factor = factor ? *factor : -1.0;
      // The OR phase's starting k-th score: one term's k-th best share of a score is a lower
      // bound of the query's k-th score (scores are sums of non-negative parts). Lowered by the
      // bounds' rounding slack: the kernels' float scores of those documents may round below
      // the host's double.
      d.theta_seed = 0.0;
      if (m.seeds && pruned && run_or) {
        double seed = 0.0;
        for (unsigned j = 0; j < T; ++j)
          seed = std::max(seed, w.term_weight[j] * m.seeds->lower_bound(q.terms[j], k));
        d.theta_seed = seed * (1.0 - kBoundSlack) / m.options.bound_scale *
                       m.options.threshold_seed_scale;
      }
      d.and_order_begin = term_pos;
      d.slot = std::uint32_t(slot);
      order.resize(T);
      std::iota(order.begin(), order.end(), 0u);
      std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
        return shard.term(q.terms[a]).df_shard < shard.term(q.terms[b]).df_shard;
      });
      d.shortest = T > 0 ? order[0] : 0;
      for (unsigned j = 0; j < T; ++j) {
        const TermInfo& ti = shard.term(q.terms[j]);
        // List cache: the list's device slots, and only the blocks this batch holds.
        const std::uint64_t first = cache ? cache->numbering().first_slot(q.terms[j]) : ti.first_block;
        const std::uint32_t blocks =
            list_batch ? list_batch->available_blocks(cache->directory(), q.terms[j]) : ti.num_blocks;
        td[term_pos + j] =
            TermDesc{first, blocks, ti.df_shard, w.term_weight[j], ti.max_impact, 0};
        od[term_pos + j] = std::uint8_t(order[j]);
      }
      std::uint32_t flags = 0;
      switch (params.mode) {
        case Mode::kAnd: flags = kRunAnd; break;
        case Mode::kOr: flags = kRunOr; break;
        case Mode::kAndOr: flags = kRunAnd | kRunOr | kOrOnlyIfAndShort; break;
      }
      if (pruned) flags |= kEarlyTerminate | kPruneBlockMax;
      // Block-max WAND over the threads of a block (paper 002) where its per-thread top-k and
      // cursors fit; other queries take the windowed OR kernel with block-max pruning.
      if (bmw && params.mode != Mode::kAnd && k <= kBmwMaxK && T <= kBmwMaxTerms)
        flags |= kOrByThreads;
      d.flags = flags;
    };
    if (nq >= kParallelPackQueries) {
      tbb::parallel_for(tbb::blocked_range<std::size_t>(0, nq, 128),
                        [&](const tbb::blocked_range<std::size_t>& r) {
                          std::vector<std::uint32_t> chunk_dfs;
                          std::vector<unsigned> chunk_order;
                          for (std::size_t slot = r.begin(); slot < r.end(); ++slot)
                            pack_query(slot, chunk_dfs, chunk_order);
                        });
    } else {
      for (std::size_t slot = 0; slot < nq; ++slot) pack_query(slot, serial_dfs, serial_order);
    }
    std::memcpy(lane.host_in.data(), qd.data(), nq * sizeof(QueryDesc));
    if (!and_segments.empty())
      std::memcpy(lane.host_in.data() + R.and_seg_at, and_segments.data(),
                  and_segments.size() * sizeof(SegmentDesc));
    if (!or_segments.empty())
      std::memcpy(lane.host_in.data() + R.or_seg_at, or_segments.data(),
                  or_segments.size() * sizeof(SegmentDesc));
    lane.stats = GpuBatchStats{};
    lane.stats.timeline.host_pack_begin = std::chrono::duration<double, std::milli>(t0 - call_t0).count();
    lane.stats.queries = std::uint32_t(nq);
    lane.stats.or_window = run_or ? or_config.window : 0;
    lane.stats.or_threads = run_or ? or_config.threads : 0;
    lane.stats.and_segments = std::uint32_t(and_segments.size());
    lane.stats.or_segments = std::uint32_t(or_segments.size());
    lane.stats.pack_ms = ms_since(t0);
    lane.stats.h2d_bytes = lane.in_bytes;
    lane.stats.d2h_bytes = lane.out_bytes;

    const cudaStream_t s = lane.stream.get();
    lane.start.record(s);
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(lane.dev_in.data(), lane.host_in.data(), lane.in_bytes,
                                         cudaMemcpyHostToDevice, s));
    GPUSEARCH_CUDA_CHECK(cudaMemsetAsync(lane.dev_out.data(), 0, nq * sizeof(QueryOut), s));
    GPUSEARCH_CUDA_CHECK(cudaMemsetAsync(lane.dev_scratch.data() + R.theta_and_at, 0,
                                         R.scratch_bytes - R.theta_and_at, s));
    if (list_batch) {
      cache->stage_batch(int(launch % 2), *list_batch, s);
      lane.stats.shipped_bytes = list_batch->region_bytes();
      lane.stats.h2d_bytes += lane.stats.shipped_bytes;
    }
    lane.after_h2d.record(s);
    BatchPointers bp{};
    bp.queries = reinterpret_cast<const QueryDesc*>(lane.dev_in.data());
    bp.terms = reinterpret_cast<const TermDesc*>(lane.dev_in.data() + R.terms_at);
    bp.and_order = reinterpret_cast<const std::uint8_t*>(lane.dev_in.data() + R.order_at);
    bp.and_segments = reinterpret_cast<const SegmentDesc*>(lane.dev_in.data() + R.and_seg_at);
    bp.or_segments = reinterpret_cast<const SegmentDesc*>(lane.dev_in.data() + R.or_seg_at);
    bp.out = reinterpret_cast<QueryOut*>(lane.dev_out.data());
    bp.hits = reinterpret_cast<HitOut*>(lane.dev_out.data() + R.hits_at);
    bp.partial_hits = reinterpret_cast<HitOut*>(lane.dev_scratch.data());
    bp.partial_count = reinterpret_cast<std::uint32_t*>(lane.dev_scratch.data() + R.partial_count_at);
    bp.and_topk_rows = and_row != 0 ? lane.dev_scratch.data() + R.topk_rows_at : nullptr;
    bp.or_topk_rows = or_row != 0 ? lane.dev_scratch.data() + R.topk_rows_at : nullptr;
    bp.theta_and = reinterpret_cast<unsigned long long*>(lane.dev_scratch.data() + R.theta_and_at);
    bp.theta_or = reinterpret_cast<unsigned long long*>(lane.dev_scratch.data() + R.theta_or_at);
    bp.num_queries = std::uint32_t(nq);
    bp.num_and_segments = std::uint32_t(and_segments.size());
    bp.num_or_segments = std::uint32_t(or_segments.size());
    bp.k = k;
    bp.max_terms = max_terms;
    bp.bound_scale = m.options.bound_scale;
    const ShardView view = cache ? cache->view(int(launch % 2)) : m.image->view();
    if (run_and) {
      launch_and_kernel(view, bp, s);
      launch_topk_merge(bp, MergePhase::kAnd, s);
    }
    if (run_or) {
      if (warp_kernel) {
        launch_or_warp_kernel(view, bp, m.options.or_warp_window, s);
        lane.stats.or_warp_window = m.options.or_warp_window;
      } else {
        launch_or_kernel(view, bp, or_config, s);
      }
      if (bmw) launch_bmw_kernel(view, bp, m.options.bmw_threads, s);
      launch_topk_merge(bp, MergePhase::kOr, s);
    }
    if (list_batch) cache->restore_after_kernels(int(launch % 2), *list_batch, s);
    if (m.rows_on_device) {
      // The rows stay where the merge on the lead GPU reads them: the hits are rows already
      // (2 per query, k wide); each row's count and AND matches go right after them.
      launch_pack_row_meta(bp.out, std::uint32_t(nq),
                           reinterpret_cast<RowMeta*>(lane.dev_out.data() + R.out_bytes), s);
      lane.after_kernels.record(s);
      lane.after_kernels.synchronize();
      lane.stats.h2d_ms = lane.after_h2d.ms_since(lane.start);
      lane.stats.kernel_ms = lane.after_kernels.ms_since(lane.after_h2d);
      device_timeline(lane);
      lane.stats.d2h_bytes = 0;
      batches_.push_back(lane.stats);
      m.device_rows = lane.dev_out.data() + R.hits_at;
      break;  // one launch (search_into_device_rows checked the batch size)
    }
    lane.after_kernels.record(s);
    if (params.mode == Mode::kAndOr) {
      GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(lane.host_out.data(), lane.dev_out.data(),
                                           lane.out_bytes, cudaMemcpyDeviceToHost, s));
    } else {
      // One phase runs: each slot's second k hits (and-or's OR list) are never written or
      // read, so they stay on the device; at k = 1000 that halves the copy (65 of 131 MB
      // a batch of 4,096).
      const std::size_t row = 2 * std::size_t(k) * sizeof(HitOut);
      GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(lane.host_out.data(), lane.dev_out.data(), R.hits_at,
                                           cudaMemcpyDeviceToHost, s));
      GPUSEARCH_CUDA_CHECK(cudaMemcpy2DAsync(lane.host_out.data() + R.hits_at, row,
                                             lane.dev_out.data() + R.hits_at, row,
                                             std::size_t(k) * sizeof(HitOut), nq,
                                             cudaMemcpyDeviceToHost, s));
      lane.stats.d2h_bytes = R.hits_at + nq * std::size_t(k) * sizeof(HitOut);
    }
    lane.after_d2h.record(s);
    lane.stats.timeline.host_launched = ms_since(call_t0);
    lane.pending = true;
  }
  // The last launches: any that is back first, else wait for the oldest.
  while (true) {
    Lane* oldest = nullptr;
    bool finished_one = false;
    for (std::size_t i = 0; i < num_lanes; ++i) {
      Lane& lane = m.lanes[(launch + i) % num_lanes];
      if (!lane.pending) continue;
      if (!oldest) oldest = &lane;
      if (lane.after_d2h.completed()) {
        finish(lane);
        finished_one = true;
      }
    }
    if (!oldest) break;
    if (!finished_one) finish(*oldest);
  }
  if (m.post) m.post->wait();
  if (m.online) m.online->observe(queries);
}

}  // namespace gpusearch::gpu
