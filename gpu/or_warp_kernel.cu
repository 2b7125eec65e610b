// OR over the decoded posting layout with one accumulator window per warp and no block
// barrier until the end (algorithm `warp`). The block-window kernel (ranked_or_kernel.cu) makes
// all its warps meet at four barriers per window, and with the few blocks of postings a window
// holds most warps wait there: Nsight Compute put 69% of its stall cycles on those barriers.
// Here a segment's docID range is cut into one contiguous share per warp; each warp walks its
// share in windows of `window` documents with its own shared-memory accumulators:
//   1. every list's postings below the window's end are added (float atomics, any order: the
//      sums differ by float rounding only, inside ARCHITECTURE.md's exactness contract);
//      32 x kRounds postings of a list are loaded at a time, docIDs and impacts together, and
//      the first docID at or past the end tells where the next window may start;
//   2. the accumulators are read back and cleared, 128 documents per step; a step is passed
//      over with one test where none of its sums can still enter the top-k;
//   3. the others' candidates (PageRank loads in flight together) are offered to the warp's
//      top-k, one entry per lane (k <= 32), and the query's running k-th score is raised.
// At the end the block's warps merge their top-k rows into the segment's partial row, as the
// other segment kernels write it. No list is pruned: exact by construction; the query's
// running k-th score (and the host's seed, a lower bound of it) only filters candidates.
#include <cfloat>
#include <stdexcept>

#include "gpu/cuda_util.hpp"
#include "gpu/kernel_limits.hpp"
#include "gpu/or_warp_kernel.hpp"
#include "gpu/or_warp_topk.cuh"
#include "gpu/segment_output.cuh"
#include "gpu/shard_access.cuh"

