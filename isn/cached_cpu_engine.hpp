// The CPU twin of the GPU engine's list-cache path (gpu/device_list_cache, paper 000, 3.4): the
// same directory, the same batches (common/list_cache: what ships, each query's horizon), the
// part below the horizon answered over the lists the GPU would see (CpuEngine::search_range),
// the same finality test, and the same completion (CpuEngine::resume from the horizon). It
// proves on a machine without a GPU that truncating lists to what a batch holds and completing
// on the CPU gives the reference's answers for every plan, budget, mode and scoring.
#pragma once

#include <cstdint>
#include <memory>

#include "common/list_cache.hpp"
#include "common/query_engine.hpp"
#include "common/shard_index.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"

namespace gpusearch {

class CachedCpuEngine final : public QueryEngine {
 public:
  CachedCpuEngine(const ShardIndex& shard, std::uint32_t shard_id, const ListCacheDirectory& cache,
                  ListBatchOptions batching, cpu::CpuEngineOptions cpu_options = {});
  std::string_view name() const override { return "cpu-list-cache"; }
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;
  nlohmann::json stats() const override;
  const ListCacheCounters& counters() const { return counters_; }
  // Tests only: scales the finality test's bound (1 keeps it safe).
  void set_bound_scale(double scale) { bound_scale_ = scale; }

 private:
  const ShardIndex& shard_;
  const ListCacheDirectory& cache_;
  ListBatchOptions batching_;
  cpu::CpuEngine cpu_;
  ListCacheCounters counters_;
  double bound_scale_ = 1.0;
};

}  // namespace gpusearch
