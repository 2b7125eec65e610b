// Launchers of the ranker kernels (gpu/ranker_features_kernel.cu, gpu/ranker_transform_kernel.cu):
// plain functions over device pointers, stream-ordered, for gpu/ranker_engine.cpp. The kernels
// run the host/device functions of common/ranker/, the CPU twin's own code.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/ranker/document_features.hpp"
#include "common/ranker/model_layout.hpp"

namespace gpusearch::gpu {

// Paper 004, 3.3: one thread per candidate runs the feature FSM over its stream; rows are
// num_docs x kFeatureStride.
void launch_extract_features(const ranker::FeatureParams& params,
                             const ranker::FeatureQuery* queries, const std::uint32_t* terms,
                             const float* idf, const ranker::FeatureDoc* docs,
                             std::uint32_t num_docs, const std::uint8_t* streams, float* rows,
                             cudaStream_t stream);

// Paper 004, 3.4: one thread per (row, input); inputs is rows x padded_inputs. padded_inputs is a
// multiple of 32 and every warp holds one group's transforms.
void launch_transforms(const ranker::ModelInputTransform* transforms, std::uint32_t padded_inputs,
                       const ranker::TreeNode* nodes, const float* rows, std::size_t stride,
                       std::uint32_t num_rows, float* inputs, cudaStream_t stream);
// The same, the inputs as double (the net's products are double).
void launch_transforms(const ranker::ModelInputTransform* transforms, std::uint32_t padded_inputs,
                       const ranker::TreeNode* nodes, const float* rows, std::size_t stride,
                       std::uint32_t num_rows, double* inputs, cudaStream_t stream);

// h[r][o] = activation(float(h[r][o] + bias[o])) over num_rows x outputs (after a layer's GEMM),
// in place; with `out_float`, written there as float instead (the last layer: the scores).
void launch_bias_activation(double* h, const float* bias, std::uint32_t outputs,
                            std::uint32_t num_rows, ranker::Activation activation,
                            float* out_float, cudaStream_t stream);

}  // namespace gpusearch::gpu
