// Ranked AND over one segment per thread block (paper 000, Algorithm 1; paper 003's search,
// scan and compact). Rounds of up to 256 candidates are taken from the shortest list's blocks
// inside the segment; each other list, in order of increasing length, is probed by a galloping
// search per candidate over its blocks' last docIDs, and a block is decoded only if a live
// candidate falls into it. Survivors are scored in double in query term order, with explicitly
// rounded operations, so AND scores equal the reference's bit for bit. With GS-ordered docIDs
// a segment stops once factor * GS(next candidate) cannot beat the query's running k-th score,
// shared by all its segments.
#include <fmt/format.h>

#include "gpu/cuda_util.hpp"
#include "gpu/kernel_limits.hpp"
#include "gpu/segment_output.cuh"
#include "gpu/shard_access.cuh"

namespace gpusearch::gpu {

namespace {

constexpr unsigned kWarps = kThreadsPerQuery / 32;

// Shared-memory layout, computed identically on host (sizing) and device (carving).
struct AndLayout {
  std::size_t state, counters, cursor, cand_doc, alive, bidx, run_list, tf, warp_docs, warp_freqs,
      warp_stage, top_score, top_doc, total;
};
__host__ __device__ constexpr AndLayout and_layout(unsigned k, unsigned terms,
                                                   bool topk_in_global) {
  AndLayout l{};
  std::size_t o = 0;
  l.state = o; o = align16(o + sizeof(TopKState) + 16);
  l.counters = o; o = align16(o + kNumCounters * sizeof(unsigned long long));
  l.cursor = o; o = align16(o + terms * sizeof(std::uint64_t));
  l.cand_doc = o; o = align16(o + kAndRoundCandidates * 4);
  l.alive = o; o = align16(o + kAndRoundCandidates * 4);
  l.bidx = o; o = align16(o + kAndRoundCandidates * 8);
  l.run_list = o; o = align16(o + kAndRoundCandidates * 4);
  l.tf = o; o = align16(o + std::size_t(kAndRoundCandidates) * terms * 4);
  l.warp_docs = o; o = align16(o + kWarps * kValuesPerBlock * 4);
  l.warp_freqs = o; o = align16(o + kWarps * kValuesPerBlock * 4);
  l.warp_stage = o; o = align16(o + kWarps * kStageWords * 4);
  // Room for k plus at least one offer per thread, rounded up to a power of two (bitonic
  // flush); the rounding's slack is buffer too.
  const unsigned cap = topk_capacity(k, kThreadsPerQuery);
  if (!topk_in_global) {  // else a global-memory row per segment (and_topk_row_bytes)
    l.top_score = o; o = align16(o + cap * 8);
    l.top_doc = o; o = align16(o + cap * 4);
  }
  l.total = o;
  return l;
}

// One segment's global top-k row: cap scores (double), then cap docIDs.
__host__ __device__ constexpr std::size_t and_topk_row_stride(unsigned k) {
  return align16(std::size_t(topk_capacity(k, kThreadsPerQuery)) * 12);
}

__global__ void __launch_bounds__(kThreadsPerQuery)
    ranked_and_kernel(ShardView shard, BatchPointers batch) {
  extern __shared__ __align__(16) char smem[];
  const std::uint32_t row = blockIdx.x;
  const SegmentDesc seg = batch.and_segments[row];
  const QueryDesc q = batch.queries[seg.query];
  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
  const TermDesc* terms = batch.terms + q.term_begin;
  const unsigned T = q.num_terms;
  QueryOut& out = batch.out[q.slot];

  bool any_empty = T == 0 || !(q.flags & kRunAnd);
  for (unsigned t = 0; t < T; ++t) any_empty |= terms[t].num_blocks == 0;
  if (any_empty) {  // uniform across the block
    if (tid == 0) batch.partial_count[row] = 0;
    return;
  }

  const bool topk_in_global = batch.and_topk_rows != nullptr;
  const AndLayout L = and_layout(batch.k, batch.max_terms, topk_in_global);
  auto& st = *carve<TopKState>(smem, L.state);
  auto* counters = carve<unsigned long long>(smem, L.counters);
  auto* cursor = carve<std::uint64_t>(smem, L.cursor);
  auto* cand_doc = carve<std::uint32_t>(smem, L.cand_doc);
  auto* alive = carve<std::uint32_t>(smem, L.alive);
  auto* bidx = carve<std::uint64_t>(smem, L.bidx);
  auto* run_list = carve<std::uint32_t>(smem, L.run_list);
  auto* tf = carve<std::uint32_t>(smem, L.tf);
  // A global top-k row is this block's alone: __syncthreads() orders it as shared memory.
  std::byte* const topk_row =
      topk_in_global ? batch.and_topk_rows + std::size_t(row) * and_topk_row_stride(batch.k)
                     : nullptr;
  auto* top_score = topk_in_global ? reinterpret_cast<double*>(topk_row)
                                   : carve<double>(smem, L.top_score);
  auto* top_doc = topk_in_global
                      ? reinterpret_cast<std::uint32_t*>(
                            topk_row + 8 * std::size_t(topk_capacity(batch.k, kThreadsPerQuery)))
                      : carve<std::uint32_t>(smem, L.top_doc);
  std::uint32_t* my_docs = carve<std::uint32_t>(smem, L.warp_docs) + warp * kValuesPerBlock;
  std::uint32_t* my_freqs = carve<std::uint32_t>(smem, L.warp_freqs) + warp * kValuesPerBlock;
  std::uint32_t* my_stage = carve<std::uint32_t>(smem, L.warp_stage) + warp * kStageWords;
  const std::uint8_t* order = batch.and_order + q.and_order_begin;
  __shared__ unsigned stop_round, run_count;
  const unsigned topk_buffer = topk_capacity(batch.k, kThreadsPerQuery) - batch.k;
  // Work counters stay in registers until the end (shared 64-bit atomics per block and per
  // match cost more than the work they count); 32 bits each, since 64-bit ones cost the kernel
  // 16 registers and a resident block per SM (Nsight Compute: 80 registers, 36% occupancy).
  // One thread's share of one segment's work fits: a segment holds under 2^32 postings.
  unsigned my_postings = 0, my_blocks = 0, my_words = 0, my_matches = 0;

  topk_init(st, batch.k);
  if (tid < kNumCounters) counters[tid] = 0;
  const unsigned s = q.shortest;
  const TermDesc& sterm = terms[s];
  const std::uint64_t s_end = sterm.first_block + sterm.num_blocks;
  // Blocks of the shortest list that can hold docIDs of [doc_lo, doc_hi).
  const std::uint64_t s_begin =
      find_block(shard.block_last_docid, sterm.first_block, s_end, seg.doc_lo);
  // Every other list starts at its block that could hold doc_lo.
  for (unsigned t = tid; t < T; t += blockDim.x)
    cursor[t] = find_block(shard.block_last_docid, terms[t].first_block,
                           terms[t].first_block + terms[t].num_blocks, seg.doc_lo);
  const bool early = (q.flags & kEarlyTerminate) && q.gs_bound_factor >= 0;
  unsigned stopped_early = 0;
  __syncthreads();

  for (std::uint64_t b0 = s_begin; b0 < s_end; b0 += 2) {
    const std::uint32_t round_floor = block_floor(shard, sterm, b0);
    if (round_floor >= seg.doc_hi) break;  // uniform: the same loads on every thread
    // Early termination (paper 000, eq. 5): thread 0 decides for the block, since the shared
    // threshold can rise between two threads' reads.
    if (tid == 0) {
      stop_round = 0;
      double theta = load_theta(batch.theta_and + seg.query);
      if (st.full) {
        raise_theta(batch.theta_and + seg.query, st.threshold_score);
        if (st.threshold_score > theta) theta = st.threshold_score;
      }
      if (early && theta > 0.0) {
        const double bound = q.gs_bound_factor *
                             static_cast<double>(__ldg(shard.global_score + round_floor)) *
                             (1.0 + kBoundSlack) * batch.bound_scale;
        if (bound < theta) {
          stop_round = 1;
          counters[kRoundsSaved] += (s_end - b0 + 1) / 2;
        }
      }
    }
    __syncthreads();
    if (stop_round) {
      stopped_early = 1;
      break;
    }
    // Candidates: up to two blocks of the shortest list, contiguous in cand_doc.
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
          my_postings += n;
          ++my_blocks;
          my_words += words;
        }
      }
    }
    // Counts of the two blocks, from their headers (same on every thread).
    unsigned n0 = 0, n1 = 0;
    {
      n0 = read_header(__ldg(shard.postings + __ldg(shard.block_offsets + b0))).count;
      if (b0 + 1 < s_end) {
        n1 = read_header(__ldg(shard.postings + __ldg(shard.block_offsets + b0 + 1))).count;
      }
    }
    const unsigned nc = n0 + n1;
    __syncthreads();
    // Candidates outside the segment belong to a neighbouring segment.
    for (unsigned i = tid; i < kAndRoundCandidates; i += blockDim.x)
      alive[i] = i < nc && cand_doc[i] >= seg.doc_lo && cand_doc[i] < seg.doc_hi;
    __syncthreads();

