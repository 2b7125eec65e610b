// The one percentile definition (nearest rank) and the summary every metrics JSON uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/metrics.hpp"

namespace gpusearch::metrics {
namespace {

std::vector<double> one_to(int n) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 1.0);
  return v;
}

TEST(Metrics, PercentileIsNearestRank) {
  const auto v = one_to(100);
  EXPECT_EQ(percentile_of_sorted(v, 50), 50.0);
  EXPECT_EQ(percentile_of_sorted(v, 95), 95.0);
  EXPECT_EQ(percentile_of_sorted(v, 99), 99.0);
  EXPECT_EQ(percentile_of_sorted(v, 99.5), 100.0);  // rank ceil(99.5) = 100
  EXPECT_EQ(percentile_of_sorted(v, 0), 1.0);
  EXPECT_EQ(percentile_of_sorted(v, 100), 100.0);
}

TEST(Metrics, PercentileNeverInterpolates) {
  const std::vector<double> v{10, 20, 30, 40};
  EXPECT_EQ(percentile_of_sorted(v, 50), 20.0);  // rank 2, not 25
  EXPECT_EQ(percentile_of_sorted(v, 51), 30.0);  // rank ceil(2.04) = 3
  EXPECT_EQ(percentile_of_sorted(v, 99), 40.0);
}

TEST(Metrics, PercentileRankIsExactWhereBinaryRoundingWouldMoveIt) {
  // 0.95 * 20 = 19 in exact arithmetic: the 19th smallest, not the 20th.
  EXPECT_EQ(percentile_of_sorted(one_to(20), 95), 19.0);
  EXPECT_EQ(percentile_of_sorted(one_to(1000), 99.9), 999.0);
}

TEST(Metrics, PercentileSortsUnsortedInput) {
  EXPECT_EQ(percentile({5, 1, 4, 2, 3}, 50), 3.0);
  EXPECT_EQ(percentile({7}, 99), 7.0);
}

TEST(Metrics, PercentileOfNothingIsNaNAndBadPThrows) {
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
  EXPECT_THROW(percentile({1, 2}, 101), std::invalid_argument);
  EXPECT_THROW(percentile({1, 2}, -1), std::invalid_argument);
  EXPECT_THROW(percentile({1, 2}, NAN), std::invalid_argument);
}

TEST(Metrics, SummaryKeysAndValues) {
  const auto s = summarize({4, 1, 3, 2});
  EXPECT_EQ(s.at("count"), 4);
  EXPECT_DOUBLE_EQ(s.at("mean").get<double>(), 2.5);
  EXPECT_EQ(s.at("min"), 1.0);
  EXPECT_EQ(s.at("p50"), 2.0);
  EXPECT_EQ(s.at("p95"), 4.0);
  EXPECT_EQ(s.at("p99"), 4.0);
  EXPECT_EQ(s.at("max"), 4.0);
  EXPECT_EQ(s.at("order_statistics"), nlohmann::json({1.0, 2.0, 3.0, 4.0}));
  EXPECT_EQ(summarize({}), nlohmann::json({{"count", 0}}));
}

TEST(Metrics, OrderStatisticsThinEvenlyAndKeepTheMaximum) {
  const auto s = summarize(one_to(1000));
  const auto& o = s.at("order_statistics");
  ASSERT_EQ(o.size(), kSummaryOrderStatistics);
  EXPECT_EQ(o.back(), 1000.0);
  EXPECT_EQ(o.front(), 8.0);  // rank ceil(1000/128) = 8
  for (std::size_t i = 1; i < o.size(); ++i) EXPECT_LT(o[i - 1].get<double>(), o[i].get<double>());
}

TEST(SampleSet, ExactUpToItsLimitIsSummarize) {
  SampleSet set(1000);
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) {
    v.push_back(std::fmod(i * 7.31, 13.0) - 2.0);  // negatives, zeros and repeats too
    set.add(v.back());
  }
  EXPECT_TRUE(set.exact());
  EXPECT_EQ(set.summary(), summarize(v));
  EXPECT_EQ(set.percentile(99), percentile(v, 99));
  EXPECT_EQ(SampleSet().summary(), nlohmann::json({{"count", 0}}));
}

