// OR by score accumulation over windows of a segment's docID space (paper 001, section 8.3),
// one thread block per segment. For each window [lo, hi) every list's blocks that overlap it
// become one flat list of work items; the block's warps take items in any order, decode them
// and add float contributions to shared-memory accumulators with atomics, so no list waits for
// another (the order of additions changes a sum by float rounding only, about 1e-7 relative:
// inside the exactness contract, ARCHITECTURE.md). A document becomes a candidate (a bit in the
// window's bitmap) the first time its accumulator leaves zero; after a barrier the candidates
// are scored and offered to the segment's top-k. Empty stretches of the docID space are jumped
// over. Pruning (exact), against the query's running k-th score theta (shared by its segments):
// - MaxScore lists (Turtle and Flood): the lists whose maxima sum, with the static part's, below
//   theta are non-essential: a document in them alone cannot enter the top-k. Essential lists'
//   postings are added first and mark the window's candidates (a bitmap); non-essential blocks
//   are then decoded only where their docID range holds a candidate, and add only to
//   candidates. Windows with no essential posting are jumped over.
// - a window whose block-max bound cannot beat theta is skipped without decoding;
// - with GS-ordered docIDs a segment stops once theta reaches factor * GS(lo) (paper 000).
#include <cfloat>
#include <stdexcept>

#include "gpu/cuda_util.hpp"
#include "gpu/kernel_limits.hpp"
#include "gpu/or_accumulate.cuh"
#include "gpu/segment_output.cuh"
#include "gpu/shard_access.cuh"

