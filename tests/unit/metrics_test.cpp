// The one percentile definition (nearest rank) and the summary every metrics JSON uses.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <stdexcept>
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

TEST(Metrics, TimersAndMemoryReadSomething) {
  Stopwatch w;
  volatile double x = 0;
  for (int i = 0; i < 100000; ++i) x = x + std::sqrt(double(i));
  EXPECT_GT(w.seconds(), 0.0);
  EXPECT_GT(thread_cpu_seconds(), 0.0);
  EXPECT_GT(peak_rss_bytes(), 0u);
  EXPECT_GE(peak_rss_bytes(), current_rss_bytes());
}

}  // namespace
}  // namespace gpusearch::metrics
