#include "gpu/device_shard.hpp"

#include <chrono>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/scoring.hpp"

namespace gpusearch::gpu {

namespace {
template <typename T>
void upload(DeviceBuffer<T>& dst, std::span<const T> src) {
  dst.resize(src.size());
  if (!src.empty())
    GPUSEARCH_CUDA_CHECK(
        cudaMemcpy(dst.data(), src.data(), src.size_bytes(), cudaMemcpyHostToDevice));
}
}  // namespace

DeviceShard::DeviceShard(const ShardIndex& shard) {
  const auto start = std::chrono::steady_clock::now();
  upload(postings_, shard.postings());
  upload(block_offsets_, shard.block_offsets());
  upload(block_last_docid_, shard.block_last_docid());
  upload(block_max_impact_, shard.block_max_impact());
  // The BM25 length normalization in double, by the same function the reference engine uses.
  const IndexParams& p = shard.params();
  std::vector<double> norm(shard.num_docs());
  const auto lengths = shard.doc_lengths();
  for (DocId d = 0; d < shard.num_docs(); ++d)
    norm[d] = length_norm(p.bm25, lengths[d], p.collection.avg_doc_length);
  upload(length_norm_, std::span<const double>(norm));
  const std::vector<float> norm_f(norm.begin(), norm.end());
  upload(length_norm_f_, std::span<const float>(norm_f));
  upload(pagerank_, shard.pagerank());
  upload(global_score_, shard.global_scores());
  view_ = ShardView{postings_.data(),       block_offsets_.data(),   block_last_docid_.data(),
                    block_max_impact_.data(), length_norm_.data(),     length_norm_f_.data(),
                    pagerank_.data(),         global_score_.data(),    shard.num_docs()};
  upload_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::uint64_t DeviceShard::device_bytes() const {
  return postings_.bytes() + block_offsets_.bytes() + block_last_docid_.bytes() +
         block_max_impact_.bytes() + length_norm_.bytes() + length_norm_f_.bytes() + pagerank_.bytes() +
         global_score_.bytes();
}

nlohmann::json DeviceShard::to_json() const {
  return {{"device_bytes", device_bytes()},
          {"postings_bytes", postings_.bytes()},
          {"num_blocks", num_blocks()},
          {"num_docs", view_.num_docs},
          {"upload_seconds", upload_seconds_}};
}

}  // namespace gpusearch::gpu