namespace gpusearch::gpu {

namespace {

// The block size is a template parameter: more warps per block share one window's barriers and
// its per-window chain of list scans, so a larger window costs no more shared memory per warp.
struct OrLayout {
  std::size_t state, counters, cursor, end, next_cursor, next_floor, item_begin, item_term,
      block_ub, max_score, by_max, essential, weight, acc, bitmap, warp_docs, warp_freqs,
      warp_stage, top_score, top_doc, total;
};
__host__ __device__ constexpr OrLayout or_layout(unsigned k, unsigned terms, unsigned window,
                                                 unsigned threads, bool stage,
                                                 bool topk_in_global) {
  const unsigned warps = threads / 32;
  OrLayout l{};
  std::size_t o = 0;
  l.state = o; o = align16(o + sizeof(TopKState) + 16);
  l.counters = o; o = align16(o + kNumCounters * sizeof(unsigned long long));
  l.cursor = o; o = align16(o + terms * 8);
  l.end = o; o = align16(o + terms * 8);
  l.next_cursor = o; o = align16(o + terms * 8);  // first block ending at or past hi
  l.next_floor = o; o = align16(o + terms * 4);   // its first possible docID
  l.item_begin = o; o = align16(o + (terms + 1) * 4);
  l.item_term = o; o = align16(o + terms * 4);    // terms in item order: essential first
  l.block_ub = o; o = align16(o + terms * 8);
  l.max_score = o; o = align16(o + terms * 8);    // weight * the list's largest impact
  l.by_max = o; o = align16(o + terms * 4);       // terms by max_score ascending
  l.essential = o; o = align16(o + terms * 4);
  l.weight = o; o = align16(o + terms * 4);
  l.acc = o; o = align16(o + std::size_t(window) * 4);          // float accumulators
  l.bitmap = o; o = align16(o + std::size_t(window) / 8);       // candidates of the window
  l.warp_docs = o; o = align16(o + warps * kValuesPerBlock * 4);
  l.warp_freqs = o; o = align16(o + warps * kValuesPerBlock * 4);
  // Staging a block's words in shared memory turns its decode's chain of dependent loads
  // (offsets, header, packed words, then the frequency part's) into one round of coalesced
  // loads, at the cost of shared memory that could hold more resident blocks: a choice.
  l.warp_stage = o; o = align16(o + (stage ? warps * kStageWords * 4 : 0));
  // Room for k plus at least one offer per thread, rounded up to a power of two (bitonic
  // flush); the rounding's slack is buffer too (top-k entries are 12 bytes). In global memory
  // instead (or_topk_row_bytes per segment row) where that leaves room for more blocks.
  const unsigned cap = topk_capacity(k, threads);
  if (!topk_in_global) {
    l.top_score = o; o = align16(o + cap * 8);
    l.top_doc = o; o = align16(o + cap * 4);
  }
  l.total = o;
  return l;
}

// One segment's global top-k row: cap scores (double), then cap docIDs.
__host__ __device__ constexpr std::size_t or_topk_row_stride(unsigned k, unsigned threads) {
  return align16(std::size_t(topk_capacity(k, threads)) * 12);
}

enum Control : std::uint32_t { kProcess = 0, kSkipWindow = 1, kStop = 2 };

// At least 1,024 resident threads per multiprocessor (64 registers a thread): the kernel is
// latency-bound, and without the bound the compiler took 79 registers for the decoded layout's
// loads, which left 3 blocks of 256 threads per SM instead of 4.
template <unsigned kThreads>
__global__ void __launch_bounds__(kThreads, (1024 / kThreads > 0 ? 1024 / kThreads : 1))
    ranked_or_kernel(ShardView shard, BatchPointers batch, unsigned window, bool stage) {
  constexpr unsigned kWarps = kThreads / 32;
  extern __shared__ __align__(16) char smem[];
  const std::uint32_t row = blockIdx.x;
  const SegmentDesc seg = batch.or_segments[row];
  const QueryDesc q = batch.queries[seg.query];
  // Segments of block-max WAND queries belong to the BMW kernel; and-or runs OR only where the
  // AND answer came up short. The merge kernel applies the same tests, so it never reads the
  // rows these early returns leave unwritten.
  QueryOut& out = batch.out[q.slot];
  if ((q.flags & kOrByThreads) || !or_phase_runs(q, out, batch.k)) return;
  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
  const unsigned T = q.num_terms;
  if (T == 0) {
    if (tid == 0) batch.partial_count[row] = 0;
    return;
  }
  const bool topk_in_global = batch.or_topk_rows != nullptr;
  const OrLayout L = or_layout(batch.k, batch.max_terms, window, kThreads, stage, topk_in_global);
  const unsigned topk_buffer = topk_capacity(batch.k, kThreads) - batch.k;
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
  auto* next_cursor = carve<std::uint64_t>(smem, L.next_cursor);
  auto* next_floor = carve<std::uint32_t>(smem, L.next_floor);
  auto* acc = carve<float>(smem, L.acc);
  auto* bitmap = carve<std::uint32_t>(smem, L.bitmap);
  // A global top-k row is read and written by this block only: __syncthreads() orders its
  // accesses as it does shared memory's.
  std::byte* const topk_row =
      topk_in_global ? batch.or_topk_rows + std::size_t(row) * or_topk_row_stride(batch.k, kThreads)
                     : nullptr;
  auto* top_score = topk_in_global ? reinterpret_cast<double*>(topk_row)
                                   : carve<double>(smem, L.top_score);
  auto* top_doc =
      topk_in_global
          ? reinterpret_cast<std::uint32_t*>(topk_row + 8 * std::size_t(topk_capacity(batch.k, kThreads)))
          : carve<std::uint32_t>(smem, L.top_doc);
  std::uint32_t* my_docs = carve<std::uint32_t>(smem, L.warp_docs) + warp * kValuesPerBlock;
  std::uint32_t* my_freqs = carve<std::uint32_t>(smem, L.warp_freqs) + warp * kValuesPerBlock;
  std::uint32_t* my_stage =
      stage ? carve<std::uint32_t>(smem, L.warp_stage) + warp * kStageWords : nullptr;
  const TermDesc* terms = batch.terms + q.term_begin;
  const bool prune = (q.flags & kPruneBlockMax) != 0;
  const bool decoded = shard.decoded_docs != nullptr;  // the decoded posting layout
  const bool early = (q.flags & kEarlyTerminate) && q.gs_bound_factor >= 0;
  const float static_weight = static_cast<float>(q.static_weight);
  unsigned long long* theta_query = batch.theta_or + seg.query;
  const unsigned bitmap_words = window / 32;

  __shared__ std::uint32_t next_lo, control, essential_items;
  __shared__ double theta_window;  // the query's k-th score lower bound, read once per window
  topk_init(st, batch.k);
  if (tid < kNumCounters) counters[tid] = 0;
  // The host's seed (a lower bound of the k-th score, batch_layout.hpp): thread 0 reads theta
  // after this in every window.
  if (tid == 0 && q.theta_seed > 0.0) raise_theta(theta_query, q.theta_seed);
  for (unsigned t = tid; t < T; t += blockDim.x) {
    cursor[t] = find_block(shard.block_last_docid, terms[t].first_block,
                           terms[t].first_block + terms[t].num_blocks, seg.doc_lo);
    weight[t] = static_cast<float>(terms[t].weight);
    max_score[t] = __dmul_rn(terms[t].weight, static_cast<double>(terms[t].max_impact));
    essential[t] = 1;
  }
  for (unsigned i = tid; i < window; i += blockDim.x) acc[i] = 0.0f;
  for (unsigned i = tid; i < bitmap_words; i += blockDim.x) bitmap[i] = 0;
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
  // Work counters stay in registers until the end: shared 64-bit atomics per item and per
  // scored document were 7% of the kernel's instructions (Nsight Compute source counters).
  unsigned long long my_postings = 0, my_blocks = 0, my_bytes = 0, my_skipped = 0, my_scored = 0;
  __syncthreads();

  // Every thread keeps the window start itself (from next_lo, after a barrier): no broadcast.
  std::uint32_t window_start = seg.doc_lo;
  while (window_start < seg.doc_hi) {
    const std::uint32_t lo = window_start;
    const std::uint32_t hi = (seg.doc_hi - lo > window) ? lo + window : seg.doc_hi;
    // Thread 0's loads for the window's decisions go out first, to overlap the list scans.
    double theta_loaded = 0.0, gs_lo = 0.0;
    if (tid == 0) {
      theta_loaded = load_theta(theta_query);
      if (early) gs_lo = static_cast<double>(__ldg(shard.global_score + lo));
    }
    // Each list's blocks overlapping [lo, hi): [cursor, end); one warp per list, 32 block
    // boundaries per load. A list lagging behind a jump of the window (a non-essential one)
    // gallops to lo first; those blocks are skipped.
    for (unsigned t = warp; t < T; t += kWarps) {
      const TermDesc& term = terms[t];
      const std::uint64_t list_end = term.first_block + term.num_blocks;
      std::uint64_t f = list_end;      // first block whose last docID is >= hi
      std::uint64_t first = list_end;  // first block whose last docID is >= lo
      std::uint32_t f_floor = kEndDoc;
      float ub = 0.0f;
      for (std::uint64_t base = cursor[t]; base < list_end; base += 32) {
        const std::uint64_t b = base + lane;
        const bool in_list = b < list_end;
        const std::uint32_t last = in_list ? __ldg(shard.block_last_docid + b) : kEndDoc;
        const std::uint32_t before = __shfl_up_sync(kFullMask, last, 1);  // last of b - 1
        const unsigned ge_lo = __ballot_sync(kFullMask, in_list && last >= lo);
        if (ge_lo == 0) {
          // The whole chunk ends before lo: gallop over the rest of the gap.
          std::uint64_t g = 0;
          if (lane == 0) g = gallop_block(shard, base + 32, list_end, lo);
          base = __shfl_sync(kFullMask, g, 0) - 32;  // the loop adds 32
          continue;
        }
        if (first == list_end) first = base + __ffs(ge_lo) - 1;
        const unsigned ge = __ballot_sync(kFullMask, in_list && last >= hi);
        const std::uint64_t first_ge = ge ? base + __ffs(ge) - 1 : list_end;
        const std::uint32_t floor_b = b == term.first_block ? 0u
                                      : lane > 0             ? before + 1u
                                                             : block_floor(shard, term, b);
        // Blocks ending before lo are behind the window; blocks before the first ending at or
        // past hi overlap it; so does that one if it starts before hi.
        bool overlaps = in_list && last >= lo && b < first_ge;
        if (in_list && b == first_ge) overlaps = floor_b < hi;
        if (overlaps) ub = fmaxf(ub, __ldg(shard.block_max_impact + b));
        if (ge) {
          f = first_ge;
          f_floor = __shfl_sync(kFullMask, floor_b, __ffs(ge) - 1);
          break;
        }
      }
      for (unsigned d = 16; d > 0; d >>= 1) ub = fmaxf(ub, __shfl_xor_sync(kFullMask, ub, d));
      if (first > f) first = f;
      if (lane == 0) {
        // Blocks before `first` end below lo: passed over without decoding.
        if (first > cursor[t]) my_skipped += first - cursor[t];
        cursor[t] = first;
        end[t] = (f < list_end && f_floor < hi) ? f + 1 : f;
        // After this window the list resumes at f (the straddler, decoded again, or the block
        // after the window), whose first docID is f_floor.
        next_cursor[t] = f;
        next_floor[t] = f_floor;
        block_ub[t] = __dmul_rn(term.weight, static_cast<double>(ub));
      }
    }
    __syncthreads();
    if (tid == 0) {
      next_lo = kEndDoc;
      control = kProcess;
      double theta = theta_loaded;
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
      } else if (theta > 0.0 && early && q.gs_bound_factor * gs_lo * slack < theta) {
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
          // The block's first possible docID: for decoding, and for a non-essential block's
          // candidate test (the decoded layout's essential blocks need neither).
          const std::uint32_t floor = phase == 1 || !decoded ? block_floor(shard, term, b) : 0u;
          if (phase == 1) {
            // Decode a non-essential block only if its docID range holds a candidate.
            const std::uint32_t last_doc = __ldg(shard.block_last_docid + b);
            const std::uint32_t a = (floor > lo ? floor : lo) - lo;
            const std::uint32_t z = (last_doc < hi - 1 ? last_doc : hi - 1) - lo;
            bool any = false;
            for (std::uint32_t wd = (a >> 5) + lane; wd <= (z >> 5); wd += 32) any |= bitmap[wd] != 0;
            if (!__any_sync(kFullMask, any)) {
              if (lane == 0) ++my_skipped;
              continue;
            }
          }
          if (decoded) {
            const std::uint64_t p0 = __ldg(shard.block_posting_begin + b);
            const unsigned n = static_cast<unsigned>(__ldg(shard.block_posting_begin + b + 1) - p0);
            const unsigned bytes =
                phase == 0 ? accumulate_decoded_block<true>(shard, p0, n, weight[t], lo, hi, acc,
                                                            bitmap, &next_lo, lane)
                           : accumulate_decoded_block<false>(shard, p0, n, weight[t], lo, hi, acc,
                                                             bitmap, &next_lo, lane);
            my_bytes += bytes;  // every lane counts its own loads
            if (lane == 0) {
              my_postings += n;
              ++my_blocks;
            }
            continue;
          }
          unsigned words;
          const unsigned n = warp_decode_posting_block(shard, b, floor, my_stage, my_docs,
                                                       my_freqs, lane, &words);
          if (lane == 0) {
            my_postings += n;
            ++my_blocks;
            my_bytes += 4ull * words;
          }
          if (phase == 0)
            accumulate_block<true>(shard, my_docs, my_freqs, n, weight[t], lo, hi, acc, bitmap,
                                   &next_lo, lane);
          else
            accumulate_block<false>(shard, my_docs, my_freqs, n, weight[t], lo, hi, acc, bitmap,
                                    &next_lo, lane);
          __syncwarp();  // my_docs / my_freqs are rewritten by the warp's next item
        }
        __syncthreads();
        if (split == items) break;  // no non-essential blocks: no second phase, no barrier
      }
      // Score the candidates (set bits; each thread owns bitmap words tid, tid + blockDim, ...)
      // and offer those that can still enter the top-k, at most one per thread per round so
      // that the top-k buffer never overflows. Bits and accumulators are cleared on the way.
      const double theta = theta_window;
      unsigned word = tid;
      std::uint32_t bits = 0;
      if (word < bitmap_words) {
        bits = bitmap[word];
        bitmap[word] = 0;
      }
      while (true) {
        bool have = false;
        double offer_score = 0.0;
        std::uint32_t offer_doc = 0;
        while (!have) {
          if (bits == 0) {
            word += blockDim.x;
            if (word >= bitmap_words) break;
            bits = bitmap[word];
            bitmap[word] = 0;
            continue;
          }
          const unsigned slot = word * 32 + (__ffs(bits) - 1);
          bits &= bits - 1;
          const std::uint32_t d = lo + slot;
          float score = acc[slot];
          acc[slot] = 0.0f;
          if (static_weight != 0.0f) score += static_weight * __ldg(shard.pagerank + d);
          ++my_scored;
          // Strictly below a k-th score some segment already holds: cannot enter the top-k.
          if (static_cast<double>(score) >= theta && topk_admits(st, score, d)) {
            have = true;
            offer_score = score;
            offer_doc = d;
          }
        }
        if (!__syncthreads_or(have)) break;
        if (have) topk_offer(st, top_score, top_doc, offer_score, offer_doc);
        topk_maybe_flush(st, top_score, top_doc, topk_buffer);
      }
    }
    __syncthreads();
    // Advance: a list resumes at its first block ending at or past hi (the straddler, decoded
    // again in the next window); the next window starts at the smallest docID an essential list
    // can still hold at or past hi (a document in non-essential lists alone cannot enter).
    for (unsigned t = tid; t < T; t += blockDim.x) {
      const std::uint64_t c = next_cursor[t];
      if (control != kProcess) my_skipped += c - cursor[t];
      // A processed essential straddler's postings at or past hi already went into next_lo.
      const bool processed = control == kProcess && c < end[t];
      cursor[t] = c;
      if (essential[t] && c < terms[t].first_block + terms[t].num_blocks && !processed) {
        const std::uint32_t f = next_floor[t];
        atomicMin(&next_lo, f > hi ? f : hi);
      }
    }
    __syncthreads();
    // next_lo is reset by thread 0 only after the next window's first barrier.
    window_start = next_lo < hi ? hi : next_lo;
  }
  {
    unsigned long long v[5] = {my_postings, my_blocks, my_bytes, my_skipped, my_scored};
    const Counter which[5] = {kPostings, kBlocksDecoded, kBytesRead, kBlocksSkipped, kDocsScored};
#pragma unroll
    for (unsigned i = 0; i < 5; ++i) {
      for (unsigned d = 16; d > 0; d >>= 1) v[i] += __shfl_xor_sync(kFullMask, v[i], d);
      if (lane == 0 && v[i] != 0) atomicAdd(&counters[which[i]], v[i]);
    }
  }
  topk_flush(st, top_score, top_doc);  // its first barrier orders the counters before thread 0
  write_partial(st, top_score, top_doc, batch, row);
  if (tid == 0) {
    if (st.full) raise_theta(theta_query, st.threshold_score);
    out.or_ran = 1;
  }
  add_counters(out, counters, stopped_early);
}

}  // namespace

