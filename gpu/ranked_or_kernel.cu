// OR by score accumulation over windows of a segment's docID space (paper 001, section 8.3),
// one thread block per segment. For each window [lo, hi) every list's blocks that overlap it
// become one flat list of work items; the block's warps take items in any order, decode them
// and add float contributions to shared-memory accumulators with atomics, so no list waits for
// another (the order of additions changes a sum by float rounding only, about 1e-7 relative:
// inside the exactness contract, ARCHITECTURE.md). A document enters the window's touched list
// the first time its accumulator leaves zero; after one barrier the touched documents are
// scored and offered to the segment's top-k. Empty stretches of the docID space are jumped
// over. Pruning (exact): a window whose block-max bound cannot beat the query's running k-th
// score (shared by its segments) is skipped without decoding, and with GS-ordered docIDs a
// segment stops once the k-th score reaches factor * GS(lo) (paper 000).
#include <cfloat>

#include "gpu/cuda_util.hpp"
#include "gpu/kernel_limits.hpp"
#include "gpu/segment_output.cuh"
#include "gpu/shard_access.cuh"

namespace gpusearch::gpu {

namespace {

constexpr unsigned kWarps = kThreadsPerQuery / 32;
constexpr unsigned kTopKBuffer = 2 * kThreadsPerQuery;

struct OrLayout {
  std::size_t state, counters, cursor, end, item_begin, block_ub, weight, acc, touched, warp_docs,
      warp_freqs, warp_stage, top_score, top_doc, total;
};
__host__ __device__ constexpr OrLayout or_layout(unsigned k, unsigned terms, unsigned window) {
  OrLayout l{};
  std::size_t o = 0;
  l.state = o; o = align16(o + sizeof(TopKState) + 16);
  l.counters = o; o = align16(o + kNumCounters * sizeof(unsigned long long));
  l.cursor = o; o = align16(o + terms * 8);
  l.end = o; o = align16(o + terms * 8);
  l.item_begin = o; o = align16(o + (terms + 1) * 4);
  l.block_ub = o; o = align16(o + terms * 8);
  l.weight = o; o = align16(o + terms * 4);
  l.acc = o; o = align16(o + std::size_t(window) * 4);          // float accumulators
  l.touched = o; o = align16(o + std::size_t(window) * 2);      // window offsets (u16)
  l.warp_docs = o; o = align16(o + kWarps * kValuesPerBlock * 4);
  l.warp_freqs = o; o = align16(o + kWarps * kValuesPerBlock * 4);
  l.warp_stage = o; o = align16(o + kWarps * kStageWords * 4);
  const unsigned cap = topk_capacity(k, kTopKBuffer);
  l.top_score = o; o = align16(o + cap * 8);
  l.top_doc = o; o = align16(o + cap * 4);
  l.total = o;
  return l;
}

enum Control : std::uint32_t { kProcess = 0, kSkipWindow = 1, kStop = 2 };

__global__ void __launch_bounds__(kThreadsPerQuery)
    ranked_or_kernel(ShardView shard, BatchPointers batch, unsigned window) {
  extern __shared__ __align__(16) char smem[];
  const std::uint32_t row = blockIdx.x;
  const SegmentDesc seg = batch.or_segments[row];
  const QueryDesc q = batch.queries[seg.query];
  // Segments of block-max WAND queries belong to the BMW kernel; and-or runs OR only where the
  // AND answer came up short. The merge kernel applies the same tests, so it never reads the
  // rows these early returns leave unwritten.
  if (!(q.flags & kRunOr) || (q.flags & kOrByThreads)) return;
  QueryOut& out = batch.out[q.slot];
  if ((q.flags & kOrOnlyIfAndShort) && out.and_matches >= batch.k) return;
  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
  const unsigned T = q.num_terms;
  if (T == 0) {
    if (tid == 0) batch.partial_count[row] = 0;
    return;
  }
  const OrLayout L = or_layout(batch.k, batch.max_terms, window);
  auto& st = *carve<TopKState>(smem, L.state);
  auto* counters = carve<unsigned long long>(smem, L.counters);
  auto* cursor = carve<std::uint64_t>(smem, L.cursor);
  auto* end = carve<std::uint64_t>(smem, L.end);
  auto* item_begin = carve<std::uint32_t>(smem, L.item_begin);
  auto* block_ub = carve<double>(smem, L.block_ub);
  auto* weight = carve<float>(smem, L.weight);
  auto* acc = carve<float>(smem, L.acc);
  auto* touched = carve<std::uint16_t>(smem, L.touched);
  auto* top_score = carve<double>(smem, L.top_score);
  auto* top_doc = carve<std::uint32_t>(smem, L.top_doc);
  std::uint32_t* my_docs = carve<std::uint32_t>(smem, L.warp_docs) + warp * kValuesPerBlock;
  std::uint32_t* my_freqs = carve<std::uint32_t>(smem, L.warp_freqs) + warp * kValuesPerBlock;
  std::uint32_t* my_stage = carve<std::uint32_t>(smem, L.warp_stage) + warp * kStageWords;
  const TermDesc* terms = batch.terms + q.term_begin;
  const bool prune = (q.flags & kPruneBlockMax) != 0;
  const bool early = (q.flags & kEarlyTerminate) && q.gs_bound_factor >= 0;
  const float static_weight = static_cast<float>(q.static_weight);
  unsigned long long* theta_query = batch.theta_or + seg.query;

  __shared__ std::uint32_t window_lo, next_lo, touched_count, control;
  __shared__ double theta_window;  // the query's k-th score lower bound, read once per window
  topk_init(st, batch.k);
  if (tid < kNumCounters) counters[tid] = 0;
  for (unsigned t = tid; t < T; t += blockDim.x) {
    cursor[t] = find_block(shard.block_last_docid, terms[t].first_block,
                           terms[t].first_block + terms[t].num_blocks, seg.doc_lo);
    weight[t] = static_cast<float>(terms[t].weight);
  }
  for (unsigned i = tid; i < window; i += blockDim.x) acc[i] = 0.0f;
  if (tid == 0) {
    window_lo = seg.doc_lo;
    touched_count = 0;
  }
  unsigned stopped_early = 0;
  __syncthreads();

  while (window_lo < seg.doc_hi) {
    const std::uint32_t lo = window_lo;
    const std::uint32_t hi = (seg.doc_hi - lo > window) ? lo + window : seg.doc_hi;
    // Each list's blocks overlapping [lo, hi): [cursor, end). Blocks before cursor end below lo.
    // One warp per list, 32 block boundaries per step (a window spans few blocks of a list).
    for (unsigned t = warp; t < T; t += kWarps) {
      const TermDesc& term = terms[t];
      const std::uint64_t list_end = term.first_block + term.num_blocks;
      std::uint64_t f = list_end;
      float ub = 0.0f;
      for (std::uint64_t base = cursor[t]; base < list_end; base += 32) {
        const std::uint64_t b = base + lane;
        const bool in_list = b < list_end;
        const std::uint32_t last = in_list ? __ldg(shard.block_last_docid + b) : 0u;
        const unsigned ge = __ballot_sync(kFullMask, in_list && last >= hi);
        const std::uint64_t first_ge = ge ? base + __ffs(ge) - 1 : list_end;
        // Blocks before the first ending at or past hi overlap the window; so does that one
        // if it starts before hi.
        bool overlaps = in_list && b < first_ge;
        if (in_list && b == first_ge) overlaps = block_floor(shard, term, b) < hi;
        if (overlaps) ub = fmaxf(ub, __ldg(shard.block_max_impact + b));
        if (ge) {
          f = first_ge;
          break;
        }
      }
      for (unsigned d = 16; d > 0; d >>= 1) ub = fmaxf(ub, __shfl_xor_sync(kFullMask, ub, d));
      if (lane == 0) {
        end[t] = (f < list_end && block_floor(shard, term, f) < hi) ? f + 1 : f;
        block_ub[t] = __dmul_rn(term.weight, static_cast<double>(ub));
      }
    }
    __syncthreads();
    if (tid == 0) {
      next_lo = kEndDoc;
      control = kProcess;
      item_begin[0] = 0;
      for (unsigned t = 0; t < T; ++t)
        item_begin[t + 1] = item_begin[t] + static_cast<std::uint32_t>(end[t] - cursor[t]);
      double theta = load_theta(theta_query);
      if (st.full) {
        raise_theta(theta_query, st.threshold_score);
        if (st.threshold_score > theta) theta = st.threshold_score;
      }
      theta_window = theta;
      if (theta > 0.0) {
        const double slack = (1.0 + kBoundSlack) * batch.bound_scale;
        if (early && q.gs_bound_factor * static_cast<double>(__ldg(shard.global_score + lo)) *
                             slack < theta) {
          control = kStop;
        } else if (prune) {
          double bound = q.static_weight;  // PR' <= 1
          for (unsigned t = 0; t < T; ++t) bound += block_ub[t];
          if (bound * slack < theta) control = kSkipWindow;
        }
      }
    }
    __syncthreads();
    if (control == kStop) {
      stopped_early = 1;
      if (tid == 0) counters[kRoundsSaved] += (seg.doc_hi - lo + window - 1) / window;
      break;
    }
    if (control == kProcess) {
      const std::uint32_t items = item_begin[T];
      for (std::uint32_t item = warp; item < items; item += kWarps) {
        unsigned t = 0;
        while (item >= item_begin[t + 1]) ++t;
        const TermDesc& term = terms[t];
        const std::uint64_t b = cursor[t] + (item - item_begin[t]);
        unsigned words;
        const unsigned n = warp_decode_posting_block(shard, b, block_floor(shard, term, b),
                                                     my_stage, my_docs, my_freqs, lane, &words);
        if (lane == 0) {
          atomicAdd(&counters[kPostings], n);
          atomicAdd(&counters[kBlocksDecoded], 1ull);
          atomicAdd(&counters[kBytesRead], 4ull * words);
        }
        const float w = weight[t];
        std::uint32_t next_here = kEndDoc;
        // First every lane gathers its four postings' norms, so that the loads are in flight
        // together; then the accumulators are updated.
        std::uint32_t dv[4];
        float cv[4];
#pragma unroll
        for (unsigned r = 0; r < 4; ++r) {
          const unsigned i = 32 * r + lane;
          dv[r] = i < n ? my_docs[i] : kEndDoc;
          cv[r] = 0.0f;
          if (dv[r] >= lo && dv[r] < hi)
            cv[r] = contribution_f(w, my_freqs[i], __ldg(shard.length_norm_f + dv[r]));
        }
#pragma unroll
        for (unsigned r = 0; r < 4; ++r) {
          const std::uint32_t d = dv[r];
          const bool in_window = d >= lo && d < hi;
          if (d >= hi && d != kEndDoc && d < next_here) next_here = d;
          bool first_touch = false;
          if (in_window) {
            // Never add zero, so that "was zero" means "first touch" (FLT_MIN is far below
            // the contract's tolerance of any score).
            const float old = atomicAdd(acc + (d - lo), fmaxf(cv[r], FLT_MIN));
            first_touch = old == 0.0f;
          }
          const unsigned fresh = __ballot_sync(kFullMask, first_touch);
          if (fresh) {  // one shared-memory atomic per warp, not per document
            const unsigned leader = __ffs(fresh) - 1;
            unsigned at = 0;
            if (lane == leader) at = atomicAdd(&touched_count, __popc(fresh));
            at = __shfl_sync(kFullMask, at, leader);
            if (first_touch)
              touched[at + __popc(fresh & ((1u << lane) - 1u))] = static_cast<std::uint16_t>(d - lo);
          }
        }
        for (unsigned d = 16; d > 0; d >>= 1)
          next_here = min(next_here, __shfl_xor_sync(kFullMask, next_here, d));
        if (lane == 0 && next_here != kEndDoc) atomicMin(&next_lo, next_here);
        __syncwarp();  // my_docs / my_freqs are rewritten by the warp's next item
      }
      __syncthreads();
      // Score the touched documents and offer those that can still enter the top-k.
      const unsigned n_touched = touched_count;
      const double theta = theta_window;
      for (unsigned base = 0; base < n_touched; base += blockDim.x) {
        const unsigned i = base + tid;
        if (i < n_touched) {
          const unsigned slot = touched[i];
          const std::uint32_t d = lo + slot;
          const float score = acc[slot] + static_weight * __ldg(shard.pagerank + d);
          acc[slot] = 0.0f;
          // Strictly below a k-th score some segment already holds: cannot enter the top-k.
          if (static_cast<double>(score) >= theta)
            topk_offer(st, top_score, top_doc, static_cast<double>(score), d);
        }
        topk_maybe_flush(st, top_score, top_doc, kTopKBuffer);
      }
      if (tid == 0) {
        counters[kDocsScored] += n_touched;
        touched_count = 0;
      }
    }
    __syncthreads();
    // Advance: a list's cursor keeps its straddling block (decoded again in the next window);
    // the next window starts at the smallest docID any list can still hold at or past hi.
    for (unsigned t = tid; t < T; t += blockDim.x) {
      const TermDesc& term = terms[t];
      const std::uint64_t list_end = term.first_block + term.num_blocks;
      const std::uint64_t e = end[t];
      std::uint64_t c = e;
      if (e > cursor[t] && __ldg(shard.block_last_docid + e - 1) >= hi) c = e - 1;
      if (control != kProcess)
        atomicAdd(&counters[kBlocksSkipped], static_cast<unsigned long long>(c - cursor[t]));
      // A processed straddler's postings at or past hi already went into next_lo.
      const bool processed = control == kProcess && c < e;
      cursor[t] = c;
      if (c < list_end && !processed) {
        const std::uint32_t f = block_floor(shard, term, c);
        atomicMin(&next_lo, f > hi ? f : hi);
      }
    }
    __syncthreads();
    if (tid == 0) window_lo = next_lo < hi ? hi : next_lo;
    __syncthreads();
  }
  topk_flush(st, top_score, top_doc);
  write_partial(st, top_score, top_doc, batch, row);
  if (tid == 0) {
    if (st.full) raise_theta(theta_query, st.threshold_score);
    out.or_ran = 1;
  }
  add_counters(out, counters, stopped_early);
}

}  // namespace

std::size_t or_kernel_shared_bytes(unsigned k, unsigned max_terms, unsigned window) {
  return or_layout(k, max_terms, window).total;
}

void launch_or_kernel(const ShardView& shard, const BatchPointers& batch, unsigned window,
                      cudaStream_t stream) {
  if (batch.num_or_segments == 0) return;
  const std::size_t bytes = or_kernel_shared_bytes(batch.k, batch.max_terms, window);
  check_shared_budget(bytes, reinterpret_cast<const void*>(ranked_or_kernel), "ranked_or_kernel",
                      "lower k or --or-window");
  ranked_or_kernel<<<batch.num_or_segments, kThreadsPerQuery, bytes, stream>>>(shard, batch,
                                                                              window);
  GPUSEARCH_CUDA_CHECK_LAUNCH("ranked_or_kernel");
}

void register_or_kernel(KernelRegistry& registry) {
  registry.add(reinterpret_cast<const void*>(ranked_or_kernel));
}

}  // namespace gpusearch::gpu