// Past its limit: count, mean, min and max exact; every percentile and order statistic a value
// some sample had, at most 2^-7 below the exact nearest-rank value, never above it.
TEST(SampleSet, PastItsLimitPercentilesStayWithinTheRelativeError) {
  EXPECT_EQ(SampleSet::kHistogramRelativeError, 1.0 / 128);
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> latency(1.0, 1.2);  // ms, a long right tail
  const std::size_t n = 200000;
  SampleSet set(5000);
  std::vector<double> v;
  for (std::size_t i = 0; i < n; ++i) {
    v.push_back(i % 1000 == 0 ? -latency(rng) : latency(rng));  // a few negatives (clock skew)
    set.add(v.back());
  }
  ASSERT_FALSE(set.exact());
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const auto exact = summarize(v);
  const auto s = set.summary();
  EXPECT_EQ(s.at("count"), n);
  EXPECT_EQ(s.at("min"), exact.at("min"));
  EXPECT_EQ(s.at("max"), exact.at("max"));
  EXPECT_NEAR(s.at("mean").get<double>(), exact.at("mean").get<double>(), 1e-9);
  EXPECT_EQ(s.at("exact"), false);
  EXPECT_EQ(s.at("relative_error").get<double>(), 1.0 / 128);
  auto within = [&](double got, double want) {
    EXPECT_LE(got, want);
    EXPECT_LE(std::abs(want - got), std::abs(want) / 128) << got << " vs " << want;
    EXPECT_TRUE(std::binary_search(sorted.begin(), sorted.end(), got)) << got;
  };
  for (const char* key : {"p50", "p95", "p99"})
    within(s.at(key).get<double>(), exact.at(key).get<double>());
  for (double p : {0.0, 0.05, 1.0, 25.0, 50.0, 90.0, 99.9, 100.0})
    within(set.percentile(p), percentile_of_sorted(sorted, p));
  ASSERT_EQ(s.at("order_statistics").size(), kSummaryOrderStatistics);
  for (std::size_t i = 0; i < kSummaryOrderStatistics; ++i)
    within(s.at("order_statistics")[i].get<double>(),
           exact.at("order_statistics")[i].get<double>());
  EXPECT_THROW(set.percentile(100.5), std::invalid_argument);
}

// Memory grows with the values' range, not their number: a million samples between 0.1 ms and
// 1000 ms fill at most 2^7 buckets per power of two of that range.
TEST(SampleSet, MemoryIsBoundedByTheRange) {
  SampleSet set(1000);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> exponent(-1.0, 3.0);
  for (int i = 0; i < 1000000; ++i) set.add(std::pow(10.0, exponent(rng)));
  const std::size_t octaves = std::size_t(std::ceil(std::log2(1e4))) + 1;
  EXPECT_LE(set.buckets(), octaves * 128);
  EXPECT_GE(set.buckets(), 1000u);  // the range is really covered at that resolution
  EXPECT_EQ(set.size(), 1000000u);
}

TEST(Metrics, TimersAndMemoryReadSomething) {
  Stopwatch w;
  volatile double x = 0;
  for (int i = 0; i < 100000; ++i) x = x + std::sqrt(double(i));
  EXPECT_GT(w.seconds(), 0.0);
  EXPECT_GT(thread_cpu_seconds(), 0.0);
  EXPECT_GE(process_cpu_seconds(), thread_cpu_seconds());
  // Another thread's clock, read while it runs: at least what it had used when it looked.
  double own = 0, read_from_here = 0;
  std::atomic<bool> looked{false}, read{false};
  std::thread t([&] {
    volatile double sink = 0;
    for (int i = 0; i < 2000000; ++i) sink = sink + double(i);
    own = thread_cpu_seconds();
    looked = true;
    while (!read) std::this_thread::yield();
  });
  while (!looked) std::this_thread::yield();
  read_from_here = thread_cpu_seconds(t.native_handle());
  read = true;
  t.join();
  EXPECT_GT(own, 0.0);
  EXPECT_GE(read_from_here, own);
  EXPECT_GT(peak_rss_bytes(), 0u);
  EXPECT_GE(peak_rss_bytes(), current_rss_bytes());
}

}  // namespace
}  // namespace gpusearch::metrics