std::size_t or_kernel_shared_bytes(unsigned k, unsigned max_terms, const OrKernelConfig& config,
                                   bool topk_in_global) {
  return or_layout(k, max_terms, config.window, config.threads, config.stage_blocks, topk_in_global)
      .total;
}

std::size_t or_topk_row_bytes(unsigned k, unsigned threads) {
  return or_topk_row_stride(k, threads);
}

namespace {
template <unsigned kThreads>
const void* or_kernel_entry() {
  return reinterpret_cast<const void*>(ranked_or_kernel<kThreads>);
}

const void* or_kernel_for(unsigned threads) {
  switch (threads) {
    case 32: return or_kernel_entry<32>();
    case 64: return or_kernel_entry<64>();
    case 128: return or_kernel_entry<128>();
    case 256: return or_kernel_entry<256>();
    case 512: return or_kernel_entry<512>();
    case 1024: return or_kernel_entry<1024>();
    default: throw std::invalid_argument("OR kernel block size must be 32, 64, 128, 256, 512 or 1024");
  }
}

template <unsigned kThreads>
void launch_or_kernel_with(const ShardView& shard, const BatchPointers& batch,
                           const OrKernelConfig& config, cudaStream_t stream) {
  const std::size_t bytes =
      or_kernel_shared_bytes(batch.k, batch.max_terms, config, batch.or_topk_rows != nullptr);
  check_shared_budget(bytes, reinterpret_cast<const void*>(ranked_or_kernel<kThreads>),
                      "ranked_or_kernel", "lower k or --or-window");
  ranked_or_kernel<kThreads><<<batch.num_or_segments, kThreads, bytes, stream>>>(
      shard, batch, config.window, config.stage_blocks);
  GPUSEARCH_CUDA_CHECK_LAUNCH("ranked_or_kernel");
}
}  // namespace

