// What every segment kernel shares: carving named shared-memory layouts, per-block work
// counters, and writing a segment's local top-k to its partial-result row and its counters to
// the query's QueryOut.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/batch_layout.hpp"
#include "gpu/device_topk.cuh"
#include "gpu/query_kernels.hpp"

namespace gpusearch::gpu {

__host__ __device__ constexpr std::size_t align16(std::size_t x) { return (x + 15) & ~std::size_t(15); }

// Capacity of a block's top-k arrays: k plus a buffer of newcomers, as a power of two.
__host__ __device__ constexpr unsigned topk_capacity(unsigned k, unsigned buffer) {
  unsigned c = 1;
  while (c < k + buffer) c <<= 1;
  return c;
}

template <typename T>
__device__ __forceinline__ T* carve(char* base, std::size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

// Work counters of one block, in shared memory, summed into the query's QueryOut at the end.
enum Counter : unsigned {
  kPostings = 0, kBlocksDecoded, kBlocksSkipped, kDocsScored, kAndMatches, kBytesRead,
  kRoundsSaved, kScratch, kNumCounters
};

// Whether a query's OR phase runs: it is asked for, and in and-or only where the AND answer came
// up short. The OR segment kernels and the merge kernel decide by this one test, so the merge
// never reads a row the segment kernels left unwritten.
__device__ __forceinline__ bool or_phase_runs(const QueryDesc& q, const QueryOut& out, unsigned k) {
  return (q.flags & kRunOr) && !((q.flags & kOrOnlyIfAndShort) && out.and_matches >= k);
}

// The segment's local top-k (entries [0, n_top) of score/doc, best first) into its row.
__device__ __forceinline__ void write_partial(const TopKState& st, const double* score,
                                              const std::uint32_t* doc, const BatchPointers& batch,
                                              std::uint32_t row) {
  HitOut* out = batch.partial_hits + std::size_t(row) * batch.k;
  for (unsigned i = threadIdx.x; i < st.n_top; i += blockDim.x) out[i] = {score[i], doc[i], 0};
  if (threadIdx.x == 0) batch.partial_count[row] = st.n_top;
}

// Thread 0 adds the block's counters to the query's (segments of one query run concurrently).
__device__ __forceinline__ void add_counters(QueryOut& out, const unsigned long long* c,
                                             unsigned early_terminated) {
  if (threadIdx.x != 0) return;
  atomicAdd(&out.postings_decoded, c[kPostings]);
  atomicAdd(&out.blocks_decoded, c[kBlocksDecoded]);
  atomicAdd(&out.blocks_skipped, c[kBlocksSkipped]);
  atomicAdd(&out.docs_scored, c[kDocsScored]);
  atomicAdd(&out.bytes_read, c[kBytesRead]);
  atomicAdd(&out.rounds_saved, c[kRoundsSaved]);
  if (early_terminated) atomicOr(&out.early_terminated, 1u);
}

}  // namespace gpusearch::gpu
