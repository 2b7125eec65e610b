#include "gpu/range_rows_kernel.hpp"

#include <cstddef>

#include "gpu/cuda_util.hpp"

namespace gpusearch::gpu {

// The merge reads the engine's hits in place as RangeHit rows.
static_assert(sizeof(HitOut) == sizeof(RangeHit) &&
              offsetof(HitOut, score) == offsetof(RangeHit, score) &&
              offsetof(HitOut, doc) == offsetof(RangeHit, doc));

namespace {

__global__ void __launch_bounds__(128)
    pack_row_meta_kernel(const QueryOut* out, std::uint32_t queries, RowMeta* meta) {
  const std::uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= queries) return;
  const QueryOut& o = out[q];
  meta[2 * std::size_t(q)] = RowMeta{o.num_hits, 0, o.and_matches};
  meta[2 * std::size_t(q) + 1] = RowMeta{o.num_or_hits, 0, 0};
}

}  // namespace

void launch_pack_row_meta(const QueryOut* out, std::uint32_t queries, RowMeta* meta,
                          cudaStream_t stream) {
  if (queries == 0) return;
  pack_row_meta_kernel<<<(queries + 127) / 128, 128, 0, stream>>>(out, queries, meta);
  GPUSEARCH_CUDA_CHECK_LAUNCH("pack_row_meta_kernel");
}

}  // namespace gpusearch::gpu