namespace gpusearch::gpu {

namespace {

constexpr unsigned kRounds = 2;  // 32-posting loads of one list in flight per step
constexpr unsigned kGroup = 3;   // lists whose first loads of a window are in flight together

struct WarpLayout {
  std::size_t acc, merge_score, merge_doc, block_topk, top_score, top_doc, counters, total;
};
// k > kOrWarpMaxK: one top-k per block, in shared memory, instead of the warps' merge rows.
__host__ __device__ constexpr unsigned block_topk_capacity(unsigned k) {
  return topk_capacity(k, 256);  // k plus a buffer of newcomers, a power of two
}
__host__ __device__ constexpr WarpLayout warp_layout(unsigned window, unsigned threads,
                                                     unsigned k) {
  const unsigned warps = threads / 32;
  const bool block_topk = k > kOrWarpMaxK;
  WarpLayout l{};
  std::size_t o = 0;
  l.acc = o; o = align16(o + std::size_t(warps) * window * 4);
  if (block_topk) {
    l.block_topk = o; o = align16(o + 64);
    l.top_score = o; o = align16(o + std::size_t(block_topk_capacity(k)) * 8);
    l.top_doc = o; o = align16(o + std::size_t(block_topk_capacity(k)) * 4);
  } else {
    l.merge_score = o; o = align16(o + std::size_t(warps) * 32 * 8);
    l.merge_doc = o; o = align16(o + std::size_t(warps) * 32 * 4);
  }
  l.counters = o; o = align16(o + kNumCounters * sizeof(unsigned long long));
  l.total = o;
  return l;
}

// The first index i in [a, n) with docs[i] >= target, where docs[0, a) are all below it: 32
// probes a round, so the range shrinks 32-fold per trip to memory. Executed by a whole warp.
__device__ __forceinline__ std::uint32_t warp_seek(const std::uint32_t* docs, std::uint32_t a,
                                                   std::uint32_t n, std::uint32_t target,
                                                   unsigned lane) {
  std::uint32_t b = n;  // docs[b] >= target, or b == n
  while (a < b) {
    const std::uint32_t step = (b - a + 31) / 32;
    const std::uint32_t p = a + lane * step;
    const bool below = p < b && __ldg(docs + p) < target;
    const unsigned cnt = __popc(__ballot_sync(kFullMask, below));  // sorted: a prefix of probes
    if (cnt == 0) break;                                              // docs[a] >= target
    const std::uint32_t next_b = a + cnt * step;
    a = a + (cnt - 1) * step + 1;
    if (next_b < b) b = next_b;
  }
  return a;
}

template <unsigned kThreads, bool kLargeK>
__global__ void __launch_bounds__(kThreads, (1024 / kThreads > 0 ? 1024 / kThreads : 1))
    or_warp_kernel(ShardView shard, BatchPointers batch, unsigned window) {
  constexpr unsigned kWarps = kThreads / 32;
  extern __shared__ __align__(16) char smem[];
  const std::uint32_t row = blockIdx.x;
  const SegmentDesc seg = batch.or_segments[row];
  const QueryDesc q = batch.queries[seg.query];
  // Block-max WAND's queries belong to its kernel.
  QueryOut& out = batch.out[q.slot];
  if ((q.flags & kOrByThreads) || !or_phase_runs(q, out, batch.k)) return;
  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
  const unsigned T = q.num_terms;  // <= kOrWarpMaxTerms (the engine checks)
  if (T == 0) {
    if (tid == 0) batch.partial_count[row] = 0;
    return;
  }
  const unsigned k = batch.k;
  const WarpLayout L = warp_layout(window, kThreads, k);
  float* const acc = carve<float>(smem, L.acc) + std::size_t(warp) * window;
  float4* const acc4 = reinterpret_cast<float4*>(acc);
  auto* counters = carve<unsigned long long>(smem, L.counters);
  unsigned long long* theta_query = batch.theta_or + seg.query;
  const float static_weight = static_cast<float>(q.static_weight);

  if (tid < kNumCounters) counters[tid] = 0;
  if (tid == 0 && q.theta_seed > 0.0) raise_theta(theta_query, q.theta_seed);
  // The top-k: one per warp in registers (k <= 32), or the block's in shared memory.
  auto top = [&] {
    if constexpr (kLargeK) {
      return BlockTopK{carve<BlockTopKState>(smem, L.block_topk), carve<double>(smem, L.top_score),
                       carve<std::uint32_t>(smem, L.top_doc), k, block_topk_capacity(k)};
    } else {
      return WarpTopK{};
    }
  }();
  if constexpr (kLargeK) {
    top.init(tid, kThreads);
    __syncthreads();
  }
  for (unsigned i = lane; i < window / 4; i += 32) acc4[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  __syncwarp();  // the zeros in place before any lane of the warp adds (racecheck)

  // This warp's share of the segment: contiguous, so each list is searched once.
  const std::uint32_t seg_len = seg.doc_hi - seg.doc_lo;
  const std::uint32_t share = (seg_len + kWarps - 1) / kWarps;
  const std::uint32_t warp_lo = seg.doc_lo + min(seg_len, warp * share);
  const std::uint32_t warp_hi = seg.doc_lo + min(seg_len, (warp + 1) * share);

  // Lane t holds list t's cursor (first posting not yet added), its postings left and weight.
  std::uint64_t cur = 0, end = 0;
  std::uint32_t left = 0;
  float weight = 0.0f;
  if (lane < T && warp_lo < warp_hi) {
    const TermDesc term = batch.terms[q.term_begin + lane];
    weight = static_cast<float>(term.weight);
    if (term.num_blocks > 0) {
      const std::uint64_t b_end = term.first_block + term.num_blocks;
      const std::uint64_t b = find_block(shard.block_last_docid, term.first_block, b_end, warp_lo);
      end = __ldg(shard.block_posting_begin + b_end);
      cur = end;
      if (b < b_end) {
        std::uint64_t p = __ldg(shard.block_posting_begin + b);
        std::uint64_t pe = __ldg(shard.block_posting_begin + b + 1);
        while (p < pe) {  // first posting of block b at or past warp_lo
          const std::uint64_t mid = p + (pe - p) / 2;
          if (__ldg(shard.decoded_docs + mid) < warp_lo) p = mid + 1;
          else pe = mid;
        }
        cur = p;
      }
      left = static_cast<std::uint32_t>(end - cur);  // a list holds fewer than 2^32 postings
    }
  }

  // MaxScore (Turtle and Flood), for pruned queries: a list is non-essential while the static
  // part's bound plus the maxima of every list whose maximum is at most its own (ties by
  // position) stay below theta; a document in non-essential lists alone cannot enter the top-k.
  // Windows then start only at an essential list's posting; the lists behind are sought to it.
  const bool prune = (q.flags & kPruneBlockMax) != 0;
  const double slack = (1.0 + kBoundSlack) * batch.bound_scale;
  double bound_with_smaller = 0.0;  // lane t: the static bound plus the maxima ranked <= t's
  {
    const double max_score =
        lane < T ? __dmul_rn(batch.terms[q.term_begin + lane].weight,
                             static_cast<double>(batch.terms[q.term_begin + lane].max_impact))
                 : 0.0;
    bound_with_smaller = q.static_weight;
    for (unsigned j = 0; j < T; ++j) {
      const double mj = __shfl_sync(kFullMask, max_score, j);
      if (j == lane || mj < max_score || (mj == max_score && j < lane)) bound_with_smaller += mj;
    }
  }
  // Lane t: list t's next docID (before the first window: at least warp_lo; kEndDoc if none).
  std::uint32_t head = lane < T && left > 0 ? warp_lo : kEndDoc;

  double raised = 0.0;
  // Per warp (warp-uniform sums): postings added, postings loaded; per lane: documents scored.
  unsigned my_postings = 0, my_loaded = 0, my_scored = 0;
  std::uint32_t lo = warp_lo;
  while (lo < warp_hi) {
    const double theta_loaded = load_theta(theta_query);
    if (prune) {
      const double kth = top.kth_bound();
      const double theta = kth > theta_loaded ? kth : theta_loaded;
      const bool essential = lane < T && !(theta > 0.0 && bound_with_smaller * slack < theta);
      if (__ballot_sync(kFullMask, essential) == 0) break;  // nothing more can enter the top-k
      // The window starts at the first docID an essential list still holds.
      const std::uint32_t first = __reduce_min_sync(kFullMask, essential ? head : kEndDoc);
      if (first > lo) lo = first;
      if (lo >= warp_hi) break;
    }
    const std::uint32_t hi = warp_hi - lo > window ? lo + window : warp_hi;
    // 1. Every list's postings in [lo, hi) into the accumulators. Never add zero, so that a
    //    matching document's accumulator is never zero (FLT_MIN is far below any tolerance).
    std::uint32_t next_doc = kEndDoc;  // the smallest docID at or past hi of any list
    // Lists in groups of kGroup: each list's first 32 x kRounds postings of the window are
    // loaded together, so a query of up to kGroup terms costs one trip to memory per window;
    // a list with more postings in the window goes on alone. Addresses are the list's cursor
    // plus a 32-bit offset.
    unsigned window_postings = 0, window_loaded = 0;
    for (unsigned t0 = 0; t0 < T; t0 += kGroup) {
      std::uint32_t dv[kGroup][kRounds];
      float iv[kGroup][kRounds];
#pragma unroll
      for (unsigned g = 0; g < kGroup; ++g) {
        if (t0 + g >= T) break;
        const std::uint64_t c = __shfl_sync(kFullMask, cur, t0 + g);
        const std::uint32_t n = __shfl_sync(kFullMask, left, t0 + g);
        const std::uint32_t* dp = shard.decoded_docs + c;
        const float* ip = shard.decoded_impacts + c;
#pragma unroll
        for (unsigned r = 0; r < kRounds; ++r) {
          const bool here = 32 * r + lane < n;
          dv[g][r] = here ? __ldg(dp + 32 * r + lane) : kEndDoc;
          iv[g][r] = here ? __ldg(ip + 32 * r + lane) : 0.0f;
        }
      }
#pragma unroll
      for (unsigned g = 0; g < kGroup; ++g) {
        if (t0 + g >= T) break;
        const unsigned t = t0 + g;
        std::uint64_t c = __shfl_sync(kFullMask, cur, t);
        std::uint32_t n = __shfl_sync(kFullMask, left, t);
        const float w = __shfl_sync(kFullMask, weight, t);
        std::uint32_t d_now[kRounds];
        float i_now[kRounds];
#pragma unroll
        for (unsigned r = 0; r < kRounds; ++r) {
          d_now[r] = dv[g][r];
          i_now[r] = iv[g][r];
        }
        while (n > 0) {
          // Lists are sorted: postings behind the window (a list lagging after a jump), then
          // the window's, then those past it.
          unsigned behind = 0, taken = 0;
          std::uint32_t beyond = kEndDoc;
#pragma unroll
          for (unsigned r = 0; r < kRounds; ++r) behind += __popc(__ballot_sync(kFullMask, d_now[r] < lo));
          window_loaded += min(n, 32 * kRounds);
          if (behind == 32 * kRounds && n > 32 * kRounds) {
            // Far behind: seek the window's start instead of reading the gap.
            const std::uint32_t skip = warp_seek(shard.decoded_docs + c, 32 * kRounds, n, lo, lane);
            c += skip;
            n -= skip;
          } else {
#pragma unroll
            for (unsigned r = 0; r < kRounds; ++r) {
              const bool in = d_now[r] >= lo && d_now[r] < hi;
              if (in) atomicAdd(acc + (d_now[r] - lo), fmaxf(w * i_now[r], FLT_MIN));
              else if (d_now[r] >= hi) beyond = min(beyond, d_now[r]);
              taken += __popc(__ballot_sync(kFullMask, in));
            }
            window_postings += taken;
            c += behind + taken;
            n -= behind + taken;
            beyond = __reduce_min_sync(kFullMask, beyond);
            if (beyond != kEndDoc || n == 0) {
              next_doc = min(next_doc, beyond);
              if (lane == t) head = beyond;
              break;
            }
          }
          if (n == 0) {
            if (lane == t) head = kEndDoc;
            break;
          }
          // Every loaded posting was taken or passed over: the next ones.
          const std::uint32_t* dp = shard.decoded_docs + c;
          const float* ip = shard.decoded_impacts + c;
#pragma unroll
          for (unsigned r = 0; r < kRounds; ++r) {
            const bool here = 32 * r + lane < n;
            d_now[r] = here ? __ldg(dp + 32 * r + lane) : kEndDoc;
            i_now[r] = here ? __ldg(ip + 32 * r + lane) : 0.0f;
          }
        }
        if (lane == t) {
          cur = c;
          left = n;
        }
      }
    }
    my_postings += window_postings;
    my_loaded += window_loaded;
    __syncwarp();
    // 2. The accumulators, read and cleared. A document whose sum plus the whole static part
    //    (PR' <= 1; float rounding is monotone) ranks below the running k-th or the query's
    //    theta cannot enter.
    double cut = theta_loaded;
    if (const double kth = top.kth_bound(); kth > cut) cut = kth;
    // A float x satisfies x >= cut exactly when it is >= cut rounded up to a float.
    const float cut_f = __double2float_ru(cut);
    const unsigned steps = (hi - lo + 127) / 128;
    for (unsigned j = 0; j < steps; ++j) {
      const float4 a = acc4[j * 32 + lane];
      acc4[j * 32 + lane] = make_float4(0.f, 0.f, 0.f, 0.f);
      // Most steps hold no candidate once the top-k has filled: one test on the largest of four.
      const float m = fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w));
      if (!__any_sync(kFullMask, m != 0.0f && m + static_weight >= cut_f)) continue;
      // 3. The step's candidates (their PageRank loads issued together) offered to the top-k.
      float score[4] = {a.x, a.y, a.z, a.w};
      bool have[4];
      const std::uint32_t doc0 = lo + 4 * (j * 32 + lane);
#pragma unroll
      for (unsigned c = 0; c < 4; ++c) have[c] = score[c] != 0.0f && score[c] + static_weight >= cut_f;
      if (static_weight != 0.0f) {
#pragma unroll
        for (unsigned c = 0; c < 4; ++c)
          if (have[c]) score[c] += static_weight * __ldg(shard.pagerank + doc0 + c);
      }
#pragma unroll
      for (unsigned c = 0; c < 4; ++c) {
        const double sc = static_cast<double>(score[c]);
        my_scored += have[c];
        top.offer(have[c] && sc >= theta_loaded, sc, doc0 + c, lane, k);
      }
    }
    __syncwarp();
    if (const double kth = top.kth_bound(); kth > raised) {
      raised = kth;
      if (lane == 0) raise_theta(theta_query, raised);
    }
    lo = next_doc > hi ? next_doc : hi;
  }

