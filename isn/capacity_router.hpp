// Routing by measured capacity (the `queues` scheduler's default routing): a query goes to the
// processor that finishes it earliest given the work already queued there, and, where the two
// finish times are close, by relative advantage (the CPU takes the queries whose CPU/GPU cost
// ratio is lowest).
//
// Why: predicted costs are lone-query costs. On the H100 host the GPU answers a lone query in
// about as long as a CPU worker does, but in a batch of thousands its cost per query is a few
// microseconds; routing by lone costs sent most queries to the CPU workers, whose capacity is a
// fraction of the GPU's (0.44x the GPU alone at saturation with one ISN). So each processor's
// capacity is measured from the calls it runs: its seconds of real work per predicted second
// (for the GPU, a batch's duration over the sum of its queries' predicted lone costs: the
// marginal cost per query in the batches it actually runs), a decayed estimate kept online.
//
// Expected completion of a query q on processor p:
//   wait_p + r_p * c_p(q),   wait_p = r_p * (queued_p + running_p) / workers_p
// where c_p is q's predicted cost, r_p the measured seconds per predicted second, queued_p and
// running_p the predicted seconds queued for p and in its running calls (0 while p has an idle
// worker and nothing queued). When the two completions differ by more than `close_fraction` of
// the larger, the earlier wins; otherwise q goes to the CPU when its ratio
// r_cpu c_cpu / (r_gpu c_gpu) is below a threshold theta, which moves by `balance_step` (a
// factor) toward balancing the two waits at every such decision: the CPU's share of the queries
// is then the ones it is relatively best at, as large as its capacity allows.
//
// Not thread-safe: CoProcessorScheduler calls it under its mutex. Deterministic (no clock: the
// decay is over the processors' busy seconds), so the tests drive it directly.
#pragma once

#include <array>

#include <nlohmann/json.hpp>

#include "isn/cost_predictor.hpp"

namespace gpusearch {

struct CapacityRoutingOptions {
  // The measured seconds per predicted second forget old calls with this half-life, in seconds
  // of the processor's busy time (summed over its workers).
  double half_life_busy_seconds = 0.05;
  // The estimate starts at 1 (predictions taken as they are), with this weight in predicted
  // seconds: the first calls' measurements replace it.
  double prior_predicted_seconds = 0.002;
  // Completions within this fraction of the larger are close: relative advantage decides.
  double close_fraction = 0.2;
  // theta's factor per close decision (exp(+-step)).
  double balance_step = 0.02;
};

class CapacityRouter {
 public:
  CapacityRouter(std::array<unsigned, kProcessors> workers, CapacityRoutingOptions options = {});

  struct Decision {
    Processor to = Processor::kCpu;
    bool by_advantage = false;                     // the completions were close
    std::array<double, kProcessors> completion{};  // expected seconds
  };
  // Where a query of estimate `e` would go now (no state change).
  Decision choose(const CostEstimate& e) const;
  // choose(), then theta's step toward balanced waits (close decisions only).
  Decision route(const CostEstimate& e);

  // Bookkeeping of predicted seconds, from the scheduler.
  void queued(Processor owner, const CostEstimate& e);  // into owner's queue
  // Out of owner's queue (taken by either processor); `now_empty`: the queue is empty now (its
  // sum is reset, so that rounding never leaves a phantom backlog).
  void dequeued(Processor owner, const CostEstimate& e, bool now_empty);
  // A call of p starts with `predicted` seconds (its jobs' predicted costs on p).
  void call_started(Processor p, double predicted);
  // It ended after `seconds`: measured when `ok` (the engine answered) and predicted > 0.
  void call_finished(Processor p, double predicted, double seconds, bool ok);

  double seconds_per_predicted(Processor p) const;  // r_p
  double wait_seconds(Processor p) const;           // wait_p
  double theta() const { return theta_; }
  nlohmann::json stats() const;

 private:
  struct Side {
    unsigned workers = 1, busy_workers = 0;
    double queued = 0, running = 0;               // predicted seconds
    double measured = 0, measured_predicted = 0;  // decayed sums: real and predicted seconds
    std::uint64_t calls_measured = 0;
  };
  Side& side(Processor p) { return sides_[std::size_t(p)]; }
  const Side& side(Processor p) const { return sides_[std::size_t(p)]; }

  CapacityRoutingOptions options_;
  std::array<Side, kProcessors> sides_;
  double theta_ = 1.0;
  std::array<std::uint64_t, kProcessors> routed_{}, routed_by_advantage_{};
};

}  // namespace gpusearch
