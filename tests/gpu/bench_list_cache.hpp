// What bench_list_cache.cpp and its drift comparison (bench_list_cache_drift.cpp) share: the
// benchmark's state, one timed pass of a query log, and an engine at one split of the budget.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/cache_admission.hpp"
#include "common/list_cache.hpp"
#include "common/query.hpp"
#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "common/shard_index.hpp"
#include "gpu/gpu_engine.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"

namespace gpusearch::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

inline std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

struct Bench {
  const Index& index;
  const ShardIndex& shard;
  SearchParams params;
  std::vector<Query> train{}, test{};
  std::size_t check = 200, call_size = 4096;
  std::size_t ref_stride = 1;  // refs[j] answers query j x ref_stride of the log checked
  unsigned batch_size = 4096, postprocess_threads = 0;
  std::vector<ReferenceAnswer> refs{};  // of the test log's first `check` queries
  std::shared_ptr<const cpu::CpuEngine> cpu{};
  VisitLog visits{};  // the training log's simulated reads (every plan's input)
  bool fill_spare = true;  // plans fill the budget their lists leave (AdmissionOptions)

  std::size_t wrong(const std::vector<ShardResult>& out, const std::vector<ReferenceAnswer>& r,
                    const std::vector<Query>& qs) const {
    std::size_t bad = 0;
    for (std::size_t j = 0; j < r.size() && j * ref_stride < qs.size(); ++j) {
      const std::size_t i = j * ref_stride;
      const ShardResult* s = &out[i];
      const QueryResult m = merge_shard_results(params, std::span<const ShardResult* const>(&s, 1));
      bad += compare_top_k(r[j].hits, r[j].total_matches, params.k, m.hits).has_value();
    }
    return bad;
  }
};

// One timed pass of `qs` through `engine` in calls of call_size, after a warm-up call.
// With split > 0 (GPU list cache), the byte hit rate of the queries before the first call
// boundary at or past `split` and of those after it (a drifting log's halves). With
// arrivals_per_s > 0 the queries arrive at that rate (open loop) and a call starts when its last
// query has arrived, as an ISN's batches would; busy_queries_per_second is then the serving
// capacity (queries over the time spent inside the calls), the figure to compare.
nlohmann::json timed_run(Bench& b, QueryEngine& engine, const std::vector<Query>& qs,
                         const std::vector<ReferenceAnswer>& refs, std::size_t split = 0,
                         double arrivals_per_s = 0);

// A policy, its lambda, and whether lists cached in part ship whole where they fit.
struct PolicyCase {
  CachePolicy policy;
  double lambda;
  bool tails = false;
  std::string name() const {
    return (policy == CachePolicy::kVfb ? fmt::format("vfb:{}", lambda)
                                        : std::string(to_string(policy))) +
           (tails ? "+tails" : "");
  }
  // "vfb:LAMBDA", "qtf" or "qtfdf", each optionally with "+tails"; errors name `flag`.
  static PolicyCase parse(std::string name, const std::string& flag);
};

// The engine at one split of `memory` (posting bytes the GPU may hold: cache + batch buffer).
std::unique_ptr<gpu::GpuEngine> cached_engine(Bench& b, double memory, double cache_share,
                                              const std::vector<CachedList>& lists,
                                              unsigned batch_size, bool tails);

// The drift comparison's settings (bench_list_cache's --drift-* flags).
struct DriftOptions {
  std::string spec;  // the synthetic collection whose drifting log is served
  std::string log;   // the drifting log's settings, added to spec (query_drift=1 before them)
  // replan: served queries between plans (one in sample replayed)
  std::size_t limit = 10000, call_size = 1000, replan = 2000, max_pending = 1000;
  double ratio = 10, half_life = 4000, arrivals = 4000, swap_fraction = 1.0 / 16;
  unsigned rounds = 3, sample = 4, planner_threads = 1, replan_backoff = 8;  // as the ISN ships
  // The online variants, PRIORITY:MIN_PAYOFF:MIN_GAIN[:gaps|always[:gaps|calls[:BACKOFF]]],...
  std::string online = "idle:1:0.02";
  // The admission both arms use (PolicyCase::parse): the offline plan's and the online policy's.
  std::string policy = "vfb:1";
};

// Registers the --drift-* flags (defaults: DriftOptions').
void add_drift_options(CLI::App& app, DriftOptions& o);

// Runs the drift comparison on `b` (shard of `postings` bytes): prints a line per run and the
// medians, returns the report's "online" object.
nlohmann::json run_drift_comparison(Bench& b, const DriftOptions& o, double postings);

}  // namespace gpusearch::bench
