// A simulated GPU-side processor for the scheduler's tests and for bench_scheduler on hosts
// without a GPU. It answers exactly (the wrapped engine's answers, memoized per query and search
// parameters) and takes the time a batched accelerator would: a fixed cost per call plus a
// marginal cost per query that grows with the query's postings. The time is slept, not spent,
// so a 2-core build host can run a processor with many times the capacity of its CPU worker
// next to it; the costs of a first-seen query's answer (the wrapped engine's work) count inside
// the call's time.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "common/query_engine.hpp"
#include "common/shard_index.hpp"
#include "isn/cost_predictor.hpp"

namespace gpusearch::testing {

struct SimulatedGpuCosts {
  double call_us = 500;    // per call (a launch, the copies)
  double query_ns = 1000;  // per query in the call
  double posting_ns = 0;   // per posting of the query's lists
};

class SimulatedGpuEngine final : public QueryEngine {
 public:
  SimulatedGpuEngine(const ShardIndex& shard, std::unique_ptr<QueryEngine> inner,
                     SimulatedGpuCosts costs)
      : shard_(shard), inner_(std::move(inner)), costs_(costs) {}
  std::string_view name() const override { return "simulated-gpu"; }
  bool runs_batch_in_parallel() const override { return true; }

  // The call's simulated duration.
  double seconds_for(std::span<const Query> queries) const {
    double ns = costs_.call_us * 1e3;
    for (const Query& q : queries)
      ns += costs_.query_ns + costs_.posting_ns * query_features(shard_, q).total;
    return ns * 1e-9;
  }

  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(seconds_for(queries)));
    {
      std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < queries.size(); ++i) {
        const std::string key = key_of(queries[i], params);
        auto it = answers_.find(key);
        if (it == answers_.end()) {
          ShardResult r;
          inner_->search(std::span(&queries[i], 1), params, std::span(&r, 1));
          it = answers_.emplace(key, std::move(r)).first;
        }
        out[i] = it->second;
      }
    }
    std::this_thread::sleep_until(until);
  }

 private:
  static std::string key_of(const Query& q, const SearchParams& p) {
    std::string key = fmt::format("{}/{}/{}/{}:", int(p.mode), int(p.scoring), p.alpha, p.k);
    for (TermId t : q.terms) key += fmt::format("{},", t);
    return key;
  }

  const ShardIndex& shard_;
  std::unique_ptr<QueryEngine> inner_;
  SimulatedGpuCosts costs_;
  std::mutex mutex_;
  std::map<std::string, ShardResult> answers_;
};

}  // namespace gpusearch::testing
