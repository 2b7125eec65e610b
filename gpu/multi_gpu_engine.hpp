// Several GPUs per ISN (--gpus-per-isn G; paper 002's multi-GPU batches): the ISN's shard is
// split into G docID ranges (split_doc_ranges, gpu/topk_rows.hpp), one per GPU; every GPU holds
// the shard's image and answers each batch over its range only (a GpuEngine restricted to the
// range); the per-range top-k rows stay in device memory, are gathered into the lead GPU through
// NCCL and merged there (gpu/nccl_topk_merge.hpp), and one copy of the merged rows comes back to
// the host. Exact: the top k of the shard is among the union of the ranges' top k, and and-or's
// AND matches add up across ranges (each exact below k). The merge's CPU twin is
// isn/range_split_engine.hpp (tests/unit/range_merge_test.cpp); at G = 1 this engine runs the
// same path on one GPU (tests/gpu/multi_gpu_engine_test.cpp).
//
// MultiGpuSplit::kQueries (--gpu-split queries) splits the batch's queries instead: every GPU
// answers its share of the queries over the whole shard, as the one-GPU engine does, and nothing
// is merged. A GPU's batch time is per-query work (planning, packing, launches, copies: about
// 2 ms a batch of 1,024 on an H200) plus work per document (about 1 ms per million documents);
// a docID split repeats the first on every GPU, a query split divides both (H200 x2, session 44,
// tests/benchmarks/NOTES-multi-gpu.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/query_engine.hpp"
#include "common/shard_index.hpp"
#include "gpu/gpu_engine.hpp"

namespace gpusearch::gpu {

// How an ISN's GPUs share its batches: docID ranges merged through NCCL, or the queries.
enum class MultiGpuSplit { kDocRanges, kQueries };

class MultiGpuEngine final : public QueryEngine {
 public:
  // devices[0] is the lead GPU (it merges); each device once, at most kMaxRangesPerIsn, and no
  // more than the shard's documents. `options` apply to every range's engine (its device and
  // range are set here). Throws InputError naming --gpus-per-isn for a device set this machine
  // cannot give, CudaError or NcclError when CUDA or NCCL fails.
  MultiGpuEngine(const ShardIndex& shard, std::uint32_t shard_id, std::vector<int> devices,
                 GpuEngineOptions options = {}, MultiGpuSplit split = MultiGpuSplit::kDocRanges);
  ~MultiGpuEngine() override;
  std::string_view name() const override { return name_; }
  bool runs_batch_in_parallel() const override { return true; }
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;
  nlohmann::json stats() const override;
  // Queries the kernels do not take (more than kMaxGpuTerms terms) go to this engine over the
  // whole shard; without one, the reference engine answers them.
  void set_host_engine(std::unique_ptr<QueryEngine> engine);
  unsigned ranges() const { return unsigned(engines_.size()); }  // the GPUs
  MultiGpuSplit split() const { return split_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  // The query split's part of search(): queries[order[j]] for j in [begin, end), the GPU
  // queries in cost order, shared out so that every GPU gets about the same cost.
  void search_split_queries(std::span<const Query> queries, const SearchParams& params,
                            std::span<ShardResult> out, const std::vector<std::size_t>& order,
                            const std::vector<std::uint64_t>& cost);

  std::vector<std::unique_ptr<GpuEngine>> engines_;
  std::string name_;
  MultiGpuSplit split_ = MultiGpuSplit::kDocRanges;
};

}  // namespace gpusearch::gpu
