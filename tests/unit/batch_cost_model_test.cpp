// BatchCostModel (isn/batch_cost_model.hpp): the GPU side's marginal cost per query within a
// batch, fitted online from calls (routing `specialize`).
#include <gtest/gtest.h>

#include <random>

#include "isn/batch_cost_model.hpp"

using gpusearch::BatchCostModel;

TEST(BatchCostModel, RecoversCallQueryAndPostingCostsFromNoisyCalls) {
  // 500 us a call, 2 us a query, 0.1 ns a posting; 5% noise.
  const double a = 500e-6, b = 2e-6, c = 0.1e-9;
  BatchCostModel m(/*half_life_calls=*/1e9, /*min_calls=*/8);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> queries(1, 4096);
  std::lognormal_distribution<double> postings_per_query(std::log(25000.0), 1.0);
  std::normal_distribution<double> noise(1.0, 0.05);
  for (int call = 0; call < 400; ++call) {
    EXPECT_EQ(m.ready(), call >= 8) << call;
    const int n = queries(rng);
    double postings = 0;
    for (int i = 0; i < n; ++i) postings += postings_per_query(rng);
    m.observe(n, postings, (a + b * n + c * postings) * noise(rng));
  }
  const auto beta = m.coefficients();
  EXPECT_NEAR(beta[0], a, 0.3 * a);
  EXPECT_NEAR(beta[1], b, 0.3 * b);
  EXPECT_NEAR(beta[2], c, 0.3 * c);
  // A query's marginal cost: b + c * its postings.
  EXPECT_NEAR(m.marginal(100000), b + c * 100000, 0.3 * (b + c * 100000));
  EXPECT_LT(m.marginal(100), m.marginal(1000000));
}

TEST(BatchCostModel, FollowsAChangeAndNeverPredictsNothing) {
  BatchCostModel m(/*half_life_calls=*/16, /*min_calls=*/4);
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> queries(64, 2048);
  std::uniform_real_distribution<double> per_query(1e3, 1e5);
  auto run = [&](double c, int calls) {
    for (int i = 0; i < calls; ++i) {
      const int n = queries(rng);
      double postings = 0;
      for (int q = 0; q < n; ++q) postings += per_query(rng);
      m.observe(n, postings, 1e-4 + 1e-6 * n + c * postings);
    }
  };
  run(1e-9, 200);
  EXPECT_NEAR(m.coefficients()[2], 1e-9, 0.1e-9);
  run(4e-9, 200);  // the postings got dearer: the old calls are forgotten
  EXPECT_NEAR(m.coefficients()[2], 4e-9, 0.4e-9);
  EXPECT_GT(m.marginal(0), 0.0);
  // Equal batches (collinear: queries and postings move together) still solve, and ignore
  // what is not a call.
  BatchCostModel equal(16, 4);
  for (int i = 0; i < 20; ++i) equal.observe(100, 100 * 5000.0, 1e-3);
  equal.observe(0, 1, 1.0);
  equal.observe(10, -1, 1.0);
  EXPECT_TRUE(equal.ready());
  EXPECT_GT(equal.marginal(5000), 0.0);
  EXPECT_NEAR(100 * equal.marginal(5000) + equal.coefficients()[0], 1e-3, 1e-4);
  EXPECT_EQ(equal.calls(), 20u);
}
