// One launch of the GPU engine's pipeline (gpu_engine.cpp plans the call and rotates its
// launches over the lanes): the lanes' buffers sized for the call, then per launch its queries
// packed into the lane's input buffer, copied in, the kernels, the answers copied back, and
// finally unpacked into the caller's results.
#include "gpu/gpu_engine_impl.hpp"
#include "gpu/or_warp_kernel.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "common/kth_impact_table.hpp"
#include "common/reference_engine.hpp"
#include "common/scoring.hpp"
#include "gpu/device_list_cache.hpp"
#include "gpu/device_shard.hpp"
#include "gpu/post_processing.hpp"
#include "gpu/query_kernels.hpp"
#include "gpu/range_rows_kernel.hpp"
#include "gpu/segment_plan.hpp"

namespace gpusearch::gpu {

namespace {

// Hits per batch above which the results are unpacked on every core (see unpack_results()).
constexpr std::size_t kParallelUnpackHits = 16 * 1024;
// A launch of at least this many queries is packed on every core (H100 host: 0.3 us a query
// on one thread, 1.3 ms for 4,096, during which the device has nothing of this call to run).
constexpr std::size_t kParallelPackQueries = 512;

constexpr std::size_t align_up(std::size_t x, std::size_t a) {
  return (x + a - 1) / a * a;
}

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

// Where the kernels find one launch's inputs, outputs and scratch in its lane's device buffers.
BatchPointers batch_pointers(const Lane& lane, const CallPlan& plan, const LaunchLayout& layout,
                             float bound_scale) {
  const BatchRegions& R = layout.regions;
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
  bp.and_topk_rows = layout.and_row != 0 ? lane.dev_scratch.data() + R.topk_rows_at : nullptr;
  bp.or_topk_rows = layout.or_row != 0 ? lane.dev_scratch.data() + R.topk_rows_at : nullptr;
  bp.theta_and = reinterpret_cast<unsigned long long*>(lane.dev_scratch.data() + R.theta_and_at);
  bp.theta_or = reinterpret_cast<unsigned long long*>(lane.dev_scratch.data() + R.theta_or_at);
  bp.num_queries = std::uint32_t(layout.nq);
  bp.num_and_segments = layout.and_segments;
  bp.num_or_segments = layout.or_segments;
  bp.k = plan.k;
  bp.max_terms = layout.max_terms;
  bp.bound_scale = bound_scale;
  return bp;
}
}  // namespace

// Buffers grow once per call, ahead of the pipeline, to the largest batch's needs: never a
// cudaMalloc or cudaFree (each synchronizes the device) between the batches of a call.
void GpuEngine::Impl::reserve_lane_buffers(const CallPlan& plan, CallScratch& scratch) {
  BatchRegions largest{};
  std::size_t largest_in = 0, largest_out = 0, largest_scratch = 0;
  for (std::size_t bi = 0; bi < plan.launches(); ++bi) {
    const std::size_t begin = plan.bounds[bi], end = plan.bounds[bi + 1];
    plan_segments(plan, begin, end, scratch.and_plan, scratch.or_plan);
    std::size_t nt = 0, nas = 0, nos = 0;
    unsigned max_terms = 1;
    for (std::size_t j = begin; j < end; ++j) {
      const std::size_t terms = plan.queries[plan.gpu_queries[j]].terms.size();
      nt += terms;
      max_terms = std::max<unsigned>(max_terms, unsigned(terms));
      nas += plan.run_and ? scratch.and_plan[j - begin].count : 0;
      nos += plan.run_or ? scratch.or_plan[j - begin].count : 0;
    }
    // The sizing may call for rows where the launch (fewer segments) does not: never less.
    largest = batch_regions(end - begin, nt, nas, nos, plan.k,
                            std::max(plan.and_topk_row(max_terms, nas, end - begin),
                                     plan.and_topk_row(max_terms, nas, nas)),
                            std::max(plan.or_topk_row(max_terms, nos, end - begin),
                                     plan.or_topk_row(max_terms, nos, nos)));
    largest_in = std::max(largest_in, largest.in_bytes);
    largest_out = std::max(largest_out,
                           largest.out_bytes + (rows_on_device ? row_meta_bytes(end - begin) : 0));
    largest_scratch = std::max(largest_scratch, largest.scratch_bytes);
  }
  for (std::size_t l = 0; l < plan.num_lanes; ++l) {
    Lane& lane = lanes[l];
    lane.host_in.reserve(largest_in);
    lane.host_out.reserve(largest_out);
    lane.dev_in.reserve(largest_in);
    lane.dev_out.reserve(largest_out);
    lane.dev_scratch.reserve(largest_scratch);
  }
}

// Packs launch `launch` into the lane's input buffer: its queries' segments (the work
// decomposition), descriptors and terms. t0: when packing began (the launch's timeline).
LaunchLayout GpuEngine::Impl::pack_launch(Lane& lane, const CallPlan& plan, std::size_t launch,
                                          CallScratch& scratch,
                                          std::chrono::steady_clock::time_point t0) {
  LaunchLayout layout;
  layout.launch = launch;
  const std::size_t begin = plan.bounds[launch], end = plan.bounds[launch + 1];
  layout.list_batch = plan.cache ? &plan.list_batches[launch] : nullptr;
  if (layout.list_batch) {
    lane.horizon = layout.list_batch->horizon;
    counters.add(*layout.list_batch);
  } else {
    lane.horizon.assign(end - begin, plan.shard_end);
  }
  lane.query_index.assign(plan.gpu_queries.begin() + std::ptrdiff_t(begin),
                          plan.gpu_queries.begin() + std::ptrdiff_t(end));
  const std::size_t nq = layout.nq = lane.query_index.size();
  plan_segments(plan, begin, end, scratch.and_plan, scratch.or_plan);
  std::vector<SegmentDesc>& and_segments = scratch.and_segments;
  std::vector<SegmentDesc>& or_segments = scratch.or_segments;
  and_segments.clear();
  or_segments.clear();
  std::size_t nt = 0;
  for (std::size_t i : lane.query_index) {
    nt += plan.queries[i].terms.size();
    layout.max_terms = std::max<unsigned>(layout.max_terms, unsigned(plan.queries[i].terms.size()));
  }
  layout.warp_kernel = plan.warp_launch(layout.max_terms);
  layout.bmw = !layout.warp_kernel && plan.bmw_launch(begin, end);
  std::vector<QueryDesc> qd(nq);
  for (std::size_t slot = 0; slot < nq; ++slot) {
    QueryDesc& d = qd[slot];
    d.and_segment_begin = std::uint32_t(and_segments.size());
    d.or_segment_begin = std::uint32_t(or_segments.size());
    const DocId horizon = lane.horizon[slot];
    if (plan.run_and)
      append_segments(shard, std::uint32_t(slot), scratch.and_plan[slot], horizon, and_segments);
    if (plan.run_or)
      append_segments(shard, std::uint32_t(slot), scratch.or_plan[slot], horizon, or_segments);
    clip_segments(and_segments, d.and_segment_begin, doc_begin, doc_end);
    clip_segments(or_segments, d.or_segment_begin, doc_begin, doc_end);
    d.and_segment_count = std::uint32_t(and_segments.size()) - d.and_segment_begin;
    d.or_segment_count = std::uint32_t(or_segments.size()) - d.or_segment_begin;
  }
  layout.and_segments = std::uint32_t(and_segments.size());
  layout.or_segments = std::uint32_t(or_segments.size());
  layout.and_row = plan.and_topk_row(layout.max_terms, and_segments.size(), nq);
  layout.or_row = plan.or_topk_row(layout.max_terms, or_segments.size(), nq);
  const BatchRegions& R = layout.regions = batch_regions(
      nq, nt, and_segments.size(), or_segments.size(), plan.k, layout.and_row, layout.or_row);
  lane.in_bytes = R.in_bytes;
  lane.out_bytes = R.out_bytes;
  // Reserved for the call's largest batch above; these only check that.
  lane.host_in.reserve(R.in_bytes);
  lane.host_out.reserve(R.out_bytes);
  lane.dev_in.reserve(R.in_bytes);
  lane.dev_out.reserve(R.out_bytes + (rows_on_device ? row_meta_bytes(nq) : 0));
  lane.dev_scratch.reserve(R.scratch_bytes);
  pack_queries(lane, plan, layout, qd, scratch);
  std::memcpy(lane.host_in.data(), qd.data(), nq * sizeof(QueryDesc));
  if (!and_segments.empty())
    std::memcpy(lane.host_in.data() + R.and_seg_at, and_segments.data(),
                and_segments.size() * sizeof(SegmentDesc));
  if (!or_segments.empty())
    std::memcpy(lane.host_in.data() + R.or_seg_at, or_segments.data(),
                or_segments.size() * sizeof(SegmentDesc));
  lane.stats = GpuBatchStats{};
  lane.stats.timeline.host_pack_begin =
      std::chrono::duration<double, std::milli>(t0 - call_host_start).count();
  lane.stats.queries = std::uint32_t(nq);
  lane.stats.or_window = plan.run_or ? plan.or_config.window : 0;
  lane.stats.or_threads = plan.run_or ? plan.or_config.threads : 0;
  lane.stats.and_segments = layout.and_segments;
  lane.stats.or_segments = layout.or_segments;
  lane.stats.pack_ms = ms_since(t0);
  lane.stats.h2d_bytes = lane.in_bytes;
  lane.stats.d2h_bytes = lane.out_bytes;
  return layout;
}

// Each query's descriptor (qd[slot], past its segments), terms and AND order, into the lane's
// input buffer.
void GpuEngine::Impl::pack_queries(Lane& lane, const CallPlan& plan, const LaunchLayout& layout,
                                   std::span<QueryDesc> qd, CallScratch& scratch) const {
  const IndexParams& ip = shard.params();
  const SearchParams& params = plan.params;
  const unsigned k = plan.k;
  const std::size_t nq = layout.nq;
  const ListBatch* const list_batch = layout.list_batch;
  auto* td = reinterpret_cast<TermDesc*>(lane.host_in.data() + layout.regions.terms_at);
  auto* od = reinterpret_cast<std::uint8_t*>(lane.host_in.data() + layout.regions.order_at);
  // Each query's terms start where the previous query's end (a prefix sum), so the queries
  // pack independently: on every core for a large launch.
  std::vector<std::uint32_t> term_begin(nq + 1, 0);
  for (std::size_t slot = 0; slot < nq; ++slot)
    term_begin[slot + 1] =
        term_begin[slot] + std::uint32_t(plan.queries[lane.query_index[slot]].terms.size());
  auto pack_query = [&](std::size_t slot, std::vector<std::uint32_t>& dfs,
                        std::vector<unsigned>& order) {
    const Query& q = plan.queries[lane.query_index[slot]];
    const unsigned T = unsigned(q.terms.size());
    const std::uint32_t term_pos = term_begin[slot];
    dfs.clear();
    for (TermId t : q.terms) dfs.push_back(shard.term(t).df_global);
    const QueryWeights w =
        make_query_weights(params.scoring, params.alpha, ip.bm25, ip.collection.num_docs, dfs);
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
    if (seeds && plan.pruned && plan.run_or) {
      double seed = 0.0;
      for (unsigned j = 0; j < T; ++j)
        seed = std::max(seed, w.term_weight[j] * seeds->lower_bound(q.terms[j], k));
      d.theta_seed =
          seed * (1.0 - kBoundSlack) / options.bound_scale * options.threshold_seed_scale;
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
      const std::uint64_t first =
          plan.cache ? plan.cache->numbering().first_slot(q.terms[j]) : ti.first_block;
      const std::uint32_t blocks =
          list_batch ? list_batch->available_blocks(plan.cache->directory(), q.terms[j])
                     : ti.num_blocks;
      td[term_pos + j] = TermDesc{first, blocks, ti.df_shard, w.term_weight[j], ti.max_impact, 0};
      od[term_pos + j] = std::uint8_t(order[j]);
    }
    std::uint32_t flags = 0;
    switch (params.mode) {
      case Mode::kAnd:
        flags = kRunAnd;
        break;
      case Mode::kOr:
        flags = kRunOr;
        break;
      case Mode::kAndOr:
        flags = kRunAnd | kRunOr | kOrOnlyIfAndShort;
        break;
    }
    if (plan.pruned) flags |= kEarlyTerminate | kPruneBlockMax;
    // Block-max WAND over the threads of a block (paper 002) where its per-thread top-k and
    // cursors fit; other queries take the windowed OR kernel with block-max pruning.
    if (layout.bmw && params.mode != Mode::kAnd && k <= kBmwMaxK && T <= kBmwMaxTerms)
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
    for (std::size_t slot = 0; slot < nq; ++slot)
      pack_query(slot, scratch.serial_dfs, scratch.serial_order);
  }
}

// The launch on the lane's stream: the input copied in (with the list cache, the lists it
// ships too), then the kernels of its phases.
void GpuEngine::Impl::issue_launch(Lane& lane, const CallPlan& plan, const LaunchLayout& layout) {
  const BatchRegions& R = layout.regions;
  const ListBatch* const list_batch = layout.list_batch;
  const int cache_region = int(layout.launch % 2);  // the list cache's shipping region
  const cudaStream_t s = lane.stream.get();
  lane.start.record(s);
  GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(lane.dev_in.data(), lane.host_in.data(), lane.in_bytes,
                                       cudaMemcpyHostToDevice, s));
  GPUSEARCH_CUDA_CHECK(cudaMemsetAsync(lane.dev_out.data(), 0, layout.nq * sizeof(QueryOut), s));
  GPUSEARCH_CUDA_CHECK(cudaMemsetAsync(lane.dev_scratch.data() + R.theta_and_at, 0,
                                       R.scratch_bytes - R.theta_and_at, s));
  if (list_batch) {
    plan.cache->stage_batch(cache_region, *list_batch, s);
    lane.stats.shipped_bytes = list_batch->region_bytes();
    lane.stats.h2d_bytes += lane.stats.shipped_bytes;
  }
  lane.after_h2d.record(s);
  const BatchPointers bp = batch_pointers(lane, plan, layout, options.bound_scale);
  const ShardView view = plan.cache ? plan.cache->view(cache_region) : image->view();
  if (plan.run_and) {
    launch_and_kernel(view, bp, s);
    launch_topk_merge(bp, MergePhase::kAnd, s);
  }
  if (plan.run_or) {
    if (layout.warp_kernel) {
      launch_or_warp_kernel(view, bp, options.or_warp_window, s);
      lane.stats.or_warp_window = options.or_warp_window;
    } else {
      launch_or_kernel(view, bp, plan.or_config, s);
    }
    if (layout.bmw) launch_bmw_kernel(view, bp, options.bmw_threads, s);
    launch_topk_merge(bp, MergePhase::kOr, s);
  }
  if (list_batch) plan.cache->restore_after_kernels(cache_region, *list_batch, s);
}

