// Several GPUs per ISN: a launch's answers as the per-range rows the lead GPU merges
// (gpu/topk_rows.hpp). The engine's hits are rows already (2 per query, k wide: HitOut has
// RangeHit's layout); this kernel writes each row's RowMeta from the query's QueryOut.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gpu/batch_layout.hpp"
#include "gpu/topk_rows.hpp"

namespace gpusearch::gpu {

// Bytes of the RowMeta of a launch of `queries` queries (two rows each).
inline std::size_t row_meta_bytes(std::size_t queries) {
  return 2 * queries * sizeof(RowMeta);
}

// meta[2q] = {out[q].num_hits, out[q].and_matches}, meta[2q + 1] = {out[q].num_or_hits, 0}.
void launch_pack_row_meta(const QueryOut* out, std::uint32_t queries, RowMeta* meta,
                          cudaStream_t stream);

}  // namespace gpusearch::gpu
