// The model the aggregator chooses its pipeline depth from (a part of aggregator.cpp kept
// apart): exponentially weighted means of the slowest ISN's compute, the round trip's overhead
// and the service interval, and the depth that keeps every ISN busy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace gpusearch {

// Exponentially weighted means of the latencies the pipeline depth is chosen from.
struct LatencyModel {
  double compute_us = 0;   // the slowest ISN's engine time per batch
  double overhead_us = 0;  // to the ISN and back (wire, encode, decode), excluding its queue
  // From the later of a batch's send and the previous batch's last answer to its own last
  // answer: when the next answer is due, whether the ISNs work in series or pipelined.
  double service_us = 0;
  bool seeded = false;
  void add(double compute, double overhead, double service) {
    if (!seeded) {
      compute_us = compute, overhead_us = overhead, service_us = service, seeded = true;
      return;
    }
    compute_us = 0.8 * compute_us + 0.2 * compute;
    overhead_us = 0.8 * overhead_us + 0.2 * overhead;
    service_us = 0.8 * service_us + 0.2 * service;
  }
  // An ISN that finishes a batch must find the next one waiting: batch n + depth - 1 is cut when
  // batch n's answer is back, so depth - 1 compute times must cover one round of overhead; one
  // more batch absorbs the variance.
  std::size_t depth(std::size_t max_depth) const {
    if (!seeded) return 2;
    const double need = 1.0 + std::ceil(overhead_us / std::max(compute_us, 1.0)) + 1.0;
    return std::size_t(std::clamp(need, 1.0, double(std::max<std::size_t>(max_depth, 1))));
  }
};

}  // namespace gpusearch