// search_into_device_rows: the rows stay where the merge on the lead GPU reads them: the hits
// are rows already (2 per query, k wide); each row's count and AND matches go right after
// them. The launch is complete when this returns.
void GpuEngine::Impl::keep_rows_on_device(Lane& lane, const LaunchLayout& layout,
                                          std::vector<GpuBatchStats>& batches) {
  const BatchRegions& R = layout.regions;
  const cudaStream_t s = lane.stream.get();
  launch_pack_row_meta(reinterpret_cast<const QueryOut*>(lane.dev_out.data()),
                       std::uint32_t(layout.nq),
                       reinterpret_cast<RowMeta*>(lane.dev_out.data() + R.out_bytes), s);
  lane.after_kernels.record(s);
  lane.after_kernels.synchronize();
  lane.stats.h2d_ms = lane.after_h2d.ms_since(lane.start);
  lane.stats.kernel_ms = lane.after_kernels.ms_since(lane.after_h2d);
  lane.record_device_timeline(call_start);
  lane.stats.d2h_bytes = 0;
  batches.push_back(lane.stats);
  device_rows = lane.dev_out.data() + R.hits_at;
}

// The answers copied back on the lane's stream; the lane is pending until finish_launch.
void GpuEngine::Impl::copy_results_back(Lane& lane, const CallPlan& plan,
                                        const LaunchLayout& layout) {
  const BatchRegions& R = layout.regions;
  const std::size_t k = plan.k;
  const cudaStream_t s = lane.stream.get();
  lane.after_kernels.record(s);
  if (plan.params.mode == Mode::kAndOr) {
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(lane.host_out.data(), lane.dev_out.data(), lane.out_bytes,
                                         cudaMemcpyDeviceToHost, s));
  } else {
    // One phase runs: each slot's second k hits (and-or's OR list) are never written or
    // read, so they stay on the device; at k = 1000 that halves the copy (65 of 131 MB
    // a batch of 4,096).
    const std::size_t row = 2 * k * sizeof(HitOut);
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(lane.host_out.data(), lane.dev_out.data(), R.hits_at,
                                         cudaMemcpyDeviceToHost, s));
    GPUSEARCH_CUDA_CHECK(cudaMemcpy2DAsync(lane.host_out.data() + R.hits_at, row,
                                           lane.dev_out.data() + R.hits_at, row, k * sizeof(HitOut),
                                           layout.nq, cudaMemcpyDeviceToHost, s));
    lane.stats.d2h_bytes = R.hits_at + layout.nq * k * sizeof(HitOut);
  }
  lane.after_d2h.record(s);
  lane.stats.timeline.host_launched = ms_since(call_host_start);
  lane.pending = true;
}

