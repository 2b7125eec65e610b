// OR by score accumulation over windows of a segment's docID space (paper 001, section 8.3),
// one thread block per segment. For each window [lo, hi) every list's blocks that overlap it
// become one flat list of work items; the block's warps take items in any order, decode them
// and add float contributions to shared-memory accumulators with atomics, so no list waits for
// another (the order of additions changes a sum by float rounding only, about 1e-7 relative:
// inside the exactness contract, ARCHITECTURE.md). A document enters the window's touched list
// the first time its accumulator leaves zero; after one barrier the touched documents are
// scored and offered to the segment's top-k. Empty stretches of the docID space are jumped
// over. Pruning (exact), against the query's running k-th score theta (shared by its segments):
// - MaxScore lists (Turtle and Flood): the lists whose maxima sum, with the static part's, below
//   theta are non-essential: a document in them alone cannot enter the top-k. Essential lists'
//   postings are added first and mark the window's candidates (a bitmap); non-essential blocks
//   are then decoded only where their docID range holds a candidate, and add only to
//   candidates. Windows with no essential posting are jumped over.
// - a window whose block-max bound cannot beat theta is skipped without decoding;
// - with GS-ordered docIDs a segment stops once theta reaches factor * GS(lo) (paper 000).
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
  std::size_t state, counters, cursor, end, item_begin, item_term, block_ub, max_score, by_max,
      essential, weight, acc, touched, bitmap, warp_docs, warp_freqs, warp_stage, top_score,
      top_doc, total;
};
__host__ __device__ constexpr OrLayout or_layout(unsigned k, unsigned terms, unsigned window) {
  OrLayout l{};
  std::size_t o = 0;
  l.state = o; o = align16(o + sizeof(TopKState) + 16);
  l.counters = o; o = align16(o + kNumCounters * sizeof(unsigned long long));
  l.cursor = o; o = align16(o + terms * 8);
  l.end = o; o = align16(o + terms * 8);
  l.item_begin = o; o = align16(o + (terms + 1) * 4);
  l.item_term = o; o = align16(o + terms * 4);    // terms in item order: essential first
  l.block_ub = o; o = align16(o + terms * 8);
  l.max_score = o; o = align16(o + terms * 8);    // weight * the list's largest impact
  l.by_max = o; o = align16(o + terms * 4);       // terms by max_score ascending
  l.essential = o; o = align16(o + terms * 4);
  l.weight = o; o = align16(o + terms * 4);
  l.acc = o; o = align16(o + std::size_t(window) * 4);          // float accumulators
  l.touched = o; o = align16(o + std::size_t(window) * 2);      // window offsets (u16)
  l.bitmap = o; o = align16(o + std::size_t(window) / 8);       // candidates of the window
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

// Adds one decoded block's contributions to the window's accumulators. Essential blocks mark
// first touches (touched list and candidate bitmap) and report the smallest docID at or past hi
// (where the next window may start); non-essential blocks add only to candidates.
template <bool kEssential>
__device__ __forceinline__ void accumulate_block(const ShardView& shard, const std::uint32_t* docs,
                                                 const std::uint32_t* freqs, unsigned n, float w,
                                                 std::uint32_t lo, std::uint32_t hi, float* acc,
                                                 std::uint16_t* touched, std::uint32_t* bitmap,
                                                 std::uint32_t* touched_count,
                                                 std::uint32_t* next_lo, unsigned lane) {
  std::uint32_t next_here = kEndDoc;
  // First every lane gathers its four postings' norms, so that the loads are in flight
  // together; then the accumulators are updated.
  std::uint32_t dv[4];
  float cv[4];
#pragma unroll
  for (unsigned r = 0; r < 4; ++r) {
    const unsigned i = 32 * r + lane;
    dv[r] = i < n ? docs[i] : kEndDoc;
    cv[r] = 0.0f;
    bool wanted = dv[r] >= lo && dv[r] < hi;
    if (!kEssential && wanted) {
      const unsigned slot = dv[r] - lo;
      wanted = (bitmap[slot >> 5] >> (slot & 31u)) & 1u;
      if (!wanted) dv[r] = kEndDoc;
    }
    if (wanted) cv[r] = contribution_f(w, freqs[i], __ldg(shard.length_norm_f + dv[r]));
  }
#pragma unroll
  for (unsigned r = 0; r < 4; ++r) {
    const std::uint32_t d = dv[r];
    const bool in_window = d >= lo && d < hi;
    if (kEssential && d >= hi && d != kEndDoc && d < next_here) next_here = d;
    if (!kEssential) {
      if (in_window) atomicAdd(acc + (d - lo), cv[r]);
      continue;
    }
    bool first_touch = false;
    if (in_window) {
      // Never add zero, so that "was zero" means "first touch" (FLT_MIN is far below the
      // contract's tolerance of any score).
      const float old = atomicAdd(acc + (d - lo), fmaxf(cv[r], FLT_MIN));
      first_touch = old == 0.0f;
    }
    const unsigned fresh = __ballot_sync(kFullMask, first_touch);
    if (fresh) {  // one shared-memory atomic per warp, not per document
      const unsigned leader = __ffs(fresh) - 1;
      unsigned at = 0;
      if (lane == leader) at = atomicAdd(touched_count, __popc(fresh));
      at = __shfl_sync(kFullMask, at, leader);
      if (first_touch) {
        const unsigned slot = d - lo;
        touched[at + __popc(fresh & ((1u << lane) - 1u))] = static_cast<std::uint16_t>(slot);
        atomicOr(bitmap + (slot >> 5), 1u << (slot & 31u));
      }
    }
  }
  if (kEssential) {
    for (unsigned d = 16; d > 0; d >>= 1)
      next_here = min(next_here, __shfl_xor_sync(kFullMask, next_here, d));
    if (lane == 0 && next_here != kEndDoc) atomicMin(next_lo, next_here);
  }
}

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
  auto* item_term = carve<std::uint32_t>(smem, L.item_term);
  auto* block_ub = carve<double>(smem, L.block_ub);
  auto* max_score = carve<double>(smem, L.max_score);
  auto* by_max = carve<std::uint32_t>(smem, L.by_max);
  auto* essential = carve<std::uint32_t>(smem, L.essential);
  auto* weight = carve<float>(smem, L.weight);
  auto* acc = carve<float>(smem, L.acc);
  auto* touched = carve<std::uint16_t>(smem, L.touched);
  auto* bitmap = carve<std::uint32_t>(smem, L.bitmap);
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
  const unsigned bitmap_words = window / 32;

  __shared__ std::uint32_t window_lo, next_lo, touched_count, control, essential_items;
  __shared__ double theta_window;  // the query's k-th score lower bound, read once per window
  topk_init(st, batch.k);
  if (tid < kNumCounters) counters[tid] = 0;
  for (unsigned t = tid; t < T; t += blockDim.x) {
    cursor[t] = find_block(shard.block_last_docid, terms[t].first_block,
                           terms[t].first_block + terms[t].num_blocks, seg.doc_lo);
    weight[t] = static_cast<float>(terms[t].weight);
    max_score[t] = __dmul_rn(terms[t].weight, static_cast<double>(terms[t].max_impact));
    essential[t] = 1;
  }
  for (unsigned i = tid; i < window; i += blockDim.x) acc[i] = 0.0f;
  for (unsigned i = tid; i < bitmap_words; i += blockDim.x) bitmap[i] = 0;
  if (tid == 0) {
    window_lo = seg.doc_lo;
    touched_count = 0;
  }
  __syncthreads();
  if (tid == 0) {  // terms by max_score ascending (insertion sort: T is small)
    for (unsigned t = 0; t < T; ++t) {
      unsigned j = t;
      while (j > 0 && max_score[by_max[j - 1]] > max_score[t]) {
        by_max[j] = by_max[j - 1];
        --j;
      }
      by_max[j] = t;
    }
  }
  unsigned stopped_early = 0;
  __syncthreads();

  while (window_lo < seg.doc_hi) {
    const std::uint32_t lo = window_lo;
    const std::uint32_t hi = (seg.doc_hi - lo > window) ? lo + window : seg.doc_hi;
    // Each list's blocks overlapping [lo, hi): [cursor, end). A non-essential list's cursor can
    // lag behind a jump of the window: it gallops to lo first (those blocks are skipped).
    for (unsigned t = warp; t < T; t += kWarps) {
      const TermDesc& term = terms[t];
      const std::uint64_t list_end = term.first_block + term.num_blocks;
      std::uint64_t c = cursor[t];
      if (lane == 0) {
        const std::uint64_t g = gallop_block(shard, c, list_end, lo);
        if (g > c) atomicAdd(&counters[kBlocksSkipped], static_cast<unsigned long long>(g - c));
        c = g;
      }
      c = __shfl_sync(kFullMask, c, 0);
      std::uint64_t f = list_end;
      float ub = 0.0f;
      for (std::uint64_t base = c; base < list_end; base += 32) {
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
        cursor[t] = c;
        end[t] = (f < list_end && block_floor(shard, term, f) < hi) ? f + 1 : f;
        block_ub[t] = __dmul_rn(term.weight, static_cast<double>(ub));
      }
    }
    __syncthreads();
    if (tid == 0) {
      next_lo = kEndDoc;
      control = kProcess;
      double theta = load_theta(theta_query);
      if (st.full) {
        raise_theta(theta_query, st.threshold_score);
        if (st.threshold_score > theta) theta = st.threshold_score;
      }
      theta_window = theta;
      const double slack = (1.0 + kBoundSlack) * batch.bound_scale;
      // Non-essential lists: the longest prefix, by max_score, whose maxima with the static
      // part's (PR' <= 1) stay below theta. Theta only rises, so the set only grows.
      double below = q.static_weight;
      unsigned j = 0;
      if (prune && theta > 0.0) {
        for (; j < T; ++j) {
          const double with = below + max_score[by_max[j]];
          if (with * slack >= theta) break;
          below = with;
          essential[by_max[j]] = 0;
        }
      }
      // Work items: essential lists' blocks first, then the others'.
      unsigned n = 0, items = 0;
      for (unsigned pass = 0; pass < 2; ++pass) {
        for (unsigned t = 0; t < T; ++t) {
          if ((essential[t] != 0) != (pass == 0)) continue;
          item_term[n] = t;
          item_begin[n] = items;
          items += static_cast<std::uint32_t>(end[t] - cursor[t]);
          ++n;
        }
        if (pass == 0) essential_items = items;
      }
      item_begin[T] = items;
      if (j == T) {
        control = kStop;  // every list is non-essential: nothing more can enter the top-k
      } else if (theta > 0.0 && early &&
                 q.gs_bound_factor * static_cast<double>(__ldg(shard.global_score + lo)) * slack <
                     theta) {
        control = kStop;
      } else if (essential_items == 0) {
        control = kSkipWindow;  // no candidate can start in this window
      } else if (prune && theta > 0.0) {
        double bound = q.static_weight;
        for (unsigned t = 0; t < T; ++t) bound += block_ub[t];
        if (bound * slack < theta) control = kSkipWindow;
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
      const std::uint32_t split = essential_items;
      // Essential blocks, then (after a barrier, once every candidate is marked) the others.
      for (unsigned phase = 0; phase < 2; ++phase) {
        const std::uint32_t first = phase == 0 ? 0 : split, last = phase == 0 ? split : items;
        for (std::uint32_t item = first + warp; item < last; item += kWarps) {
          unsigned slot = 0;
          while (item >= item_begin[slot + 1]) ++slot;
          const unsigned t = item_term[slot];
          const TermDesc& term = terms[t];
          const std::uint64_t b = cursor[t] + (item - item_begin[slot]);
          const std::uint32_t floor = block_floor(shard, term, b);
          if (phase == 1) {
            // Decode a non-essential block only if its docID range holds a candidate.
            const std::uint32_t last_doc = __ldg(shard.block_last_docid + b);
            const std::uint32_t a = (floor > lo ? floor : lo) - lo;
            const std::uint32_t z = (last_doc < hi - 1 ? last_doc : hi - 1) - lo;
            bool any = false;
            for (std::uint32_t wd = (a >> 5) + lane; wd <= (z >> 5); wd += 32) any |= bitmap[wd] != 0;
            if (!__any_sync(kFullMask, any)) {
              if (lane == 0) atomicAdd(&counters[kBlocksSkipped], 1ull);
              continue;
            }
          }
          unsigned words;
          const unsigned n = warp_decode_posting_block(shard, b, floor, my_stage, my_docs,
                                                       my_freqs, lane, &words);
          if (lane == 0) {
            atomicAdd(&counters[kPostings], n);
            atomicAdd(&counters[kBlocksDecoded], 1ull);
            atomicAdd(&counters[kBytesRead], 4ull * words);
          }
          if (phase == 0)
            accumulate_block<true>(shard, my_docs, my_freqs, n, weight[t], lo, hi, acc, touched,
                                   bitmap, &touched_count, &next_lo, lane);
          else
            accumulate_block<false>(shard, my_docs, my_freqs, n, weight[t], lo, hi, acc, touched,
                                    bitmap, &touched_count, &next_lo, lane);
          __syncwarp();  // my_docs / my_freqs are rewritten by the warp's next item
        }
        __syncthreads();
      }
      // Score the candidates and offer those that can still enter the top-k.
      const unsigned n_touched = touched_count;
      const double theta = theta_window;
      for (unsigned i = tid; i < bitmap_words; i += blockDim.x) bitmap[i] = 0;
      for (unsigned base = 0; base < n_touched; base += blockDim.x) {
        const unsigned i = base + tid;
        if (i < n_touched) {
          const unsigned slot = touched[i];
          const std::uint32_t d = lo + slot;
          float score = acc[slot];
          if (static_weight != 0.0f) score += static_weight * __ldg(shard.pagerank + d);
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
    // the next window starts at the smallest docID an essential list can still hold at or past
    // hi (a document in non-essential lists alone cannot enter the top-k).
    for (unsigned t = tid; t < T; t += blockDim.x) {
      const TermDesc& term = terms[t];
      const std::uint64_t list_end = term.first_block + term.num_blocks;
      const std::uint64_t e = end[t];
      std::uint64_t c = e;
      if (e > cursor[t] && __ldg(shard.block_last_docid + e - 1) >= hi) c = e - 1;
      if (control != kProcess)
        atomicAdd(&counters[kBlocksSkipped], static_cast<unsigned long long>(c - cursor[t]));
      // A processed essential straddler's postings at or past hi already went into next_lo.
      const bool processed = control == kProcess && c < e;
      cursor[t] = c;
      if (essential[t] && c < list_end && !processed) {
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