bool or_topk_in_global(unsigned k, unsigned max_terms, const OrKernelConfig& config,
                       std::size_t segments, std::size_t queries) {
  if (config.topk_memory != TopKMemory::kAuto) return config.topk_memory == TopKMemory::kGlobal;
  const void* kernel = or_kernel_for(config.threads);
  const int threads = static_cast<int>(config.threads);
  const int in_shared =
      resident_blocks(kernel, threads, or_kernel_shared_bytes(k, max_terms, config, false));
  return resident_blocks(kernel, threads, or_kernel_shared_bytes(k, max_terms, config, true)) >
             in_shared &&
         segments > std::size_t(in_shared) * std::size_t(device_multiprocessors()) &&
         segments <= 2 * queries;
}

void launch_or_kernel(const ShardView& shard, const BatchPointers& batch,
                      const OrKernelConfig& config, cudaStream_t stream) {
  if (batch.num_or_segments == 0) return;
  switch (config.threads) {
    case 32: return launch_or_kernel_with<32>(shard, batch, config, stream);
    case 64: return launch_or_kernel_with<64>(shard, batch, config, stream);
    case 128: return launch_or_kernel_with<128>(shard, batch, config, stream);
    case 256: return launch_or_kernel_with<256>(shard, batch, config, stream);
    case 512: return launch_or_kernel_with<512>(shard, batch, config, stream);
    case 1024: return launch_or_kernel_with<1024>(shard, batch, config, stream);
    default: throw std::invalid_argument("OR kernel block size must be 32, 64, 128, 256, 512 or 1024");
  }
}

void register_or_kernel(KernelRegistry& registry) {
  registry.add(reinterpret_cast<const void*>(ranked_or_kernel<32>));
  registry.add(reinterpret_cast<const void*>(ranked_or_kernel<64>));
  registry.add(reinterpret_cast<const void*>(ranked_or_kernel<128>));
  registry.add(reinterpret_cast<const void*>(ranked_or_kernel<256>));
  registry.add(reinterpret_cast<const void*>(ranked_or_kernel<512>));
  registry.add(reinterpret_cast<const void*>(ranked_or_kernel<1024>));
}

}  // namespace gpusearch::gpu
