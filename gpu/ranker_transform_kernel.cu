// Model-input transforms on the GPU (paper 004, 3.4, Figure 3.10): one thread per (document,
// input). The compiler grouped the inputs by type and padded each group to whole warps, so the
// 32 threads of a warp run one kind of transform (no divergence between kinds) for one document,
// reading one feature row. Decision-tree inputs walk their tree (Figure 3.7) in the same launch.
// And the bias and activation that follow each of the net's cuBLAS products (3.5.1).
#include "gpu/cuda_util.hpp"
#include "gpu/ranker_kernels.hpp"

namespace gpusearch::gpu {

namespace {

constexpr unsigned kRowsPerBlock = 8;

template <typename Out>
__global__ void transforms_kernel(const ranker::ModelInputTransform* __restrict__ transforms,
                                  std::uint32_t padded_inputs,
                                  const ranker::TreeNode* __restrict__ nodes,
                                  const float* __restrict__ rows, std::size_t stride,
                                  std::uint32_t num_rows, Out* __restrict__ inputs) {
  const std::uint32_t input = blockIdx.x * ranker::kWarpSize + threadIdx.x;
  const ranker::ModelInputTransform t = transforms[input];
  for (std::uint32_t row = blockIdx.y * kRowsPerBlock + threadIdx.y; row < num_rows;
       row += gridDim.y * kRowsPerBlock)
    inputs[std::size_t(row) * padded_inputs + input] =
        Out(ranker::apply_transform(t, nodes, rows + std::size_t(row) * stride));
}

__global__ void bias_activation_kernel(double* __restrict__ h, const float* __restrict__ bias,
                                       std::uint32_t outputs, std::size_t n,
                                       ranker::Activation activation,
                                       float* __restrict__ out_float) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float v = ranker::activate(activation, float(h[i] + double(bias[i % outputs])));
    if (out_float)
      out_float[i] = v;
    else
      h[i] = v;
  }
}

template <typename Out>
void launch_transforms_as(const ranker::ModelInputTransform* transforms,
                          std::uint32_t padded_inputs, const ranker::TreeNode* nodes,
                          const float* rows, std::size_t stride, std::uint32_t num_rows,
                          Out* inputs, cudaStream_t stream) {
  if (num_rows == 0 || padded_inputs == 0) return;
  const unsigned row_blocks = (num_rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const dim3 grid(padded_inputs / ranker::kWarpSize, row_blocks < 65535 ? row_blocks : 65535);
  const dim3 block(ranker::kWarpSize, kRowsPerBlock);
  transforms_kernel<<<grid, block, 0, stream>>>(transforms, padded_inputs, nodes, rows, stride,
                                                num_rows, inputs);
  GPUSEARCH_CUDA_CHECK_LAUNCH("transforms_kernel");
}

}  // namespace

void launch_transforms(const ranker::ModelInputTransform* transforms, std::uint32_t padded_inputs,
                       const ranker::TreeNode* nodes, const float* rows, std::size_t stride,
                       std::uint32_t num_rows, float* inputs, cudaStream_t stream) {
  launch_transforms_as(transforms, padded_inputs, nodes, rows, stride, num_rows, inputs, stream);
}

void launch_transforms(const ranker::ModelInputTransform* transforms, std::uint32_t padded_inputs,
                       const ranker::TreeNode* nodes, const float* rows, std::size_t stride,
                       std::uint32_t num_rows, double* inputs, cudaStream_t stream) {
  launch_transforms_as(transforms, padded_inputs, nodes, rows, stride, num_rows, inputs, stream);
}

void launch_bias_activation(double* h, const float* bias, std::uint32_t outputs,
                            std::uint32_t num_rows, ranker::Activation activation,
                            float* out_float, cudaStream_t stream) {
  const std::size_t n = std::size_t(num_rows) * outputs;
  if (n == 0) return;
  constexpr unsigned kThreads = 256;
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  bias_activation_kernel<<<unsigned(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(
      h, bias, outputs, n, activation, out_float);
  GPUSEARCH_CUDA_CHECK_LAUNCH("bias_activation_kernel");
}

}  // namespace gpusearch::gpu