  for (unsigned d = 16; d > 0; d >>= 1) my_scored += __shfl_xor_sync(kFullMask, my_scored, d);
  if constexpr (!kLargeK) {  // each warp's top-k into the merge rows
    carve<double>(smem, L.merge_score)[warp * 32 + lane] = top.score;
    carve<std::uint32_t>(smem, L.merge_doc)[warp * 32 + lane] = top.doc;
  }
  __syncthreads();  // merge rows, a block top-k's last appends, zeroed counters
  if (lane == 0) {
    atomicAdd(&counters[kPostings], static_cast<unsigned long long>(my_postings));
    atomicAdd(&counters[kBytesRead], 8ull * my_loaded);  // a docID and an impact each
    atomicAdd(&counters[kDocsScored], static_cast<unsigned long long>(my_scored));
  }
  if (warp == 0) {
    if constexpr (kLargeK) {
      top.finish(batch, row, lane);
    } else {
      // The block's warps merge their top-k into warp 0's, which writes the segment's row.
      for (unsigned w = 1; w < kWarps; ++w) {
        const double s = carve<double>(smem, L.merge_score)[w * 32 + lane];
        const std::uint32_t d = carve<std::uint32_t>(smem, L.merge_doc)[w * 32 + lane];
        top.offer(lane < k && s >= 0.0, s, d, lane, k);
      }
      const bool entry = lane < k && top.score >= 0.0;
      if (entry) batch.partial_hits[std::size_t(row) * k + lane] = {top.score, top.doc, 0};
      const unsigned n = __popc(__ballot_sync(kFullMask, entry));
      if (lane == 0) batch.partial_count[row] = n;
    }
    if (lane == 0) {
      if (top.full()) raise_theta(theta_query, top.kth_bound());
      out.or_ran = 1;
    }
  }
  __syncthreads();  // every warp's counters are in
  add_counters(out, counters, 0);
}

template <bool kLargeK>
void launch_with(const ShardView& shard, const BatchPointers& batch, unsigned window,
                 cudaStream_t stream) {
  const std::size_t bytes = or_warp_kernel_shared_bytes(window, batch.k);
  check_shared_budget(bytes, reinterpret_cast<const void*>(or_warp_kernel<kOrWarpThreads, kLargeK>),
                      "or_warp_kernel", "lower --or-warp-window or k");
  or_warp_kernel<kOrWarpThreads, kLargeK>
      <<<batch.num_or_segments, kOrWarpThreads, bytes, stream>>>(shard, batch, window);
  GPUSEARCH_CUDA_CHECK_LAUNCH("or_warp_kernel");
}

}  // namespace

std::size_t or_warp_kernel_shared_bytes(unsigned window, unsigned k) {
  return warp_layout(window, kOrWarpThreads, k).total;
}

void launch_or_warp_kernel(const ShardView& shard, const BatchPointers& batch, unsigned window,
                           cudaStream_t stream) {
  if (batch.num_or_segments == 0) return;
  if (window < 128 || window > 32768 || window % 128 != 0)
    throw std::invalid_argument("OR warp window must be a multiple of 128 in [128, 32768]");
  if (batch.k == 0 || batch.k > kOrWarpMaxLargeK)
    throw std::invalid_argument("OR warp kernel: k must be in [1, 1024]");
  if (batch.k > kOrWarpMaxK) return launch_with<true>(shard, batch, window, stream);
  return launch_with<false>(shard, batch, window, stream);
}

void register_or_warp_kernel(KernelRegistry& registry) {
  registry.add(reinterpret_cast<const void*>(or_warp_kernel<kOrWarpThreads, false>));
  registry.add(reinterpret_cast<const void*>(or_warp_kernel<kOrWarpThreads, true>));
}

}  // namespace gpusearch::gpu
