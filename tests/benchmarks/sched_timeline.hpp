// bench_scheduler's per-run timeline (--timeline-ms): the jobs' outcomes binned in time, so that
// a run that missed its deadline shows which queue grew and whether a processor sat idle
// meanwhile (launch/plot-sched-timeline.py draws it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "isn/coprocessor_scheduler.hpp"

namespace gpusearch::bench {

// One run's timeline, in bins: what arrived, what waited to be submitted and in which queue,
// how busy each processor was, what completed, the longest wait of the jobs each processor
// started, and theta (specialize). Counts of waiting jobs are those whose wait spans the bin.
struct TimelineInput {
  const std::vector<double>& arrival_s;  // after t0
  const std::vector<double>& submit_s;   // after t0
  const std::vector<JobOutcome>& outcomes;
  std::size_t submitted;
  double elapsed, bin_seconds, t0_steady_seconds;
};

inline nlohmann::json run_timeline(const TimelineInput& in, const nlohmann::json& scheduler_stats) {
  const std::size_t bins = std::max<std::size_t>(1, std::size_t(std::ceil(in.elapsed / in.bin_seconds)));
  auto bin_of = [&](double t) {
    return std::min(bins - 1, std::size_t(std::max(0.0, t) / in.bin_seconds));
  };
  std::vector<double> arrivals(bins), unsubmitted(bins + 1), waiting_cpu(bins + 1),
      waiting_gpu(bins + 1), waiting_either(bins + 1), cpu_busy(bins), gpu_busy(bins), done_cpu(bins),
      done_gpu(bins), max_wait_cpu(bins), max_wait_gpu(bins), gpu_batch_sum(bins),
      gpu_starts(bins), missed(bins), theta(bins, NAN);
  // Adds the part of [a, b) in each bin, times w, to v.
  auto spread = [&](std::vector<double>& v, double a, double b, double w) {
    for (std::size_t k = bin_of(a); k < bins; ++k) {
      const double lo = std::max(a, double(k) * in.bin_seconds),
                   hi = std::min(b, double(k + 1) * in.bin_seconds);
      if (hi <= lo) break;
      v[k] += w * (hi - lo) / in.bin_seconds;
    }
  };
  for (std::size_t i = 0; i < in.submitted; ++i) {
    const JobOutcome& o = in.outcomes[i];
    const double a = in.arrival_s[i], sub = in.submit_s[i];
    arrivals[bin_of(a)] += 1;
    unsubmitted[bin_of(a)] += 1;
    unsubmitted[bin_of(sub)] -= 1;
    if (o.dropped) continue;
    const double start = a + o.wait_seconds, end = start + o.service_seconds;
    auto& waiting = o.queued_in == JobQueue::kCpuPreferred   ? waiting_cpu
                    : o.queued_in == JobQueue::kGpuPreferred ? waiting_gpu
                                                             : waiting_either;
    waiting[bin_of(sub)] += 1;
    waiting[bin_of(start)] -= 1;
    const bool on_gpu = o.ran_on == Processor::kGpu;
    // A GPU call's jobs share its time: each adds its share, so the call counts once.
    spread(on_gpu ? gpu_busy : cpu_busy, start, end,
           on_gpu ? 1.0 / double(std::max<std::size_t>(1, o.batch_size)) : 1.0);
    (on_gpu ? done_gpu : done_cpu)[bin_of(end)] += 1;
    auto& max_wait = on_gpu ? max_wait_gpu : max_wait_cpu;
    max_wait[bin_of(start)] = std::max(max_wait[bin_of(start)], 1e3 * o.wait_seconds);
    if (on_gpu) {
      gpu_batch_sum[bin_of(start)] += double(o.batch_size);
      gpu_starts[bin_of(start)] += 1;
    }
    missed[bin_of(end)] += o.missed_deadline;
  }
  // Running sums turn the +1/-1 marks into counts per bin.
  for (auto* v : {&unsubmitted, &waiting_cpu, &waiting_gpu, &waiting_either})
    for (std::size_t k = 1; k <= bins; ++k) (*v)[k] += (*v)[k - 1];
  std::vector<double> gpu_batch_mean(bins, 0.0), t(bins);
  for (std::size_t k = 0; k < bins; ++k) {
    t[k] = double(k) * in.bin_seconds;
    if (gpu_starts[k] > 0) gpu_batch_mean[k] = gpu_batch_sum[k] / gpu_starts[k];
  }
  if (scheduler_stats.contains("specialize") && scheduler_stats["specialize"].contains("theta_trace")) {
    for (const auto& point : scheduler_stats["specialize"]["theta_trace"]) {
      const double at = point[0].get<double>() - in.t0_steady_seconds;
      if (at >= 0) theta[bin_of(at)] = point[1].get<double>();  // the last in the bin
    }
  }
  for (auto* v : {&unsubmitted, &waiting_cpu, &waiting_gpu, &waiting_either}) v->resize(bins);
  return {{"bin_ms", 1e3 * in.bin_seconds},
          {"t_s", t},
          {"arrivals", arrivals},
          {"unsubmitted", unsubmitted},
          {"waiting_cpu_queue", waiting_cpu},
          {"waiting_gpu_queue", waiting_gpu},
          {"waiting_either_queue", waiting_either},
          {"cpu_busy_workers", cpu_busy},
          {"gpu_busy", gpu_busy},
          {"done_cpu", done_cpu},
          {"done_gpu", done_gpu},
          {"max_wait_ms_cpu", max_wait_cpu},
          {"max_wait_ms_gpu", max_wait_gpu},
          {"gpu_batch_mean", gpu_batch_mean},
          {"missed", missed},
          {"theta", theta}};
}

}  // namespace gpusearch::bench
