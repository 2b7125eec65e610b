// A batched processor's marginal cost per query, learned online from the calls it runs (issue 11,
// routing `specialize`). The GPU engine answers a batch in
//   seconds ~= a + b * queries + c * postings
// (a: the call's fixed cost, launches and copies; b: each query's share of per-query work; c:
// the work of each posting of the queries' lists, which a lone query's latency hides under a
// floor of about 50 us on the H200). A query's marginal cost in a batch is then b + c * its
// postings: what routing it elsewhere saves the GPU. The scheduler's lone-cost predictions miss
// exactly that: the GPU answers cheap queries for almost nothing in a batch, dear ones for much
// more (NOTES-scheduler.md, session 33, "Routing specialize").
//
// Fitted by decayed least squares over the last calls (each call's weight halves after
// `half_life_calls` newer ones), with a small ridge toward zero on b and c so that a run of equal
// batches still solves. Not thread-safe (the scheduler calls it under its mutex). Deterministic.
#pragma once

#include <array>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace gpusearch {

class BatchCostModel {
 public:
  explicit BatchCostModel(double half_life_calls = 64, std::uint64_t min_calls = 8);

  // A call of `queries` queries whose lists hold `postings` postings in all took `seconds`.
  void observe(double queries, double postings, double seconds);
  // Whether enough calls were seen for marginal() to mean something.
  bool ready() const { return calls_ >= min_calls_ && solved_; }
  // b + c * postings, at least a hundredth of the mean marginal cost seen (never 0 or negative:
  // it divides).
  double marginal(double postings) const;
  // The calls' seconds over their queries (decayed alike): a query's flat share of a call.
  double mean_seconds_per_query() const {
    return queries_seen_ > 0 ? seconds_seen_ / queries_seen_ : 0.0;
  }
  std::array<double, 3> coefficients() const { return beta_; }  // a, b, c
  std::uint64_t calls() const { return calls_; }
  nlohmann::json stats() const;

 private:
  void solve();
  double decay_;
  std::uint64_t min_calls_;
  std::uint64_t calls_ = 0;
  // Decayed sums of x x^T and x y over calls, x = (1, queries, postings), y = seconds.
  std::array<std::array<double, 3>, 3> xx_{};
  std::array<double, 3> xy_{};
  double queries_seen_ = 0, seconds_seen_ = 0;  // decayed, for the floor
  std::array<double, 3> beta_{};
  bool solved_ = false;
};

}  // namespace gpusearch
