// Feature extraction on the GPU (paper 004, 3.3): the FSM over each candidate's token stream, one
// thread per document and every candidate of a request in one launch. The per-document FSM is
// common/ranker/document_features.hpp, the function the CPU twin runs.
#include "gpu/cuda_util.hpp"
#include "gpu/ranker_kernels.hpp"

namespace gpusearch::gpu {

namespace {

__global__ void extract_features_kernel(
    ranker::FeatureParams params, const ranker::FeatureQuery* __restrict__ queries,
    const std::uint32_t* __restrict__ terms, const float* __restrict__ idf,
    const ranker::FeatureDoc* __restrict__ docs, std::uint32_t num_docs,
    const std::uint8_t* __restrict__ streams, float* __restrict__ rows) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= num_docs) return;
  const ranker::FeatureDoc doc = docs[i];
  const ranker::FeatureQuery query = queries[doc.query];
  ranker::extract_document_features(params, query, terms, idf, doc, streams + doc.stream_offset,
                                    rows + std::size_t(i) * ranker::kFeatureStride);
}

}  // namespace

void launch_extract_features(const ranker::FeatureParams& params,
                             const ranker::FeatureQuery* queries, const std::uint32_t* terms,
                             const float* idf, const ranker::FeatureDoc* docs,
                             std::uint32_t num_docs, const std::uint8_t* streams, float* rows,
                             cudaStream_t stream) {
  if (num_docs == 0) return;
  // 128 threads: small blocks spread a 10,000-document request over every multiprocessor.
  constexpr unsigned kThreads = 128;
  extract_features_kernel<<<(num_docs + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      params, queries, terms, idf, docs, num_docs, streams, rows);
  GPUSEARCH_CUDA_CHECK_LAUNCH("extract_features_kernel");
}

}  // namespace gpusearch::gpu
