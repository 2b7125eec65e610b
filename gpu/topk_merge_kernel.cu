// A query's answer from its segments' local top-k rows (one thread block per query): every
// row's entries are offered to the block's top-k (device_topk.cuh), which keeps the best k in
// the contract's order (score descending, then docID ascending). A query with one segment is a
// copy through the same path.
#include "gpu/cuda_util.hpp"
#include "gpu/kernel_limits.hpp"
#include "gpu/segment_output.cuh"

namespace gpusearch::gpu {

namespace {

constexpr unsigned kMergeThreads = 256;
constexpr unsigned kTopKBuffer = 2 * kMergeThreads;

struct MergeLayout {
  std::size_t state, top_score, top_doc, total;
};
__host__ __device__ constexpr MergeLayout merge_layout(unsigned k) {
  MergeLayout l{};
  std::size_t o = 0;
  l.state = o; o = align16(o + sizeof(TopKState) + 16);
  const unsigned cap = topk_capacity(k, kTopKBuffer);
  l.top_score = o; o = align16(o + cap * 8);
  l.top_doc = o; o = align16(o + cap * 4);
  l.total = o;
  return l;
}

__global__ void __launch_bounds__(kMergeThreads)
    topk_merge_kernel(BatchPointers batch, MergePhase phase) {
  extern __shared__ __align__(16) char smem[];
  const QueryDesc q = batch.queries[blockIdx.x];
  QueryOut& out = batch.out[q.slot];
  const bool or_phase = phase == MergePhase::kOr;
  // The same tests as the segment kernels: rows they did not write are never read.
  if (!or_phase && !(q.flags & kRunAnd)) return;
  if (or_phase && !or_phase_runs(q, out, batch.k)) return;
  const std::uint32_t first = or_phase ? q.or_segment_begin : q.and_segment_begin;
  const std::uint32_t rows = or_phase ? q.or_segment_count : q.and_segment_count;
  const MergeLayout L = merge_layout(batch.k);
  auto& st = *carve<TopKState>(smem, L.state);
  auto* top_score = carve<double>(smem, L.top_score);
  auto* top_doc = carve<std::uint32_t>(smem, L.top_doc);
  topk_init(st, batch.k);
  __syncthreads();
  for (std::uint32_t r = first; r < first + rows; ++r) {
    const unsigned n = batch.partial_count[r];
    const HitOut* row = batch.partial_hits + std::size_t(r) * batch.k;
    for (unsigned base = 0; base < n; base += blockDim.x) {
      const unsigned i = base + threadIdx.x;
      if (i < n) topk_offer(st, top_score, top_doc, row[i].score, row[i].doc);
      topk_maybe_flush(st, top_score, top_doc, kTopKBuffer);
    }
  }
  topk_flush(st, top_score, top_doc);
  // and-or's second answer goes after the first: hits [k, 2k).
  const bool second_answer = or_phase && (q.flags & kOrOnlyIfAndShort);
  HitOut* hits = batch.hits + std::size_t(q.slot) * 2 * batch.k + (second_answer ? batch.k : 0);
  for (unsigned i = threadIdx.x; i < st.n_top; i += blockDim.x)
    hits[i] = {top_score[i], top_doc[i], 0};
  if (threadIdx.x == 0) {
    if (second_answer) out.num_or_hits = st.n_top;
    else out.num_hits = st.n_top;
  }
}

}  // namespace

void launch_topk_merge(const BatchPointers& batch, MergePhase phase, cudaStream_t stream) {
  if (batch.num_queries == 0) return;
  const std::size_t bytes = merge_layout(batch.k).total;
  check_shared_budget(bytes, reinterpret_cast<const void*>(topk_merge_kernel), "topk_merge_kernel",
                      "lower k");
  topk_merge_kernel<<<batch.num_queries, kMergeThreads, bytes, stream>>>(batch, phase);
  GPUSEARCH_CUDA_CHECK_LAUNCH("topk_merge_kernel");
}

void register_topk_merge_kernel(KernelRegistry& registry) {
  registry.add(reinterpret_cast<const void*>(topk_merge_kernel));
}

}  // namespace gpusearch::gpu
