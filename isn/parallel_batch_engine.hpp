// Runs the queries of a batch in parallel (oneTBB): the batch is split into chunks and each chunk
// goes to the inner engine's search on a sub-span. Engines must then be safe to call from
// several threads at once on const shard data; the reference engine is (per-thread accumulators,
// read-only mmap), and so must every CPU engine be.
#pragma once

#include <memory>
#include <string>

#include "common/query_engine.hpp"

namespace gpusearch {

class ParallelBatchEngine final : public QueryEngine {
 public:
  // chunk_queries: queries per task; small chunks balance skewed query costs.
  ParallelBatchEngine(std::unique_ptr<QueryEngine> inner, std::size_t chunk_queries = 4);
  std::string_view name() const override { return name_; }
  bool runs_batch_in_parallel() const override { return true; }
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;
  void prepare(const SearchParams& params) override { inner_->prepare(params); }

 private:
  std::unique_ptr<QueryEngine> inner_;
  std::size_t chunk_queries_;
  std::string name_;
};

// `engine` as it is when it runs a batch in parallel already, else wrapped in a
// ParallelBatchEngine (so no engine runs under two parallel loops).
std::unique_ptr<QueryEngine> run_batches_in_parallel(std::unique_ptr<QueryEngine> engine,
                                                     std::size_t chunk_queries = 4);

}  // namespace gpusearch
