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

}  // namespace gpusearch
