// A simulated processor for the scheduler's tests and for bench_scheduler on hosts without a GPU
// (or without many cores). It answers exactly (the wrapped engine's answers, memoized per query
// and search parameters) and takes the time the modelled processor would: a fixed cost per call
// (a GPU's launch and copies) plus a cost per query that grows with its postings,
//   call_us + sum over the call's queries of (query_ns + posting_ns * postings^posting_exponent)
// (a batched GPU: a large call_us, exponent 1; a pruning CPU engine: no call_us, exponent < 1).
// The time is slept, not spent, so a 2-core build host can run a GPU with many times the
// capacity of its CPU worker, or 15 CPU workers; a first-seen query's answer (the wrapped
// engine's work) counts inside the call's time.
#pragma once

#include <chrono>
#include <cmath>
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

struct SimulatedCosts {
  double call_us = 500;    // per call (a launch, the copies)
  double query_ns = 1000;  // per query in the call
  double posting_ns = 0;   // per posting (to the exponent) of the query's lists
  double posting_exponent = 1.0;
};

class SimulatedEngine final : public QueryEngine {
 public:
  SimulatedEngine(const ShardIndex& shard, std::unique_ptr<QueryEngine> inner, SimulatedCosts costs,
                  std::string name = "simulated-gpu")
      : shard_(shard), inner_(std::move(inner)), costs_(costs), name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  bool runs_batch_in_parallel() const override { return true; }

  // The call's simulated duration.
  double seconds_for(std::span<const Query> queries) const {
    double ns = costs_.call_us * 1e3;
    for (const Query& q : queries)
      ns += costs_.query_ns +
            costs_.posting_ns * std::pow(query_features(shard_, q).total, costs_.posting_exponent);
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
  SimulatedCosts costs_;
  std::string name_;
  std::mutex mutex_;
  std::map<std::string, ShardResult> answers_;
};

}  // namespace gpusearch::testing
