#include "common/metrics.hpp"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace gpusearch::metrics {

namespace {
// 1-based nearest rank of percentile p among n samples, clamped to [1, n].
std::size_t nearest_rank(std::size_t n, double p) {
  // The product is formed in long double and nudged down by a few ulps so that p/100 * n landing
  // a hair above an integer through binary rounding (0.95 * 20 = 19.000000000000004) does not
  // move the rank up by one.
  const long double x = static_cast<long double>(p) / 100.0L * static_cast<long double>(n);
  const auto rank = static_cast<std::size_t>(std::ceil(x - 1e-9L * std::max(1.0L, x)));
  return std::clamp<std::size_t>(rank, 1, n);
}

std::uint64_t status_field_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  std::uint64_t value = 0;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) {
      std::sscanf(line.c_str() + std::char_traits<char>::length(field), ": %lu", &value);
      return value;
    }
  }
  return 0;
}
}  // namespace

double percentile_of_sorted(std::span<const double> sorted, double p) {
  if (!(p >= 0.0 && p <= 100.0))
    throw std::invalid_argument("percentile " + std::to_string(p) + " is outside [0, 100]");
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  return sorted[nearest_rank(sorted.size(), p) - 1];
}

double percentile(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  return percentile_of_sorted(samples, p);
}

nlohmann::json summarize(std::vector<double> v) {
  if (v.empty()) return {{"count", 0}};
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  const std::size_t m = std::min(n, kSummaryOrderStatistics);
  nlohmann::json order = nlohmann::json::array();
  for (std::size_t i = 1; i <= m; ++i) order.push_back(v[(i * n + m - 1) / m - 1]);  // ceil(i n/m)
  return {{"count", n},
          {"mean", sum / double(n)},
          {"min", v.front()},
          {"p50", percentile_of_sorted(v, 50)},
          {"p95", percentile_of_sorted(v, 95)},
          {"p99", percentile_of_sorted(v, 99)},
          {"max", v.back()},
          {"order_statistics", std::move(order)}};
}

std::int64_t SampleSet::bucket_of(double v) {
  // Zero is bucket 0; a positive value's bucket is its binary exponent and the top
  // kSubBucketBits bits of its mantissa, offset so that every positive bucket is above 0; a
  // negative value's is the negation of its magnitude's, so the keys sort as the values do.
  if (v == 0 || std::isnan(v)) return 0;
  constexpr std::int64_t kOffset = std::int64_t(1) << 40;
  const double magnitude = std::abs(v);
  std::int64_t key = 0;
  if (std::isinf(magnitude)) {
    key = kOffset * 2;
  } else {
    int exponent = 0;
    const double mantissa = std::frexp(magnitude, &exponent);  // in [0.5, 1)
    const auto sub = std::int64_t((mantissa - 0.5) * double(2u << kSubBucketBits));
    key = kOffset + std::int64_t(exponent) * (std::int64_t(1) << kSubBucketBits) + sub;
  }
  return v > 0 ? key : -key;
}

void SampleSet::fold(double v) {
  Bucket& b = histogram_[bucket_of(v)];
  b.smallest = b.count == 0 ? v : std::min(b.smallest, v);
  ++b.count;
}

void SampleSet::add(double v) {
  min_ = count_ == 0 ? v : std::min(min_, v);
  max_ = count_ == 0 ? v : std::max(max_, v);
  sum_ += v;
  ++count_;
  if (!histogram_.empty()) {
    fold(v);
    return;
  }
  samples_.push_back(v);
  if (samples_.size() > exact_limit_) {
    for (double s : samples_) fold(s);
    std::vector<double>().swap(samples_);  // give the memory back
  }
}

std::vector<double> SampleSet::at_ranks(const std::vector<std::size_t>& ranks) const {
  std::vector<double> out;
  out.reserve(ranks.size());
  std::uint64_t seen = 0;
  auto it = histogram_.begin();
  for (std::size_t rank : ranks) {
    while (it != histogram_.end() && seen + it->second.count < rank) seen += (it++)->second.count;
    out.push_back(it == histogram_.end() ? max_ : it->second.smallest);
  }
  return out;
}

double SampleSet::percentile(double p) const {
  if (exact()) {
    std::vector<double> sorted = samples_;
    std::sort(sorted.begin(), sorted.end());
    return percentile_of_sorted(sorted, p);
  }
  if (!(p >= 0.0 && p <= 100.0))
    throw std::invalid_argument("percentile " + std::to_string(p) + " is outside [0, 100]");
  return at_ranks({nearest_rank(count_, p)}).front();
}

nlohmann::json SampleSet::summary() const {
  if (exact()) return summarize(samples_);
  const std::size_t n = count_;
  const std::size_t m = std::min(n, kSummaryOrderStatistics);
  std::vector<std::size_t> ranks;
  for (std::size_t i = 1; i <= m; ++i) ranks.push_back((i * n + m - 1) / m);  // ceil(i n / m)
  const std::vector<double> order = at_ranks(ranks);
  const std::vector<double> pct =
      at_ranks({nearest_rank(n, 50), nearest_rank(n, 95), nearest_rank(n, 99)});
  return {{"count", n},
          {"mean", sum_ / double(n)},
          {"min", min_},
          {"p50", pct[0]},
          {"p95", pct[1]},
          {"p99", pct[2]},
          {"max", max_},
          {"order_statistics", order},
          {"exact", false},
          {"relative_error", kHistogramRelativeError},
          {"buckets", histogram_.size()}};
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double thread_cpu_seconds(unsigned long pthread_handle) {
  clockid_t clock;
  if (pthread_getcpuclockid(pthread_t(pthread_handle), &clock) != 0) return 0;
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double thread_run_delay_seconds() {
  std::ifstream in("/proc/thread-self/schedstat");
  std::uint64_t on_cpu_ns = 0, waiting_ns = 0;
  if (!(in >> on_cpu_ns >> waiting_ns)) return 0;
  return 1e-9 * double(waiting_ns);
}

std::uint64_t peak_rss_bytes() { return status_field_kib("VmHWM") * 1024; }
std::uint64_t current_rss_bytes() { return status_field_kib("VmRSS") * 1024; }

}  // namespace gpusearch::metrics
