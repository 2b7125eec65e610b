// The CPU twin of an ISN with several GPUs (--gpus-per-isn G): the shard's documents are split
// into G docID ranges (gpu/topk_rows.hpp, split_doc_ranges), each range answers the batch as its
// GPU would (here the CPU engine over the range), the per-range top-k rows are packed in the
// layout the GPUs exchange through NCCL, merged by the very merge the lead GPU runs
// (merge_range_rows), and unpacked into one ShardResult per query. Its answers equal the
// reference's for every G (tests/unit/range_merge_test.cpp), which is what makes the GPU path's
// merge exact.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/query_engine.hpp"
#include "common/shard_index.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"

namespace gpusearch {

class RangeSplitEngine final : public QueryEngine {
 public:
  RangeSplitEngine(const ShardIndex& shard, std::uint32_t shard_id, unsigned ranges);
  std::string_view name() const override { return name_; }
  bool runs_batch_in_parallel() const override { return true; }
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;
  unsigned ranges() const { return unsigned(first_doc_.size() - 1); }

 private:
  const ShardIndex& shard_;
  std::uint32_t shard_id_;
  cpu::CpuEngine engine_;
  std::vector<std::uint32_t> first_doc_;  // G + 1 range boundaries
  std::string name_;
};

}  // namespace gpusearch
