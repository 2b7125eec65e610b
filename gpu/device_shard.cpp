#include "gpu/device_shard.hpp"

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/scoring.hpp"
#include "gpu/query_kernels.hpp"

namespace gpusearch::gpu {

namespace {
template <typename T>
void upload(DeviceBuffer<T>& dst, std::span<const T> src) {
  dst.resize(src.size());
  if (!src.empty())
    GPUSEARCH_CUDA_CHECK(
        cudaMemcpy(dst.data(), src.data(), src.size_bytes(), cudaMemcpyHostToDevice));
}
// Postings of each global block (128, a list's last one fewer), from the term directory.
std::vector<std::uint32_t> block_counts(const ShardIndex& shard) {
  std::vector<std::uint32_t> counts(shard.block_last_docid().size(), 0);
  for (TermId t = 0; t < shard.num_terms(); ++t) {
    const TermInfo& ti = shard.term(t);
    for (std::uint32_t i = 0; i < ti.num_blocks; ++i)
      counts[ti.first_block + i] = std::min<std::uint32_t>(kBlockSize, ti.df_shard - i * kBlockSize);
  }
  return counts;
}
}  // namespace

std::uint64_t decoded_layout_bytes(const ShardIndex& shard) {
  std::uint64_t postings = 0;
  for (TermId t = 0; t < shard.num_terms(); ++t) postings += shard.term(t).df_shard;
  return postings * (sizeof(std::uint32_t) + sizeof(float)) +
         (shard.block_last_docid().size() + 1) * sizeof(std::uint64_t);
}

DeviceShard::DeviceShard(const ShardIndex& shard, PostingLayout layout) : layout_(layout) {
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
  if (layout == PostingLayout::kDecoded) {
    const auto expand_start = std::chrono::steady_clock::now();
    const std::vector<std::uint32_t> counts = block_counts(shard);
    const std::uint64_t blocks = counts.size();
    std::vector<std::uint64_t> begin(blocks + 1, 0);
    std::vector<std::uint32_t> floors(blocks, 0);
    for (std::uint64_t b = 0; b < blocks; ++b) begin[b + 1] = begin[b] + counts[b];
    for (TermId t = 0; t < shard.num_terms(); ++t) {
      const TermInfo& ti = shard.term(t);
      for (std::uint32_t i = 0; i < ti.num_blocks; ++i)
        floors[ti.first_block + i] = shard.block_floor(ti, ti.first_block + i);
    }
    upload(block_posting_begin_, std::span<const std::uint64_t>(begin));
    DeviceBuffer<std::uint32_t> floors_on_device;
    upload(floors_on_device, std::span<const std::uint32_t>(floors));
    decoded_docs_.resize(begin[blocks]);
    decoded_impacts_.resize(begin[blocks]);
    DeviceBuffer<unsigned> mismatches(1);
    GPUSEARCH_CUDA_CHECK(cudaMemset(mismatches.data(), 0, sizeof(unsigned)));
    view_.block_posting_begin = block_posting_begin_.data();
    launch_expand_postings(view_, floors_on_device.data(), blocks, decoded_docs_.data(),
                           decoded_impacts_.data(), mismatches.data(), nullptr);
    unsigned bad = 0;
    GPUSEARCH_CUDA_CHECK(cudaMemcpy(&bad, mismatches.data(), sizeof bad, cudaMemcpyDeviceToHost));
    if (bad != 0)
      throw Error(fmt::format("decoded posting layout: {} blocks' counts disagree with the term "
                              "directory (corrupt index?)",
                              bad));
    view_.decoded_docs = decoded_docs_.data();
    view_.decoded_impacts = decoded_impacts_.data();
    expand_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - expand_start).count();
  }
  // A pageable cudaMemcpy may return before its DMA lands: the uploads are done before any
  // kernel on the engine's non-blocking streams reads them.
  GPUSEARCH_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  upload_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::uint64_t DeviceShard::device_bytes() const {
  return postings_.bytes() + block_offsets_.bytes() + block_last_docid_.bytes() +
         block_max_impact_.bytes() + length_norm_.bytes() + length_norm_f_.bytes() + pagerank_.bytes() +
         global_score_.bytes() + decoded_docs_.bytes() + decoded_impacts_.bytes() +
         block_posting_begin_.bytes();
}

nlohmann::json DeviceShard::to_json() const {
  return {{"device_bytes", device_bytes()},
          {"postings_bytes", postings_.bytes()},
          {"num_blocks", num_blocks()},
          {"num_docs", view_.num_docs},
          {"upload_seconds", upload_seconds_},
          {"posting_layout", layout_ == PostingLayout::kDecoded ? "decoded" : "compressed"},
          {"decoded_bytes", decoded_docs_.bytes() + decoded_impacts_.bytes() +
                                block_posting_begin_.bytes()},
          {"expand_seconds", expand_seconds_}};
}

}  // namespace gpusearch::gpu
