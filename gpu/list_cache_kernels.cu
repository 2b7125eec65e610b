// The list cache's one kernel: re-pointing a lane's block-offset table at the lists a batch
// shipped (gpu/device_list_cache.hpp). One thread per table entry.
#include "gpu/list_cache_kernels.hpp"

#include "gpu/cuda_util.hpp"

namespace gpusearch::gpu {

namespace {

__global__ void scatter_offsets_kernel(std::uint64_t* table, const std::uint64_t* pairs,
                                       std::uint64_t count, std::uint64_t base) {
  const std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) table[pairs[2 * i]] = base + pairs[2 * i + 1];
}

__global__ void move_words_kernel(std::uint32_t* pool, const std::uint32_t* from,
                                  const WordMove* moves) {
  const WordMove m = moves[blockIdx.x];
  for (std::uint64_t i = threadIdx.x; i < m.words; i += blockDim.x) pool[m.dst + i] = from[m.src + i];
}

__global__ void shift_offsets_kernel(std::uint64_t* table, const std::uint64_t* shifts) {
  const std::uint64_t first = shifts[3 * blockIdx.x], slots = shifts[3 * blockIdx.x + 1],
                      delta = shifts[3 * blockIdx.x + 2];
  for (std::uint64_t i = threadIdx.x; i < slots; i += blockDim.x) table[first + i] += delta;
}

}  // namespace

void launch_shift_offsets(std::uint64_t* table, const std::uint64_t* shifts, std::uint64_t count,
                          cudaStream_t stream) {
  if (count == 0) return;
  shift_offsets_kernel<<<static_cast<unsigned>(count), 128, 0, stream>>>(table, shifts);
  GPUSEARCH_CUDA_CHECK_LAUNCH("shift_offsets_kernel");
}

void launch_move_words(std::uint32_t* pool, const std::uint32_t* from, const WordMove* moves,
                       std::uint64_t count, cudaStream_t stream) {
  if (count == 0) return;
  move_words_kernel<<<static_cast<unsigned>(count), 256, 0, stream>>>(pool, from, moves);
  GPUSEARCH_CUDA_CHECK_LAUNCH("move_words_kernel");
}

void launch_scatter_offsets(std::uint64_t* table, const std::uint64_t* slot_offset_pairs,
                            std::uint64_t count, std::uint64_t base, cudaStream_t stream) {
  if (count == 0) return;
  constexpr unsigned kThreads = 256;
  const std::uint64_t blocks = (count + kThreads - 1) / kThreads;
  scatter_offsets_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      table, slot_offset_pairs, count, base);
  GPUSEARCH_CUDA_CHECK_LAUNCH("scatter_offsets_kernel");
}

}  // namespace gpusearch::gpu
