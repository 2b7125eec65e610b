// Batched exact query kernels: one thread block per query, thousands of queries per launch.
//
// Scores are computed in double with the reference engine's operations in its order (terms in
// query order, then the static part), with explicitly rounded operations so that the compiler
// fuses nothing: a GPU score equals the reference's bit for bit, and ties break identically.
#include "gpu/query_kernels.hpp"

#include <cfloat>

#include <fmt/format.h>

#include "gpu/cuda_util.hpp"
#include "gpu/device_codec.cuh"
#include "gpu/device_topk.cuh"

namespace gpusearch::gpu {

namespace {

constexpr unsigned kWarps = kThreadsPerQuery / 32;
constexpr unsigned kTopKBuffer = 2 * kThreadsPerQuery;
// A posting block (docID and frequency parts) is at most 2 * (1 + 4 * 32 + 32) words: one
// round of coalesced loads stages it in shared memory before decoding.
constexpr unsigned kStageWords = 2 * (1 + 4 * 32 + 32);
constexpr std::uint64_t kNoBlock = ~std::uint64_t(0);
// The GS bound is inflated by this relative slack (common/scoring.hpp, kBoundSlack).
constexpr double kBoundSlack = 1e-5;

__host__ __device__ constexpr std::size_t align16(std::size_t x) { return (x + 15) & ~std::size_t(15); }

__host__ __device__ constexpr unsigned topk_capacity(unsigned k) {
  unsigned c = 1;
  while (c < k + kTopKBuffer) c <<= 1;
  return c;
}

// Shared-memory layouts, computed identically on host (sizing) and device (carving).
struct AndLayout {
  std::size_t state, counters, cursor, cand_doc, alive, bidx, run_list, tf, warp_docs, warp_freqs,
      warp_stage, top_score, top_doc, total;
};
__host__ __device__ constexpr AndLayout and_layout(unsigned k, unsigned terms) {
  AndLayout l{};
  std::size_t o = 0;
  l.state = o; o = align16(o + sizeof(TopKState) + 16);
  l.counters = o; o = align16(o + 8 * sizeof(unsigned long long));
  l.cursor = o; o = align16(o + terms * sizeof(std::uint64_t));
  l.cand_doc = o; o = align16(o + kAndRoundCandidates * 4);
  l.alive = o; o = align16(o + kAndRoundCandidates * 4);
  l.bidx = o; o = align16(o + kAndRoundCandidates * 8);
  l.run_list = o; o = align16(o + kAndRoundCandidates * 4);
  l.tf = o; o = align16(o + std::size_t(kAndRoundCandidates) * terms * 4);
  l.warp_docs = o; o = align16(o + kWarps * kValuesPerBlock * 4);
  l.warp_freqs = o; o = align16(o + kWarps * kValuesPerBlock * 4);
  l.warp_stage = o; o = align16(o + kWarps * kStageWords * 4);
  const unsigned cap = topk_capacity(k);
  l.top_score = o; o = align16(o + cap * 8);
  l.top_doc = o; o = align16(o + cap * 4);
  l.total = o;
  return l;
}

struct OrLayout {
  std::size_t state, counters, cursor, end, cached, straddle, cache_slot, block_ub, acc, touched, touched_list,
      warp_docs, warp_freqs, warp_stage, top_score, top_doc, total;
};
__host__ __device__ constexpr OrLayout or_layout(unsigned k, unsigned terms, unsigned window) {
  OrLayout l{};
  std::size_t o = 0;
  l.state = o; o = align16(o + sizeof(TopKState) + 16);
  l.counters = o; o = align16(o + 8 * sizeof(unsigned long long));
  l.cursor = o; o = align16(o + terms * 8);
  l.end = o; o = align16(o + terms * 8);
  l.cached = o; o = align16(o + terms * 8);
  l.straddle = o; o = align16(o + terms * 8);
  l.cache_slot = o; o = align16(o + terms * 4);
  l.block_ub = o; o = align16(o + terms * 8);
  l.acc = o; o = align16(o + std::size_t(window) * 8);
  l.touched = o; o = align16(o + window);
  l.touched_list = o; o = align16(o + std::size_t(window) * 2);
  l.warp_docs = o; o = align16(o + kWarps * kValuesPerBlock * 4);
  l.warp_freqs = o; o = align16(o + kWarps * kValuesPerBlock * 4);
  l.warp_stage = o; o = align16(o + kWarps * kStageWords * 4);
  const unsigned cap = topk_capacity(k);
  l.top_score = o; o = align16(o + cap * 8);
  l.top_doc = o; o = align16(o + cap * 4);
  l.total = o;
  return l;
}

// Counter slots in shared memory.
enum Counter : unsigned {
  kPostings = 0, kBlocksDecoded, kBlocksSkipped, kDocsScored, kAndMatches, kBytesRead,
  kMisc0, kMisc1
};

template <typename T>
__device__ __forceinline__ T* carve(char* base, std::size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

// impact(d, t) = tf / (tf + norm), and one term's contribution, rounded as on the host.
__device__ __forceinline__ double contribution(double weight, std::uint32_t tf, double norm) {
  const double f = static_cast<double>(tf);
  return __dmul_rn(weight, __ddiv_rn(f, __dadd_rn(f, norm)));
}

__device__ __forceinline__ std::uint32_t block_floor(const ShardView& s, const TermDesc& t,
                                                     std::uint64_t b) {
  return b == t.first_block ? 0u : s.block_last_docid[b - 1] + 1u;
}

// First block b in [lo, hi) whose last docID is >= doc; hi if none.
__device__ __forceinline__ std::uint64_t find_block(const std::uint32_t* last, std::uint64_t lo,
                                                    std::uint64_t hi, std::uint32_t doc) {
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (__ldg(last + mid) < doc) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// First block b >= from whose last docID is >= target (galloping, then binary search).
__device__ __forceinline__ std::uint64_t gallop_block(const ShardView& s, std::uint64_t from,
                                                      std::uint64_t end, std::uint32_t target) {
  if (from >= end || __ldg(s.block_last_docid + from) >= target) return from;
  std::uint64_t lo = from, step = 1;  // last[lo] < target
  while (lo + step < end && __ldg(s.block_last_docid + lo + step) < target) {
    lo += step;
    step <<= 1;
  }
  std::uint64_t hi = lo + step < end ? lo + step : end;  // last[hi] >= target or hi == end
  return find_block(s.block_last_docid, lo + 1, hi, target);
}

// Decodes posting block b (docIDs from `floor`, and frequencies) into docs/freqs. The block's
// words are first staged in shared memory with one round of independent coalesced loads, so a
// block costs one trip to memory instead of four dependent ones (header, packed words, then the
// frequency part's header and words). Returns the count; *words is the block's size in words.
__device__ __forceinline__ unsigned warp_decode_posting_block(const ShardView& s, std::uint64_t b,
                                                              std::uint32_t floor,
                                                              std::uint32_t* stage,
                                                              std::uint32_t* docs,
                                                              std::uint32_t* freqs, unsigned lane,
                                                              unsigned* words) {
  const std::uint64_t begin = __ldg(s.block_offsets + b), end = __ldg(s.block_offsets + b + 1);
  const unsigned n_words = static_cast<unsigned>(end - begin);
  const std::uint32_t* in = s.postings + begin;
  if (n_words <= kStageWords) {
    for (unsigned i = lane; i < n_words; i += 32) stage[i] = __ldg(in + i);
    __syncwarp();
    in = stage;
  }
  const std::uint32_t* freq_part;
  const unsigned n = warp_decode_docids(in, floor, docs, lane, &freq_part);
  warp_decode_freqs(freq_part, freqs, lane);
  *words = n_words;
  return n;
}

__device__ void write_results(const TopKState& st, const double* score, const std::uint32_t* doc,
                              HitOut* hits) {
  for (unsigned i = threadIdx.x; i < st.n_top; i += blockDim.x) hits[i] = {score[i], doc[i], 0};
}

// ---------------------------------------------------------------------------------------------
// Ranked AND. Rounds of up to 256 candidates taken from the shortest list; each other list, in
// order of increasing length, is probed by a binary search per candidate over its blocks' last
// docIDs; a block is decoded only if some live candidate falls into it; survivors are scored in
// query term order and offered to the top-k. With GS-ordered docIDs the loop stops as soon as
// the k-th score reaches the bound factor * GS(first docID of the next round) (paper 000, Alg. 1).
__global__ void __launch_bounds__(kThreadsPerQuery)
    and_kernel(ShardView shard, BatchPointers batch) {
  extern __shared__ __align__(16) char smem[];
  const QueryDesc q = batch.queries[blockIdx.x];
  if (!(q.flags & kRunAnd)) return;
  const AndLayout L = and_layout(batch.k, batch.max_terms);
  auto& st = *carve<TopKState>(smem, L.state);
  auto* counters = carve<unsigned long long>(smem, L.counters);
  auto* cursor = carve<std::uint64_t>(smem, L.cursor);
  auto* cand_doc = carve<std::uint32_t>(smem, L.cand_doc);
  auto* alive = carve<std::uint32_t>(smem, L.alive);
  auto* bidx = carve<std::uint64_t>(smem, L.bidx);
  auto* run_list = carve<std::uint32_t>(smem, L.run_list);
  auto* tf = carve<std::uint32_t>(smem, L.tf);
  auto* top_score = carve<double>(smem, L.top_score);
  auto* top_doc = carve<std::uint32_t>(smem, L.top_doc);
  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
  std::uint32_t* my_docs = carve<std::uint32_t>(smem, L.warp_docs) + warp * kValuesPerBlock;
  std::uint32_t* my_freqs = carve<std::uint32_t>(smem, L.warp_freqs) + warp * kValuesPerBlock;
  std::uint32_t* my_stage = carve<std::uint32_t>(smem, L.warp_stage) + warp * kStageWords;
  const TermDesc* terms = batch.terms + q.term_begin;
  const std::uint8_t* order = batch.and_order + q.and_order_begin;
  const unsigned T = q.num_terms;
  QueryOut& out = batch.out[q.slot];

  bool any_empty = T == 0;
  for (unsigned t = 0; t < T; ++t) any_empty |= terms[t].num_blocks == 0;
  if (any_empty) {  // uniform across the block
    if (tid == 0) {
      out.num_hits = 0;
      out.and_matches = 0;
      out.early_terminated = 0;
    }
    return;
  }

  topk_init(st, batch.k);
  if (tid < 8) counters[tid] = 0;
  for (unsigned t = tid; t < T; t += blockDim.x) cursor[t] = terms[t].first_block;
  const unsigned s = q.shortest;
  const TermDesc& sterm = terms[s];
  const std::uint64_t s_end = sterm.first_block + sterm.num_blocks;
  const bool early = (q.flags & kEarlyTerminate) && q.gs_bound_factor >= 0;
  unsigned stopped_early = 0;
  __syncthreads();

  for (std::uint64_t b0 = sterm.first_block; b0 < s_end; b0 += 2) {
    if (early && st.full) {  // uniform: st changes only inside collective flushes
      const double bound = q.gs_bound_factor *
                           static_cast<double>(shard.global_score[block_floor(shard, sterm, b0)]) *
                           (1.0 + kBoundSlack);
      if (bound < st.threshold_score) {
        stopped_early = 1;
        if (tid == 0) out.rounds_saved += (s_end - b0 + 1) / 2;
        break;
      }
    }
    // Candidates: up to two blocks of the shortest list, contiguous in cand_doc.
    unsigned n0 = 0, n1 = 0;
    {
      const std::uint64_t b = b0 + warp;
      if (warp < 2 && b < s_end) {
        unsigned words;
        const unsigned n = warp_decode_posting_block(shard, b, block_floor(shard, sterm, b),
                                                     my_stage, my_docs, my_freqs, lane, &words);
        // Only the last block of a list is partial, so block b0 + 1 exists only if b0 is full.
        const unsigned base = warp * kValuesPerBlock;
        for (unsigned i = lane; i < n; i += 32) {
          cand_doc[base + i] = my_docs[i];
          tf[(base + i) * T + s] = my_freqs[i];
        }
        if (lane == 0) {
          atomicAdd(&counters[kPostings], n);
          atomicAdd(&counters[kBlocksDecoded], 1ull);
          atomicAdd(&counters[kBytesRead], 4ull * words);
        }
      }
    }
    // Counts of the two blocks, from their headers (same on every thread).
    {
      const unsigned h0 = shard.postings[shard.block_offsets[b0]] >> 24;
      n0 = h0 == 0 ? kValuesPerBlock : h0;
      if (b0 + 1 < s_end) {
        const unsigned h1 = shard.postings[shard.block_offsets[b0 + 1]] >> 24;
        n1 = h1 == 0 ? kValuesPerBlock : h1;
      }
    }
    const unsigned nc = n0 + n1;
    for (unsigned i = tid; i < kAndRoundCandidates; i += blockDim.x) alive[i] = i < nc;
    __syncthreads();

    for (unsigned oi = 0; oi < T; ++oi) {
      const unsigned j = order[oi];
      if (j == s) continue;
      const TermDesc& tj = terms[j];
      const std::uint64_t j_end = tj.first_block + tj.num_blocks;
      const std::uint64_t j_begin = cursor[j];
      // Per-candidate binary search for the block that could hold it (monotone in i).
      for (unsigned i = tid; i < nc; i += blockDim.x) {
        // Galloping from the list's cursor costs the log of the distance: a merge-like walk
        // where list j is about as dense as the candidates, a binary search where it is much
        // longer (the length ratio picks the method without a branch).
        const std::uint64_t b = gallop_block(shard, j_begin, j_end, cand_doc[i]);
        bidx[i] = b;
        if (b == j_end) alive[i] = 0;
      }
      if (tid == 0) counters[kMisc0] = 0;  // runs
      __syncthreads();
      // A run: candidates sharing one block of list j. Its first candidate is its leader.
      for (unsigned i = tid; i < nc; i += blockDim.x) {
        if (bidx[i] != j_end && (i == 0 || bidx[i] != bidx[i - 1]))
          run_list[atomicAdd(&counters[kMisc0], 1ull)] = i;
      }
      __syncthreads();
      const unsigned runs = static_cast<unsigned>(counters[kMisc0]);
      for (unsigned r = warp; r < runs; r += kWarps) {
        const unsigned start = run_list[r];
        const std::uint64_t b = bidx[start];
        unsigned stop = start + 1;  // one past the run: 32 candidates per step
        while (true) {
          const unsigned i = stop + lane;
          const unsigned other = __ballot_sync(kFullMask, !(i < nc && bidx[i] == b));
          if (other) {
            stop += __ffs(other) - 1;
            break;
          }
          stop += 32;
        }
        bool any_alive = false;
        for (unsigned i = start + lane; i < stop; i += 32) any_alive |= alive[i] != 0;
        any_alive = __any_sync(kFullMask, any_alive);
        if (!any_alive) continue;  // every candidate of this block already died: skip it
        unsigned words;
        const unsigned n = warp_decode_posting_block(shard, b, block_floor(shard, tj, b), my_stage,
                                                     my_docs, my_freqs, lane, &words);
        if (lane == 0) {
          atomicAdd(&counters[kPostings], n);
          atomicAdd(&counters[kBlocksDecoded], 1ull);
          atomicAdd(&counters[kBytesRead], 4ull * words);
        }
        for (unsigned i = start + lane; i < stop; i += 32) {
          if (!alive[i]) continue;
          const std::uint32_t d = cand_doc[i];
          unsigned lo = 0, hi = n;
          while (lo < hi) {
            const unsigned mid = (lo + hi) / 2;
            if (my_docs[mid] < d) lo = mid + 1;
            else hi = mid;
          }
          if (lo < n && my_docs[lo] == d) tf[i * T + j] = my_freqs[lo];
          else alive[i] = 0;
        }
        __syncwarp();
      }
      __syncthreads();
      const std::uint64_t new_cursor = nc > 0 ? bidx[nc - 1] : j_begin;  // read before reuse
      const int live = __syncthreads_count(tid < nc && alive[tid] != 0);  // nc <= blockDim
      if (tid == 0) {
        // Blocks of list j passed over without decoding.
        const std::uint64_t passed = new_cursor > j_begin ? new_cursor - j_begin : 0;
        counters[kBlocksSkipped] += passed > runs ? passed - runs : 0;
        cursor[j] = new_cursor < j_end ? new_cursor : j_end;
      }
      if (live == 0) break;
    }
    // Survivors: score in query term order, count, offer.
    if (tid < nc && alive[tid]) {
      const std::uint32_t d = cand_doc[tid];
      const double norm = shard.length_norm[d];
      double score = 0.0;
      for (unsigned t = 0; t < T; ++t)
        score = __dadd_rn(score, contribution(terms[t].weight, tf[tid * T + t], norm));
      score = __dadd_rn(score, __dmul_rn(q.static_weight, static_cast<double>(shard.pagerank[d])));
      atomicAdd(&counters[kAndMatches], 1ull);
      atomicAdd(&counters[kDocsScored], 1ull);
      topk_offer(st, top_score, top_doc, score, d);
    }
    topk_maybe_flush(st, top_score, top_doc, kTopKBuffer);
  }
  topk_flush(st, top_score, top_doc);
  write_results(st, top_score, top_doc, batch.hits + std::size_t(q.slot) * 2 * batch.k);
  if (tid == 0) {
    out.num_hits = st.n_top;
    out.and_matches = counters[kAndMatches];
    out.postings_decoded += counters[kPostings];
    out.blocks_decoded += counters[kBlocksDecoded];
    out.blocks_skipped += counters[kBlocksSkipped];
    out.docs_scored += counters[kDocsScored];
    out.bytes_read += counters[kBytesRead];
    out.early_terminated |= stopped_early;
  }
}

// ---------------------------------------------------------------------------------------------
// OR by windows of the docID space: for each window [lo, hi), each list's blocks that overlap it
// are decoded (one warp per block) and their contributions added to shared-memory accumulators,
// one list at a time in query term order (so each document's sum has the reference's order);
// touched documents are then scored and offered to the top-k. A block that straddles the
// window's end is decoded once and kept in a per-term cache for the next windows. Empty
// stretches of the docID space are jumped over. Pruning (exact): a window whose block-max bound
// cannot beat the k-th score is skipped without decoding, and with GS-ordered docIDs the whole
// query stops once the k-th score reaches factor * GS(lo).
__global__ void __launch_bounds__(kThreadsPerQuery)
    or_kernel(ShardView shard, BatchPointers batch, unsigned window) {
  extern __shared__ __align__(16) char smem[];
  const QueryDesc q = batch.queries[blockIdx.x];
  if (!(q.flags & kRunOr) || (q.flags & kOrByThreads)) return;
  QueryOut& out = batch.out[q.slot];
  const bool second_answer = (q.flags & kOrOnlyIfAndShort) != 0;
  if (second_answer && out.and_matches >= batch.k) return;  // the AND answer stands
  const OrLayout L = or_layout(batch.k, batch.max_terms, window);
  auto& st = *carve<TopKState>(smem, L.state);
  auto* counters = carve<unsigned long long>(smem, L.counters);
  auto* cursor = carve<std::uint64_t>(smem, L.cursor);
  auto* end = carve<std::uint64_t>(smem, L.end);
  auto* cached = carve<std::uint64_t>(smem, L.cached);      // block held in the term's cache
  auto* straddle = carve<std::uint64_t>(smem, L.straddle);  // straddler decoded this window
  auto* cache_slot = carve<std::uint32_t>(smem, L.cache_slot);
  auto* block_ub = carve<double>(smem, L.block_ub);
  auto* acc = carve<double>(smem, L.acc);
  auto* touched = carve<std::uint8_t>(smem, L.touched);
  auto* touched_list = carve<std::uint16_t>(smem, L.touched_list);
  auto* top_score = carve<double>(smem, L.top_score);
  auto* top_doc = carve<std::uint32_t>(smem, L.top_doc);
  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
  std::uint32_t* my_docs = carve<std::uint32_t>(smem, L.warp_docs) + warp * kValuesPerBlock;
  std::uint32_t* my_freqs = carve<std::uint32_t>(smem, L.warp_freqs) + warp * kValuesPerBlock;
  std::uint32_t* my_stage = carve<std::uint32_t>(smem, L.warp_stage) + warp * kStageWords;
  const TermDesc* terms = batch.terms + q.term_begin;
  // Per term, two cache slots: the block cached from an earlier window is read from one while
  // this window's straddler is written to the other.
  constexpr unsigned kSlotWords = 2 * kValuesPerBlock + 1;
  std::uint32_t* term_cache = batch.term_cache + std::size_t(q.term_begin) * 2 * kSlotWords;
  const unsigned T = q.num_terms;
  const bool prune = (q.flags & kPruneBlockMax) != 0;
  const bool early = (q.flags & kEarlyTerminate) && q.gs_bound_factor >= 0;

  __shared__ std::uint32_t window_lo, next_lo, touched_count, control;
  topk_init(st, batch.k);
  if (tid < 8) counters[tid] = 0;
  for (unsigned t = tid; t < T; t += blockDim.x) {
    cursor[t] = terms[t].first_block;
    cached[t] = kNoBlock;
    cache_slot[t] = 0;
  }
  for (unsigned i = tid; i < window; i += blockDim.x) {
    acc[i] = 0.0;
    touched[i] = 0;
  }
  if (tid == 0) {
    window_lo = 0;
    touched_count = 0;
  }
  unsigned stopped_early = 0;
  __syncthreads();

  while (window_lo < shard.num_docs) {
    const std::uint32_t lo = window_lo;
    const std::uint32_t hi = (shard.num_docs - lo > window) ? lo + window : shard.num_docs;
    // Each list's blocks overlapping [lo, hi): [cursor, end). Blocks before cursor end below lo.
    // One warp per list, 32 block boundaries per step (a window spans few blocks of a list).
    for (unsigned t = warp; t < T; t += kWarps) {
      const TermDesc& term = terms[t];
      const std::uint64_t list_end = term.first_block + term.num_blocks;
      const std::uint64_t c = cursor[t];
      std::uint64_t f = list_end;
      double ub = 0.0;
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
        if (overlaps) ub = fmax(ub, static_cast<double>(__ldg(shard.block_max_impact + b)));
        if (ge) {
          f = first_ge;
          break;
        }
      }
      for (unsigned d = 16; d > 0; d >>= 1) ub = fmax(ub, __shfl_xor_sync(kFullMask, ub, d));
      if (lane == 0) {
        end[t] = (f < list_end && block_floor(shard, term, f) < hi) ? f + 1 : f;
        straddle[t] = kNoBlock;
        block_ub[t] = __dmul_rn(term.weight, ub);
      }
    }
    if (tid == 0) {
      next_lo = 0xffffffffu;
      control = 0;  // 1: skip this window, 2: stop
    }
    __syncthreads();
    if (tid == 0 && st.full) {
      if (early && q.gs_bound_factor * static_cast<double>(shard.global_score[lo]) *
                           (1.0 + kBoundSlack) < st.threshold_score) {
        control = 2;
      } else if (prune) {
        double bound = q.static_weight;  // PR' <= 1
        for (unsigned t = 0; t < T; ++t) bound += block_ub[t];
        if (bound * (1.0 + kBoundSlack) < st.threshold_score) control = 1;
      }
    }
    __syncthreads();
    if (control == 2) {
      stopped_early = 1;
      if (tid == 0) out.rounds_saved += (shard.num_docs - lo + window - 1) / window;
      break;
    }
    if (control == 0) {
      for (unsigned t = 0; t < T; ++t) {
        const TermDesc& term = terms[t];
        const std::uint64_t c = cursor[t], e = end[t];
        if (c == e) continue;  // no block of this list in the window: no barrier either
        const std::uint64_t cached_block = cached[t];
        std::uint32_t* cache_in = term_cache + (std::size_t(t) * 2 + cache_slot[t]) * kSlotWords;
        std::uint32_t* cache_out =
            term_cache + (std::size_t(t) * 2 + (cache_slot[t] ^ 1u)) * kSlotWords;
        for (std::uint64_t b = c + warp; b < e; b += kWarps) {
          const std::uint32_t* docs;
          const std::uint32_t* freqs;
          unsigned n;
          if (b == cached_block) {  // the straddling block, decoded in an earlier window
            n = cache_in[2 * kValuesPerBlock];
            docs = cache_in;
            freqs = cache_in + kValuesPerBlock;
          } else {
            unsigned words;
            n = warp_decode_posting_block(shard, b, block_floor(shard, term, b), my_stage, my_docs,
                                          my_freqs, lane, &words);
            docs = my_docs;
            freqs = my_freqs;
            if (lane == 0) {
              atomicAdd(&counters[kPostings], n);
              atomicAdd(&counters[kBlocksDecoded], 1ull);
              atomicAdd(&counters[kBytesRead], 4ull * words);
            }
            if (shard.block_last_docid[b] >= hi) {  // straddles: keep it for the next windows
              for (unsigned i = lane; i < kValuesPerBlock; i += 32) {
                cache_out[i] = my_docs[i];
                cache_out[kValuesPerBlock + i] = my_freqs[i];
              }
              if (lane == 0) {
                cache_out[2 * kValuesPerBlock] = n;
                straddle[t] = b;  // at most one block of a list straddles hi
              }
            }
          }
          std::uint32_t next_here = 0xffffffffu;
          // First every lane gathers its (up to) four postings' contributions, so that the
          // length-norm loads are all in flight together; then the accumulators are updated.
          std::uint32_t dv[4];
          double cv[4];
#pragma unroll
          for (unsigned r = 0; r < 4; ++r) {
            const unsigned i = 32 * r + lane;
            dv[r] = i < n ? docs[i] : 0xffffffffu;
            cv[r] = 0.0;
            if (i < n && dv[r] >= lo && dv[r] < hi)
              cv[r] = contribution(term.weight, freqs[i], __ldg(shard.length_norm + dv[r]));
          }
#pragma unroll
          for (unsigned r = 0; r < 4; ++r) {
            const std::uint32_t d = dv[r];
            const bool in_window = d >= lo && d < hi;
            if (d >= hi && d != 0xffffffffu) next_here = min(next_here, d);
            const unsigned slot = d - lo;
            // One posting per document per list: no race on a slot within a list.
            const bool first_touch = in_window && !touched[slot];
            const unsigned fresh = __ballot_sync(kFullMask, first_touch);
            if (fresh) {  // one shared-memory atomic per warp, not per document
              const unsigned leader = __ffs(fresh) - 1;
              unsigned at = 0;
              if (lane == leader) at = atomicAdd(&touched_count, __popc(fresh));
              at = __shfl_sync(kFullMask, at, leader);
              if (first_touch) {
                touched[slot] = 1;
                touched_list[at + __popc(fresh & ((1u << lane) - 1u))] =
                    static_cast<std::uint16_t>(slot);
              }
            }
            if (in_window) acc[slot] = __dadd_rn(acc[slot], cv[r]);
          }
          for (unsigned d = 16; d > 0; d >>= 1)
            next_here = min(next_here, __shfl_xor_sync(kFullMask, next_here, d));
          if (lane == 0 && next_here != 0xffffffffu) atomicMin(&next_lo, next_here);
          __syncwarp();
        }
        __syncthreads();  // list t complete before list t + 1 adds to the same accumulators
      }
      // Score the touched documents and offer them to the top-k.
      const unsigned n_touched = touched_count;
      for (unsigned base = 0; base < n_touched; base += blockDim.x) {
        const unsigned i = base + tid;
        if (i < n_touched) {
          const unsigned slot = touched_list[i];
          const std::uint32_t d = lo + slot;
          const double score = __dadd_rn(
              acc[slot], __dmul_rn(q.static_weight, static_cast<double>(shard.pagerank[d])));
          acc[slot] = 0.0;
          touched[slot] = 0;
          topk_offer(st, top_score, top_doc, score, d);
        }
        topk_maybe_flush(st, top_score, top_doc, kTopKBuffer);
      }
      if (tid == 0) {
        counters[kDocsScored] += n_touched;
        touched_count = 0;
      }
    }
    __syncthreads();
    // Advance: a list's cursor keeps its straddling block; the next window starts at the
    // smallest docID any list can still hold at or past hi.
    for (unsigned t = tid; t < T; t += blockDim.x) {
      const TermDesc& term = terms[t];
      const std::uint64_t list_end = term.first_block + term.num_blocks;
      const std::uint64_t e = end[t];
      if (control != 0) {
        const std::uint64_t n = e - cursor[t];
        atomicAdd(&counters[kBlocksSkipped],
                  static_cast<unsigned long long>(
                      n - ((cached[t] >= cursor[t] && cached[t] < e) ? 1 : 0)));
      }
      if (straddle[t] != kNoBlock) {
        cached[t] = straddle[t];
        cache_slot[t] ^= 1u;
      }
      std::uint64_t c = e;
      if (e > cursor[t] && __ldg(shard.block_last_docid + e - 1) >= hi) c = e - 1;
      const bool processed = control == 0 && c < e;
      cursor[t] = c;
      // A processed straddler's postings at or past hi already went into next_lo.
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
  HitOut* hits = batch.hits + std::size_t(q.slot) * 2 * batch.k + (second_answer ? batch.k : 0);
  write_results(st, top_score, top_doc, hits);
  if (tid == 0) {
    if (second_answer) out.num_or_hits = st.n_top;
    else out.num_hits = st.n_top;
    out.or_ran = 1;
    out.postings_decoded += counters[kPostings];
    out.blocks_decoded += counters[kBlocksDecoded];
    out.blocks_skipped += counters[kBlocksSkipped];
    out.docs_scored += counters[kDocsScored];
    out.bytes_read += counters[kBytesRead];
    out.early_terminated |= stopped_early;
  }
}

// ---------------------------------------------------------------------------------------------
// Block-max WAND with the query's docID space split across the P threads of its block (paper
// 002): thread j runs sequential BMW (Ding and Suel) over docIDs [j N / P, (j + 1) N / P) with
// its own top-k, pruning against the larger of its own k-th score and the best k-th score any
// thread of the block has published (a lower bound of the final k-th score, so pruning stays
// exact); the local top-k lists are merged at the end. Posting lists are read by per-thread
// streaming cursors that decode one posting at a time straight from the compressed block
// (O(1) state per list, no per-thread block buffers).



constexpr std::uint32_t kEndDoc = 0xffffffffu;

struct StreamCursor {
  std::uint64_t block, list_end;
  const std::uint32_t* doc_words;  // docID part of the current block (global memory)
  const std::uint32_t* freq_words;
  std::uint32_t doc;  // current docID, kEndDoc past the end
  std::uint32_t index, count;
  std::uint32_t doc_header, freq_header;
  std::uint32_t doc_exception, freq_exception;  // next exception to patch, by position order
  std::uint64_t first_block;
};

__device__ __forceinline__ std::uint32_t extract(const std::uint32_t* block, std::uint32_t header,
                                                 unsigned i, std::uint32_t* exception_cursor) {
  const DeviceBlockHeader h = read_block_header(header);
  const std::uint32_t* packed = block + 1;
  std::uint32_t x = 0;
  if (h.bits != 0) {
    unsigned w, off;
    if (h.count == kValuesPerBlock) {
      const unsigned pos = (i >> 2) * h.bits;
      w = 4 * (pos >> 5) + (i & 3u);
      off = pos & 31u;
      x = __ldg(packed + w) >> off;
      if (off + h.bits > 32) x |= __ldg(packed + w + 4) << (32 - off);
    } else {
      const unsigned pos = i * h.bits;
      w = pos >> 5;
      off = pos & 31u;
      x = __ldg(packed + w) >> off;
      if (off + h.bits > 32) x |= __ldg(packed + w + 1) << (32 - off);
    }
    x &= low_mask(h.bits);
  }
  if (h.exceptions != 0) {  // positions ascend: skip those before i, patch if one is at i
    const std::uint32_t* positions = packed + packed_words(h);
    unsigned j = *exception_cursor;
    unsigned p = 0;
    while (j < h.exceptions && (p = (__ldg(positions + j / 4) >> (8 * (j % 4))) & 0xffu) < i) ++j;
    if (j < h.exceptions && p == i) {
      const std::uint32_t* high = positions + (h.exceptions + 3) / 4;
      const unsigned eb = h.exception_bits, bitpos = j * eb, hw = bitpos >> 5, off = bitpos & 31u;
      std::uint32_t e = __ldg(high + hw) >> off;
      if (off + eb > 32) e |= __ldg(high + hw + 1) << (32 - off);
      x |= (e & low_mask(eb)) << h.bits;
      ++j;
    }
    *exception_cursor = j;
  }
  return x;
}

// Positions the cursor at the first posting of block b, whose docIDs start after prev_doc.
__device__ __forceinline__ void enter_block(const ShardView& s, StreamCursor& c, std::uint64_t b,
                                            unsigned long long* blocks_decoded) {
  c.block = b;
  if (b >= c.list_end) {
    c.doc = kEndDoc;
    return;
  }
  c.doc_words = s.postings + __ldg(s.block_offsets + b);
  c.doc_header = __ldg(c.doc_words);
  const DeviceBlockHeader h = read_block_header(c.doc_header);
  c.freq_words = c.doc_words + block_words(h);
  c.freq_header = __ldg(c.freq_words);
  c.count = h.count;
  c.index = 0;
  c.doc_exception = 0;
  c.freq_exception = 0;
  const std::uint32_t prev = b == c.first_block ? 0xffffffffu : __ldg(s.block_last_docid + b - 1);
  c.doc = prev + extract(c.doc_words, c.doc_header, 0, &c.doc_exception) + 1u;
  ++*blocks_decoded;
}

__device__ __forceinline__ void cursor_next(const ShardView& s, StreamCursor& c,
                                            unsigned long long* postings,
                                            unsigned long long* blocks_decoded) {
  if (++c.index < c.count) {
    c.doc += extract(c.doc_words, c.doc_header, c.index, &c.doc_exception) + 1u;
    ++*postings;
  } else {
    enter_block(s, c, c.block + 1, blocks_decoded);
    if (c.doc != kEndDoc) ++*postings;
  }
}

__device__ __forceinline__ void cursor_next_geq(const ShardView& s, StreamCursor& c,
                                                std::uint32_t target, unsigned long long* postings,
                                                unsigned long long* blocks_decoded,
                                                unsigned long long* blocks_skipped) {
  if (c.doc >= target) return;
  if (__ldg(s.block_last_docid + c.block) < target) {
    const std::uint64_t b = gallop_block(s, c.block + 1, c.list_end, target);
    *blocks_skipped += b - c.block - 1;
    enter_block(s, c, b, blocks_decoded);
    if (c.doc == kEndDoc) return;
    ++*postings;
  }
  while (c.doc < target) cursor_next(s, c, postings, blocks_decoded);
}

__device__ __forceinline__ std::uint32_t cursor_freq(StreamCursor& c) {
  return extract(c.freq_words, c.freq_header, c.index, &c.freq_exception) + 1u;
}

__global__ void bmw_kernel(ShardView shard, BatchPointers batch) {
  extern __shared__ __align__(16) char smem[];
  const QueryDesc q = batch.queries[blockIdx.x];
  if (!(q.flags & kRunOr) || !(q.flags & kOrByThreads)) return;
  QueryOut& out = batch.out[q.slot];
  const bool second_answer = (q.flags & kOrOnlyIfAndShort) != 0;
  if (second_answer && out.and_matches >= batch.k) return;
  const unsigned P = blockDim.x, tid = threadIdx.x, T = q.num_terms, k = batch.k;
  auto& st = *carve<TopKState>(smem, 0);
  auto* counters = carve<unsigned long long>(smem, 64);
  auto* shared_theta = carve<unsigned long long>(smem, 128);  // bits of the best local k-th
  double* top_score = carve<double>(smem, 144);
  std::uint32_t* top_doc =
      carve<std::uint32_t>(smem, 144 + std::size_t(topk_capacity(k)) * 8);
  const TermDesc* terms = batch.terms + q.term_begin;
  topk_init(st, k);
  if (tid < 8) counters[tid] = 0;
  if (tid == 0) *shared_theta = 0ull;
  __syncthreads();

  unsigned long long postings = 0, blocks_decoded = 0, blocks_skipped = 0, scored = 0;
  // This thread's docID range.
  const std::uint64_t n = shard.num_docs;
  const std::uint32_t r_lo = static_cast<std::uint32_t>(n * tid / P);
  const std::uint32_t r_hi = static_cast<std::uint32_t>(n * (tid + 1) / P);
  StreamCursor cur[kBmwMaxTerms];
  double max_score[kBmwMaxTerms];
  unsigned order[kBmwMaxTerms];
  double local_score[kBmwMaxK];
  std::uint32_t local_doc[kBmwMaxK];
  unsigned local_n = 0;
  for (unsigned t = 0; t < T; ++t) {
    const TermDesc& term = terms[t];
    StreamCursor& c = cur[t];
    c.list_end = term.first_block + term.num_blocks;
    c.first_block = term.first_block;
    max_score[t] = __dmul_rn(term.weight, static_cast<double>(term.max_impact));
    order[t] = t;
    c.doc = kEndDoc;
    c.block = term.first_block;
    if (term.num_blocks > 0 && r_lo < r_hi) {
      // Blocks before this thread's range belong to other threads: not counted as skipped.
      const std::uint64_t b = gallop_block(shard, term.first_block, c.list_end, r_lo);
      enter_block(shard, c, b, &blocks_decoded);
      if (c.doc != kEndDoc) {
        ++postings;
        while (c.doc < r_lo) cursor_next(shard, c, &postings, &blocks_decoded);
      }
    }
  }
  const double static_bound = q.static_weight;  // PR' <= 1
  while (true) {
    // Threshold: own k-th, or the best k-th any thread published.
    double theta = -1.0;
    if (local_n == k) theta = local_score[k - 1];
    const double published = __longlong_as_double(static_cast<long long>(
        *reinterpret_cast<volatile unsigned long long*>(shared_theta)));
    if (published > theta) theta = published;
    // Sort lists by current docID (insertion sort; T is small).
    for (unsigned a = 1; a < T; ++a) {
      const unsigned x = order[a];
      unsigned b = a;
      while (b > 0 && cur[order[b - 1]].doc > cur[x].doc) {
        order[b] = order[b - 1];
        --b;
      }
      order[b] = x;
    }
    // Pivot: the first list at which the sum of list maxima reaches theta.
    double bound = static_bound;
    unsigned p = T;
    for (unsigned a = 0; a < T; ++a) {
      if (cur[order[a]].doc == kEndDoc) break;
      bound += max_score[order[a]];
      if (bound >= theta) {
        p = a;
        break;
      }
    }
    if (p == T) break;
    const std::uint32_t pivot = cur[order[p]].doc;
    if (pivot >= r_hi) break;
    while (p + 1 < T && cur[order[p + 1]].doc == pivot) ++p;  // every list at the pivot
    // Block-max bound at the pivot, from the blocks that would hold it (shallow moves).
    double block_bound = static_bound;
    std::uint32_t next_boundary = kEndDoc;
    for (unsigned a = 0; a <= p; ++a) {
      const StreamCursor& c = cur[order[a]];
      const std::uint64_t b = gallop_block(shard, c.block, c.list_end, pivot);
      if (b < c.list_end) {
        block_bound += __dmul_rn(terms[order[a]].weight,
                                 static_cast<double>(__ldg(shard.block_max_impact + b)));
        const std::uint32_t last = __ldg(shard.block_last_docid + b);
        if (last < next_boundary) next_boundary = last;
      }
    }
    if (block_bound >= theta) {
      if (cur[order[0]].doc == pivot) {
        // Score the pivot in query term order, as the reference does.
        const double norm = shard.length_norm[pivot];
        double score = 0.0;
        for (unsigned t = 0; t < T; ++t)
          if (cur[t].doc == pivot)
            score = __dadd_rn(score, contribution(terms[t].weight, cursor_freq(cur[t]), norm));
        score = __dadd_rn(score, __dmul_rn(q.static_weight,
                                           static_cast<double>(shard.pagerank[pivot])));
        ++scored;
        if (local_n < k ||
            ranks_before(score, pivot, local_score[local_n - 1], local_doc[local_n - 1])) {
          unsigned at = local_n < k ? local_n++ : k - 1;
          while (at > 0 && ranks_before(score, pivot, local_score[at - 1], local_doc[at - 1])) {
            local_score[at] = local_score[at - 1];
            local_doc[at] = local_doc[at - 1];
            --at;
          }
          local_score[at] = score;
          local_doc[at] = pivot;
          if (local_n == k)
            atomicMax(shared_theta, static_cast<unsigned long long>(
                                        __double_as_longlong(local_score[k - 1])));
        }
        for (unsigned a = 0; a <= p; ++a)
          cursor_next(shard, cur[order[a]], &postings, &blocks_decoded);
      } else {
        // Move a list that lags behind the pivot up to it.
        cursor_next_geq(shard, cur[order[0]], pivot, &postings, &blocks_decoded, &blocks_skipped);
      }
    } else {
      // No document up to the nearest block end can reach theta: jump past it.
      std::uint32_t target = next_boundary == kEndDoc ? kEndDoc : next_boundary + 1;
      if (p + 1 < T && cur[order[p + 1]].doc < target) target = cur[order[p + 1]].doc;
      if (target <= pivot) target = pivot + 1;
      cursor_next_geq(shard, cur[order[0]], target, &postings, &blocks_decoded, &blocks_skipped);
    }
  }
  atomicAdd(&counters[kPostings], postings);
  atomicAdd(&counters[kBlocksDecoded], blocks_decoded);
  atomicAdd(&counters[kBlocksSkipped], blocks_skipped);
  atomicAdd(&counters[kDocsScored], scored);
  // Merge the local top-k lists: pass j offers every thread's j-th entry.
  for (unsigned j = 0; j < k; ++j) {
    if (j < local_n) topk_offer(st, top_score, top_doc, local_score[j], local_doc[j]);
    topk_maybe_flush(st, top_score, top_doc, 2 * P);
  }
  topk_flush(st, top_score, top_doc);
  HitOut* hits = batch.hits + std::size_t(q.slot) * 2 * batch.k + (second_answer ? batch.k : 0);
  write_results(st, top_score, top_doc, hits);
  if (tid == 0) {
    if (second_answer) out.num_or_hits = st.n_top;
    else out.num_hits = st.n_top;
    out.or_ran = 1;
    out.postings_decoded += counters[kPostings];
    out.blocks_decoded += counters[kBlocksDecoded];
    out.blocks_skipped += counters[kBlocksSkipped];
    out.docs_scored += counters[kDocsScored];
  }
}

// One warp per block; the checksum mixes every decoded docID and frequency.
__global__ void decode_blocks_kernel(ShardView shard, std::uint64_t first, std::uint64_t count,
                                     std::uint32_t* checksums) {
  __shared__ __align__(16) std::uint32_t docs[kWarps][kValuesPerBlock];
  __shared__ __align__(16) std::uint32_t freqs[kWarps][kValuesPerBlock];
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const std::uint64_t stride = std::uint64_t(gridDim.x) * kWarps;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * kWarps + warp; i < count; i += stride) {
    const std::uint64_t b = first + i;
    const std::uint32_t* in = shard.postings + shard.block_offsets[b];
    const std::uint32_t* freq_part;
    // Floor 0: the checksum covers gaps' prefix sums relative to the block start.
    const unsigned n = warp_decode_docids(in, 0, docs[warp], lane, &freq_part);
    warp_decode_freqs(freq_part, freqs[warp], lane);
    std::uint32_t x = 0;
    for (unsigned j = lane; j < n; j += 32) x ^= docs[warp][j] * 2654435761u + freqs[warp][j];
    for (unsigned d = 16; d > 0; d >>= 1) x ^= __shfl_xor_sync(kFullMask, x, d);
    if (lane == 0) checksums[i] = x;
  }
}

}  // namespace

std::size_t and_kernel_shared_bytes(unsigned k, unsigned max_terms) {
  return and_layout(k, max_terms).total;
}
std::size_t or_kernel_shared_bytes(unsigned k, unsigned max_terms, unsigned window) {
  return or_layout(k, max_terms, window).total;
}

namespace {
int max_dynamic_shared(const void* kernel) {
  int device = 0, max_optin = 0;
  GPUSEARCH_CUDA_CHECK(cudaGetDevice(&device));
  GPUSEARCH_CUDA_CHECK(
      cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attr{};
  GPUSEARCH_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  return max_optin - static_cast<int>(attr.sharedSizeBytes);
}

void check_shared(std::size_t bytes, const void* kernel, const char* name) {
  const int limit = max_dynamic_shared(kernel);
  if (bytes > static_cast<std::size_t>(limit))
    throw Error(fmt::format("{} needs {} bytes of shared memory for this batch (k, terms, "
                            "window); the device allows {}: lower k or --or-window",
                            name, bytes, limit));
}
}  // namespace

void configure_query_kernels() {
  for (const void* kernel : {reinterpret_cast<const void*>(and_kernel),
                             reinterpret_cast<const void*>(or_kernel)})
    GPUSEARCH_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              max_dynamic_shared(kernel)));
}

void launch_and_kernel(const ShardView& shard, const BatchPointers& batch, cudaStream_t stream) {
  if (batch.num_queries == 0) return;
  const std::size_t bytes = and_kernel_shared_bytes(batch.k, batch.max_terms);
  check_shared(bytes, reinterpret_cast<const void*>(and_kernel), "the AND kernel");
  and_kernel<<<batch.num_queries, kThreadsPerQuery, bytes, stream>>>(shard, batch);
  GPUSEARCH_CUDA_CHECK_LAUNCH("and_kernel");
}

void launch_or_kernel(const ShardView& shard, const BatchPointers& batch, unsigned window,
                      cudaStream_t stream) {
  if (batch.num_queries == 0) return;
  const std::size_t bytes = or_kernel_shared_bytes(batch.k, batch.max_terms, window);
  check_shared(bytes, reinterpret_cast<const void*>(or_kernel), "the OR kernel");
  or_kernel<<<batch.num_queries, kThreadsPerQuery, bytes, stream>>>(shard, batch, window);
  GPUSEARCH_CUDA_CHECK_LAUNCH("or_kernel");
}

std::size_t bmw_kernel_shared_bytes(unsigned k) {
  return 144 + std::size_t(topk_capacity(k)) * 12;
}

void launch_bmw_kernel(const ShardView& shard, const BatchPointers& batch, unsigned threads,
                       cudaStream_t stream) {
  if (batch.num_queries == 0) return;
  bmw_kernel<<<batch.num_queries, threads, bmw_kernel_shared_bytes(batch.k), stream>>>(shard,
                                                                                     batch);
  GPUSEARCH_CUDA_CHECK_LAUNCH("bmw_kernel");
}

void launch_decode_blocks(const ShardView& shard, std::uint64_t first_block, std::uint64_t count,
                          std::uint32_t* checksums, cudaStream_t stream) {
  if (count == 0) return;
  int device = 0, sms = 0;
  GPUSEARCH_CUDA_CHECK(cudaGetDevice(&device));
  GPUSEARCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::uint64_t blocks_needed = (count + kWarps - 1) / kWarps;
  const unsigned grid =
      static_cast<unsigned>(blocks_needed < std::uint64_t(sms) * 16 ? blocks_needed : sms * 16);
  decode_blocks_kernel<<<grid, kThreadsPerQuery, 0, stream>>>(shard, first_block, count, checksums);
  GPUSEARCH_CUDA_CHECK_LAUNCH("decode_blocks_kernel");
}

}  // namespace gpusearch::gpu