// Waits for the lane's launch, unpacks its answers into `out` (list cache: hands the queries
// it could not finish to post-processing) and records its figures; the lane is free again.
void GpuEngine::Impl::finish_launch(Lane& lane, const CallPlan& plan, std::span<ShardResult> out,
                                    std::vector<GpuBatchStats>& batches) {
  lane.stats.timeline.host_wait_begin = ms_since(call_host_start);
  lane.after_d2h.synchronize();
  lane.stats.timeline.host_wait_end = ms_since(call_host_start);
  lane.stats.h2d_ms = lane.after_h2d.ms_since(lane.start);
  lane.stats.kernel_ms = lane.after_kernels.ms_since(lane.after_h2d);
  lane.stats.d2h_ms = lane.after_d2h.ms_since(lane.after_kernels);
  lane.record_device_timeline(call_start);
  lane.stats.timeline.device_d2h_end = lane.after_d2h.ms_since(call_start);
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t nq = lane.query_index.size();
  unpack_results(lane, plan, out);
  const auto* qout = reinterpret_cast<const QueryOut*>(lane.host_out.data());
  for (std::size_t slot = 0; slot < nq; ++slot) {
    const QueryOut& o = qout[slot];
    lane.stats.postings_bytes_read += o.bytes_read;
    lane.stats.postings_decoded += o.postings_decoded;
    lane.stats.early_termination_rounds_saved += o.rounds_saved;
  }
  if (plan.cache) complete_truncated_queries(lane, plan, out);
  lane.stats.unpack_ms = ms_since(t0);
  lane.stats.timeline.host_unpack_end = ms_since(call_host_start);
  batches.push_back(lane.stats);
  lane.pending = false;
}

