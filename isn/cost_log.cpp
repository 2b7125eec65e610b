// Per-query cost logging for the cost predictor (declared in isn/coprocessor_scheduler.hpp):
// each query timed alone on each processor, the fastest of a few runs kept.
#include <algorithm>
#include <chrono>

#include "common/metrics.hpp"
#include "isn/coprocessor_scheduler.hpp"

namespace gpusearch {

namespace {

double clock_seconds(CostClock clock) {
  if (clock == CostClock::kWall)
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  return metrics::thread_cpu_seconds();
}

}  // namespace

CostLog log_query_costs(const ShardIndex& shard, std::span<const Query> queries,
                        const SearchParams& params, QueryEngine& cpu, QueryEngine& gpu,
                        const CostLogOptions& options) {
  CostLog log;
  std::array<QueryEngine*, kProcessors> engines{&cpu, &gpu};
  ShardResult r;
  std::vector<double> runs;
  for (const Query& q : queries) {
    if (q.terms.empty()) continue;
    const QueryFeatures f = query_features(shard, q, params, options.and_probe_blocks);
    for (std::size_t p = 0; p < kProcessors; ++p) {
      runs.clear();
      for (unsigned run = 0; run < std::max(1u, options.repeats); ++run) {
        const double t0 = clock_seconds(options.clock[p]);
        engines[p]->search(std::span(&q, 1), params, std::span(&r, 1));
        runs.push_back(clock_seconds(options.clock[p]) - t0);
      }
      const bool or_ran = params.mode == Mode::kAndOr && r.and_matches < params.k;
      log.samples[p].push_back({f, *std::min_element(runs.begin(), runs.end()), or_ran,
                                r.counters.postings_decoded, r.counters.docs_scored});
    }
  }
  return log;
}

CostPredictor train_cost_predictor(const ShardIndex& shard, std::span<const Query> queries,
                                   const SearchParams& params, QueryEngine& cpu, QueryEngine& gpu,
                                   nlohmann::json* report, const CostLogOptions& options) {
  const CostLog log = log_query_costs(shard, queries, params, cpu, gpu, options);
  return CostPredictor::train(log.samples[0], log.samples[1], report);
}

}  // namespace gpusearch
