#include "isn/parallel_batch_engine.hpp"

#include <algorithm>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace gpusearch {

ParallelBatchEngine::ParallelBatchEngine(std::unique_ptr<QueryEngine> inner,
                                         std::size_t chunk_queries)
    : inner_(std::move(inner)),
      chunk_queries_(std::max<std::size_t>(1, chunk_queries)),
      name_(std::string(inner_->name())) {}

void ParallelBatchEngine::search(std::span<const Query> queries, const SearchParams& params,
                                 std::span<ShardResult> out) {
  if (queries.size() <= chunk_queries_) {
    inner_->search(queries, params, out);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, queries.size(), chunk_queries_),
                    [&](const tbb::blocked_range<std::size_t>& r) {
                      inner_->search(queries.subspan(r.begin(), r.size()), params,
                                     out.subspan(r.begin(), r.size()));
                    });
}

std::unique_ptr<QueryEngine> run_batches_in_parallel(std::unique_ptr<QueryEngine> engine,
                                                     std::size_t chunk_queries) {
  if (engine->runs_batch_in_parallel()) return engine;
  return std::make_unique<ParallelBatchEngine>(std::move(engine), chunk_queries);
}

}  // namespace gpusearch