// Each slot's answer (its counters, hits, and-or's AND matches and OR hits) into its query's
// result in `out`.
void GpuEngine::Impl::unpack_results(const Lane& lane, const CallPlan& plan,
                                     std::span<ShardResult> out) const {
  const unsigned k = plan.k;
  const std::size_t nq = lane.query_index.size();
  const auto* qout = reinterpret_cast<const QueryOut*>(lane.host_out.data());
  const auto* hits =
      reinterpret_cast<const HitOut*>(lane.host_out.data() + align_up(nq * sizeof(QueryOut), 16));
  const auto ranks = shard.global_ranks();
  const std::optional<GlobalRank> rank_base = shard.contiguous_rank_base();
  // A result the kernels cannot have produced (a count above k, a docID past the shard) is
  // refused with the batch's details instead of being read: the caller falls back.
  auto to_ranked = [&](const HitOut* h, std::uint32_t n, std::size_t slot, const char* what) {
    for (std::uint32_t j = 0; j < n; ++j)
      if (h[j].doc >= shard.num_docs())
        throw CudaError(fmt::format(
            "GPU engine: corrupt {} result of batch slot {} of {} (k {}, launch of {} AND and "
            "{} OR segments): hit {} of {} has docID {} in a shard of {} documents",
            what, slot, lane.query_index.size(), k, lane.stats.and_segments, lane.stats.or_segments,
            j, n, h[j].doc, shard.num_docs()));
    std::vector<RankedDoc> v;
    v.reserve(n);
    // A contiguous run of ranks (every index the builder writes): the rank is computed, not
    // read at random (at k = 1000 those reads were most of the unpacking).
    if (rank_base)
      for (std::uint32_t j = 0; j < n; ++j)
        v.push_back(RankedDoc{h[j].score, *rank_base + h[j].doc, shard_id, h[j].doc});
    else
      for (std::uint32_t j = 0; j < n; ++j)
        v.push_back(RankedDoc{h[j].score, ranks[h[j].doc], shard_id, h[j].doc});
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
      throw CudaError(
          fmt::format("GPU engine: corrupt result counts in batch slot {}: {} and {} hits for k {}",
                      slot, o.num_hits, o.num_or_hits, k));
    r.hits = to_ranked(h, o.num_hits, slot, "first");
    if (plan.params.mode == Mode::kAndOr) {
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
}

// List cache (paper 000, 3.4): a query whose lists were truncated at its horizon is done if
// its answer below the horizon is final; else a post-processing thread completes it from
// the horizon on while this thread packs and launches the next batch.
void GpuEngine::Impl::complete_truncated_queries(Lane& lane, const CallPlan& plan,
                                                 std::span<ShardResult> out) {
  const std::size_t nq = lane.query_index.size();
  const SearchParams& params = plan.params;
  for (std::size_t slot = 0; slot < nq; ++slot) {
    const DocId horizon = lane.horizon[slot];
    if (horizon >= plan.shard_end) continue;
    const std::size_t qi = lane.query_index[slot];
    if (horizon > 0 && prefix_answer_is_final(shard, plan.queries[qi], params, horizon, out[qi],
                                              options.finality_bound_scale))
      continue;
    if (horizon == 0) ++counters.cpu_only;
    ++counters.post_processed;
    ++lane.stats.post_processed;
    // The spans by value: the task may outlive this frame (search() waits for it).
    post->submit(
        [this, queries = plan.queries, &params, out, qi, horizon, running = std::move(out[qi])] {
          ShardResult done;
          if (post_processor) {
            done = post_processor(queries[qi], params, horizon, running);
          } else {
            ReferenceEngine ref(shard, shard_id);
            std::vector<ShardResult> one(1);
            ref.search(std::span<const Query>(&queries[qi], 1), params, one);
            done = std::move(one[0]);
          }
          done.counters.add(running.counters);
          out[qi] = std::move(done);
        });
  }
}

}  // namespace gpusearch::gpu
