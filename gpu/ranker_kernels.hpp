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

// Paper 004, 3.3: one warp per unit runs the feature FSM over a stream or a segment of one;
// rows are num_docs x kFeatureStride. A unit is a whole stream (segments == 1) or segment
// `segment` of a stream cut into `segments` of segment_bytes each, whose walk state is
// segment_states[state] (state - segment: the stream's first).
struct FeatureUnit {
  std::uint32_t doc = 0, segment = 0, segments = 1, state = 0;
};
struct FeatureLaunch {
  ranker::FeatureParams params;
  const ranker::FeatureQuery* queries = nullptr;
  const std::uint32_t* terms = nullptr;
  const float* idf = nullptr;
  const ranker::FeatureDoc* docs = nullptr;
  const std::uint8_t* streams = nullptr;
  float* rows = nullptr;
  const FeatureUnit* units = nullptr;  // every stream's units
  std::uint32_t num_units = 0;
  const FeatureUnit* segmented_units = nullptr;  // the units of streams of several segments
  std::uint32_t num_segmented_units = 0;
  void* segment_states = nullptr;          // feature_segment_state_bytes() each
  std::uint32_t* segment_sync = nullptr;   // 2 per segment state, zeroed before the launch
  std::uint32_t segment_bytes = 4096;
};
// Bytes of one segment's walk state.
std::size_t feature_segment_state_bytes();
// Launches the walks (two kernels when some stream has several segments), stream-ordered.
// kShuffle-decoding assembles each token's code by shuffles instead of re-reading its bytes.
void launch_extract_features(const FeatureLaunch& launch, bool shuffle_decode,
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
