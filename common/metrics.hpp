// Metrics every gpusearch program reports the same way: one percentile definition, one summary
// of a sample set, timers and resident memory. The aggregator, the in-process search session
// and the benchmarks all go through here, so a "p99" in one JSON file means what it means in
// every other (README, "Metrics JSON").
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpusearch::metrics {

// The percentile definition: nearest rank, no interpolation. The p-th percentile of n samples
// is the sample of rank ceil(p/100 * n) in ascending order, ranks clamped to [1, n]; so p = 0
// gives the minimum, p = 100 the maximum, and the p99 of 100 samples is the 99th smallest.
// Chosen because it always returns a latency that was observed (an interpolated p99 can be a
// time no query took) and it is what the aggregator used first. `sorted` must be ascending;
// empty gives NaN. Throws std::invalid_argument for p outside [0, 100].
double percentile_of_sorted(std::span<const double> sorted, double p);
// The same on unsorted samples (sorts a copy).
double percentile(std::vector<double> samples, double p);

// How many order statistics a summary keeps (see summarize).
inline constexpr std::size_t kSummaryOrderStatistics = 128;

// The summary of a sample set, the shape of every latency and stage entry in the metrics JSON:
//   count, mean, min, p50, p95, p99, max   (percentiles as defined above; empty: count 0 only)
//   order_statistics: the samples at ranks ceil(i * n / m), i = 1..m, m = min(n, 128),
//                     ascending: every sample when n <= 128, else an even thinning. It keeps
//                     the shape of the distribution (the simulator draws service times from
//                     it) at a bounded size.
nlohmann::json summarize(std::vector<double> samples);

// Wall-clock timer on the steady clock.
class Stopwatch {
 public:
  using Clock = std::chrono::steady_clock;
  Stopwatch() : start_(Clock::now()) {}
  void restart() { start_ = Clock::now(); }
  Clock::time_point started() const { return start_; }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double milliseconds() const { return seconds() * 1e3; }

 private:
  Clock::time_point start_;
};

// CPU time of the calling thread, in seconds (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_seconds();

// Peak resident memory of this process (VmHWM), in bytes; 0 if unknown.
std::uint64_t peak_rss_bytes();
// Current resident memory (VmRSS), in bytes; 0 if unknown.
std::uint64_t current_rss_bytes();

}  // namespace gpusearch::metrics

namespace gpusearch {
// RSS is reported by many programs under these names.
using metrics::current_rss_bytes;
using metrics::peak_rss_bytes;
}  // namespace gpusearch
