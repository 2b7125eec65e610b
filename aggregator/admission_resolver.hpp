// The admission's per-query work: a batch's arrived query texts resolved against the vocabulary
// (the dictionary's look-ups, then each term's df for the query's cost), on one thread or, for a
// large batch, on a few. Just in time the next batch's 1,024 queries are admitted after the
// first ISN has answered, on the cycle's critical path: 1.4-1.6 ms of a 15-17 ms cycle on the
// H200 host against about 0.4 ms for the same work on a warm, idle build machine
// (NOTES-cluster.md, session 43). What is left in the admission loop (sequence numbers, the
// result cache, the batcher) stays on the MPI thread in arrival order.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <tbb/task_arena.h>

#include "aggregator/query_source.hpp"
#include "common/query.hpp"

namespace gpusearch {

class TermDictionary;

struct ResolvedQuery {
  bool ok = false;  // false: `problem` says why the query cannot run
  Query query;
  QueryProblem problem;
  double cost = std::numeric_limits<double>::max();  // the smallest df of its terms
};

class AdmissionResolver {
 public:
  // Each thread takes at least this many queries: a smaller batch resolves on the caller's.
  static constexpr std::size_t kMinQueriesPerThread = 32;
  // --admission-threads auto: how many threads resolve a batch of `batch_size` queries on a
  // machine of `cores` usable cores. One below 128 queries (a batch of 64 resolves in about
  // 0.06 ms; on two threads its p50 latency did not fall on the H100 host, session 50: 1.31 of
  // compute against 1.26). From 128 on, a quarter of the cores, at most 4: the ISNs keep the
  // rest, and a 2-core machine keeps one (there 4 threads took the ISNs' cores). At batch 1,024
  // on 16 cores 4 threads gained 3-7% (sessions 45, 50).
  static unsigned auto_threads(std::size_t batch_size, std::size_t cores);
  // `threads` 1: the caller's thread only (no arena).
  // The query's cost: the smallest df_global of its terms, from the dictionary.
  AdmissionResolver(const TermDictionary& dictionary, QueryLimits limits, unsigned threads);
  ~AdmissionResolver();
  AdmissionResolver(const AdmissionResolver&) = delete;
  AdmissionResolver& operator=(const AdmissionResolver&) = delete;

  // out[i] for arrived[i] (out is resized): exactly what resolve_query gives, with the cost.
  void resolve(std::span<const ArrivedQuery> arrived, const std::string& source_name,
               std::vector<ResolvedQuery>& out);
  unsigned threads() const { return threads_; }

 private:
  void resolve_range(std::span<const ArrivedQuery> arrived, const std::string& source_name,
                     ResolvedQuery* out) const;
  const TermDictionary& dictionary_;
  QueryLimits limits_;
  unsigned threads_;
  std::unique_ptr<tbb::task_arena> arena_;
};

}  // namespace gpusearch