    for (unsigned oi = 0; oi < T; ++oi) {
      const unsigned j = order[oi];
      if (j == s) continue;
      const TermDesc& tj = terms[j];
      const std::uint64_t j_end = tj.first_block + tj.num_blocks;
      const std::uint64_t j_begin = cursor[j];
      // Per candidate, the block of list j that could hold it (monotone in i).
      for (unsigned i = tid; i < nc; i += blockDim.x) {
        const std::uint64_t b = gallop_block(shard, j_begin, j_end, cand_doc[i]);
        bidx[i] = b;
        if (b == j_end) alive[i] = 0;
      }
      if (tid == 0) run_count = 0;
      __syncthreads();
      // A run: candidates sharing one block of list j. Its first candidate is its leader.
      for (unsigned i = tid; i < nc; i += blockDim.x) {
        if (bidx[i] != j_end && (i == 0 || bidx[i] != bidx[i - 1]))
          run_list[atomicAdd(&run_count, 1u)] = i;
      }
      __syncthreads();
      const unsigned runs = run_count;
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
          my_postings += n;
          ++my_blocks;
          my_words += words;
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
      const double norm = __ldg(shard.length_norm + d);
      double score = 0.0;
      for (unsigned t = 0; t < T; ++t)
        score = __dadd_rn(score, contribution(terms[t].weight, tf[tid * T + t], norm));
      score = __dadd_rn(score, __dmul_rn(q.static_weight, static_cast<double>(__ldg(shard.pagerank + d))));
      ++my_matches;
      topk_offer(st, top_score, top_doc, score, d);
    }
    topk_maybe_flush(st, top_score, top_doc, topk_buffer);
  }
  {
    unsigned long long v[4] = {my_postings, my_blocks, 4ull * my_words, my_matches};  // widened
#pragma unroll
    for (unsigned i = 0; i < 4; ++i) {
      for (unsigned d = 16; d > 0; d >>= 1) v[i] += __shfl_xor_sync(kFullMask, v[i], d);
    }
    if (lane == 0) {
      if (v[0]) atomicAdd(&counters[kPostings], v[0]);
      if (v[1]) atomicAdd(&counters[kBlocksDecoded], v[1]);
      if (v[2]) atomicAdd(&counters[kBytesRead], v[2]);
      if (v[3]) {
        atomicAdd(&counters[kAndMatches], v[3]);
        atomicAdd(&counters[kDocsScored], v[3]);
      }
    }
  }
  topk_flush(st, top_score, top_doc);  // its first barrier orders the counters before thread 0
  write_partial(st, top_score, top_doc, batch, row);
  if (tid == 0) {
    atomicAdd(&out.and_matches, counters[kAndMatches]);
    if (st.full) raise_theta(batch.theta_and + seg.query, st.threshold_score);
  }
  add_counters(out, counters, stopped_early);
}

}  // namespace

