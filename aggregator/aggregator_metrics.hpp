// The aggregator's metrics JSON (README "Metrics JSON"): assembled once at the end of a run from
// what each part counted: admission (the MPI thread), the batches in flight, the merge thread,
// the ISNs' book, the pacer. Every latency and stage entry is a common/metrics.hpp summary of a
// metrics::SampleSet (nearest-rank percentiles, exact up to its limit of samples).
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "aggregator/aggregator.hpp"
#include "aggregator/batch_merger.hpp"
#include "aggregator/in_flight_batches.hpp"
#include "aggregator/isn_roster.hpp"
#include "common/metrics.hpp"

namespace gpusearch {

// What the MPI thread counted while admitting queries.
struct AdmissionStats {
  // A line or query skipped: counted; the first kKeptProblems kept for the messages (bounded
  // memory however many a long-running source sends).
  void skip(QueryProblem problem) {
    ++skipped;
    if (problems.size() < kKeptProblems) problems.push_back(std::move(problem));
  }
  static constexpr std::size_t kKeptProblems = 100;
  std::vector<QueryProblem> problems;  // the first kKeptProblems skipped
  std::uint64_t read = 0, skipped = 0, no_known_terms = 0, unknown_tokens = 0, cache_hits = 0,
                cache_hits_by_or = 0;
  metrics::SampleSet depth_samples;  // the pipeline depth at each cut
};

struct AggregatorRunParts {
  const AggregatorOptions& options;
  const SearchParams& params;  // as run (alpha resolved)
  const AdmissionStats& admission;
  const InFlightBatches& batches;
  const BatchMerger& merger;
  const IsnRoster& isns;
  const SharedResultCache& cache;
  nlohmann::json pacer_stats;
  bool term_ids = false;
  double start_seconds = 0, run_seconds = 0;
  std::vector<int> stuck;  // ISN ranks silent at shutdown
  std::uint64_t deadline_cuts = 0;  // batches cut early for a query's deadline
  nlohmann::json front_end;         // the RPC front end's counters (null: none)
};

nlohmann::json aggregator_metrics(const AggregatorRunParts& parts);

// The second stage's section (issue 12): the policy, the coordinator's view and plans, the
// ranker-cache commands sent, and every ISN's ranker cache (hit rate, loads, evictions, load
// time and bytes; from its stats at shutdown) with their total.
nlohmann::json ranker_cache_metrics(const AggregatorRanking& ranking, std::uint32_t candidates,
                                    std::size_t rankers_in_store,
                                    const RankerCacheCoordinator* coordinator,
                                    const InFlightBatches& batches, const IsnRoster& isns,
                                    std::uint64_t ranker_fallback_queries);

}  // namespace gpusearch
