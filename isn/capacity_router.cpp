#include "isn/capacity_router.hpp"

#include <algorithm>
#include <cmath>

namespace gpusearch {

CapacityRouter::CapacityRouter(std::array<unsigned, kProcessors> workers,
                               CapacityRoutingOptions options)
    : options_(options) {
  for (std::size_t p = 0; p < kProcessors; ++p) {
    sides_[p].workers = std::max(1u, workers[p]);
    sides_[p].measured = sides_[p].measured_predicted = options_.prior_predicted_seconds;
  }
}

double CapacityRouter::seconds_per_predicted(Processor p) const {
  const Side& s = side(p);
  return s.measured_predicted > 0 ? s.measured / s.measured_predicted : 1.0;
}

double CapacityRouter::wait_seconds(Processor p) const {
  const Side& s = side(p);
  if (s.busy_workers < s.workers && s.queued <= 0) return 0;  // an idle worker takes it now
  return seconds_per_predicted(p) * (s.queued + s.running) / double(s.workers);
}

CapacityRouter::Decision CapacityRouter::choose(const CostEstimate& e) const {
  Decision d;
  std::array<double, kProcessors> own{};
  for (std::size_t p = 0; p < kProcessors; ++p) {
    own[p] = seconds_per_predicted(Processor(p)) * std::max(0.0, e.seconds[p]);
    d.completion[p] = wait_seconds(Processor(p)) + own[p];
  }
  const double cpu = d.completion[0], gpu = d.completion[1];
  const double larger = std::max(cpu, gpu);
  if (std::abs(cpu - gpu) > options_.close_fraction * larger) {
    d.to = cpu < gpu ? Processor::kCpu : Processor::kGpu;
    return d;
  }
  // Close: the CPU takes the queries it is relatively best at.
  d.by_advantage = true;
  const double ratio = own[1] > 0 ? own[0] / own[1] : (own[0] > 0 ? INFINITY : 1.0);
  d.to = ratio < theta_ ? Processor::kCpu : Processor::kGpu;
  return d;
}

CapacityRouter::Decision CapacityRouter::route(const CostEstimate& e) {
  const Decision d = choose(e);
  ++routed_[std::size_t(d.to)];
  if (d.by_advantage) {
    ++routed_by_advantage_[std::size_t(d.to)];
    // Toward balanced waits: the CPU's wait (with this job) below the GPU's means the CPU may
    // take a larger share (theta up), and the other way round.
    const double cpu_wait = wait_seconds(Processor::kCpu), gpu_wait = wait_seconds(Processor::kGpu);
    if (cpu_wait < gpu_wait)
      theta_ *= std::exp(options_.balance_step);
    else if (cpu_wait > gpu_wait)
      theta_ *= std::exp(-options_.balance_step);
    theta_ = std::clamp(theta_, 1e-6, 1e6);
  }
  return d;
}

void CapacityRouter::queued(Processor owner, const CostEstimate& e) {
  side(owner).queued += std::max(0.0, e.on(owner));
}

void CapacityRouter::dequeued(Processor owner, const CostEstimate& e, bool now_empty) {
  Side& s = side(owner);
  s.queued = now_empty ? 0.0 : std::max(0.0, s.queued - std::max(0.0, e.on(owner)));
}

void CapacityRouter::call_started(Processor p, double predicted) {
  Side& s = side(p);
  ++s.busy_workers;
  s.running += std::max(0.0, predicted);
}

void CapacityRouter::call_finished(Processor p, double predicted, double seconds, bool ok) {
  Side& s = side(p);
  s.busy_workers = s.busy_workers > 0 ? s.busy_workers - 1 : 0;
  s.running = s.busy_workers == 0 ? 0.0 : std::max(0.0, s.running - std::max(0.0, predicted));
  if (!ok || predicted <= 0 || !(seconds >= 0)) return;
  // Exponential forgetting over busy time: a call of `seconds` ages what came before by
  // 2^(-seconds / half-life).
  const double keep = std::exp2(-seconds / options_.half_life_busy_seconds);
  s.measured = s.measured * keep + seconds;
  s.measured_predicted = s.measured_predicted * keep + predicted;
  ++s.calls_measured;
}

nlohmann::json CapacityRouter::stats() const {
  nlohmann::json j = {{"theta", theta_},
                      {"close_fraction", options_.close_fraction},
                      {"half_life_busy_seconds", options_.half_life_busy_seconds}};
  for (std::size_t p = 0; p < kProcessors; ++p) {
    const Side& s = sides_[p];
    j[std::string(to_string(Processor(p)))] = {
        {"seconds_per_predicted_second", seconds_per_predicted(Processor(p))},
        {"calls_measured", s.calls_measured},
        {"routed", routed_[p]},
        {"routed_by_advantage", routed_by_advantage_[p]},
        {"wait_seconds_now", wait_seconds(Processor(p))}};
  }
  return j;
}

}  // namespace gpusearch