std::size_t and_kernel_shared_bytes(unsigned k, unsigned max_terms, bool topk_in_global) {
  return and_layout(k, max_terms, topk_in_global).total;
}

std::size_t and_topk_row_bytes(unsigned k) { return and_topk_row_stride(k); }

bool and_topk_in_global(unsigned k, unsigned max_terms, TopKMemory memory, std::size_t segments,
                        std::size_t queries) {
  if (memory != TopKMemory::kAuto) return memory == TopKMemory::kGlobal;
  const auto* kernel = reinterpret_cast<const void*>(ranked_and_kernel);
  const int threads = static_cast<int>(kThreadsPerQuery);
  const int in_shared =
      resident_blocks(kernel, threads, and_kernel_shared_bytes(k, max_terms, false));
  return resident_blocks(kernel, threads, and_kernel_shared_bytes(k, max_terms, true)) >
             in_shared &&
         segments > std::size_t(in_shared) * std::size_t(device_multiprocessors()) &&
         segments <= 2 * queries;
}

void launch_and_kernel(const ShardView& shard, const BatchPointers& batch, cudaStream_t stream) {
  if (batch.num_and_segments == 0) return;
  const std::size_t bytes =
      and_kernel_shared_bytes(batch.k, batch.max_terms, batch.and_topk_rows != nullptr);
  check_shared_budget(bytes, reinterpret_cast<const void*>(ranked_and_kernel), "ranked_and_kernel",
                      "lower k");
  ranked_and_kernel<<<batch.num_and_segments, kThreadsPerQuery, bytes, stream>>>(shard, batch);
  GPUSEARCH_CUDA_CHECK_LAUNCH("ranked_and_kernel");
}

void register_and_kernel(KernelRegistry& registry) {
  registry.add(reinterpret_cast<const void*>(ranked_and_kernel));
}

}  // namespace gpusearch::gpu
