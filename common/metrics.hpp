// Metrics every gpusearch program reports the same way: one percentile definition, one summary
// of a sample set, timers and resident memory. The aggregator, the in-process search session
// and the benchmarks all go through here, so a "p99" in one JSON file means what it means in
// every other (README, "Metrics JSON").
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
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

// Samples summarized as summarize() does, in bounded memory, for runs of any length (a serving
// cluster). Up to `exact_limit` samples it keeps them all and its summary is summarize()'s,
// exactly. Past that it folds them into a log-linear histogram: 2^kSubBucketBits buckets per
// power of two (zero, and negative values mirrored, have their own), each with its count and its
// smallest sample; memory then grows with the range of the values, not their number (a few
// thousand buckets for latencies from microseconds to minutes). Percentiles keep the definition
// above: the nearest rank is found among the bucket counts, and the value reported is the
// smallest sample of the bucket holding that rank. So it is still a value some sample had, and
// it is within kHistogramRelativeError (2^-7, 0.78%) of the exact nearest-rank value, below it
// or equal. count, mean, min and max stay exact. The summary then says "exact": false and gives
// "relative_error" and "buckets".
class SampleSet {
 public:
  static constexpr unsigned kSubBucketBits = 7;
  static constexpr double kHistogramRelativeError = 1.0 / (1u << kSubBucketBits);
  // Small enough that a serving aggregator's ~20 series are all histograms within a minute at a
  // few hundred queries/s (its RSS then stays flat); tests' runs stay far below it.
  static constexpr std::size_t kDefaultExactLimit = 8192;

  explicit SampleSet(std::size_t exact_limit = kDefaultExactLimit) : exact_limit_(exact_limit) {}
  void add(double v);
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool exact() const { return histogram_.empty(); }
  // Nearest rank, as percentile_of_sorted (exact while exact(), else as described above); NaN
  // when empty; std::invalid_argument for p outside [0, 100].
  double percentile(double p) const;
  nlohmann::json summary() const;
  std::size_t buckets() const { return histogram_.size(); }

 private:
  struct Bucket {
    std::uint64_t count = 0;
    double smallest = 0;
  };
  static std::int64_t bucket_of(double v);
  void fold(double v);
  // The smallest sample of the bucket holding each 1-based rank (ascending ranks).
  std::vector<double> at_ranks(const std::vector<std::size_t>& ranks) const;

  std::size_t exact_limit_;
  std::vector<double> samples_;               // while exact
  std::map<std::int64_t, Bucket> histogram_;  // once past exact_limit_
  std::size_t count_ = 0;
  double sum_ = 0, min_ = 0, max_ = 0;
};

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

// CPU time of the calling thread, in seconds (CLOCK_THREAD_CPUTIME_ID); of another thread, by
// its std::thread::native_handle() (0 when its clock cannot be read); of the whole process.
double thread_cpu_seconds();
double thread_cpu_seconds(unsigned long pthread_handle);
double process_cpu_seconds();
// Time the calling thread has spent runnable but waiting for a CPU (the scheduler's run delay,
// /proc/thread-self/schedstat), in seconds; 0 where the kernel does not report it. Against the
// thread's CPU time it says whether a late reaction was the thread's own work or a core it could
// not get (issue 16: the MPI threads on a node whose cores the engines take).
double thread_run_delay_seconds();

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
