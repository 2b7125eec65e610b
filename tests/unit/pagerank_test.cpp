// PageRank by power iteration against the exact solution of its linear system.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "partition/pagerank.hpp"

using namespace gpusearch;

namespace {

// Solves x = (1-d)/n + d * (M x + dangling share) directly by Gaussian elimination.
std::vector<double> exact_pagerank(std::uint32_t n, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& edges,
                                   double d) {
  std::vector<double> out_degree(n, 0);
  for (auto [s, t] : edges) out_degree[s] += 1;
  // A x = b with A = I - d * (M + D), M[t][s] = 1/out(s), D[t][s] = 1/n for dangling s.
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));
  for (std::uint32_t i = 0; i < n; ++i) {
    a[i][i] = 1.0;
    a[i][n] = (1.0 - d) / n;
  }
  for (auto [s, t] : edges) a[t][s] -= d / out_degree[s];
  for (std::uint32_t s = 0; s < n; ++s)
    if (out_degree[s] == 0)
      for (std::uint32_t t = 0; t < n; ++t) a[t][s] -= d / n;
  for (std::uint32_t c = 0; c < n; ++c) {
    std::uint32_t piv = c;
    for (std::uint32_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    std::swap(a[c], a[piv]);
    for (std::uint32_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (std::uint32_t k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
    }
  }
  std::vector<double> x(n);
  for (std::uint32_t i = 0; i < n; ++i) x[i] = a[i][n] / a[i][i];
  return x;
}

TEST(PageRank, SmallGraphMatchesExactSolution) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges = {{0, 1}, {0, 2}, {1, 2}, {2, 0}, {3, 2}};
  const auto exact = exact_pagerank(4, edges, 0.85);
  auto copy = edges;
  const auto r = compute_pagerank(4, copy, 0.85, 1000, 1e-14);
  ASSERT_EQ(r.rank.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(r.rank[i], exact[i], 1e-10) << i;
  EXPECT_NEAR(std::accumulate(r.rank.begin(), r.rank.end(), 0.0), 1.0, 1e-12);
  EXPECT_NEAR(r.rank[3], 0.15 / 4, 1e-12);  // no in-links: teleport share only
  EXPECT_GT(r.rank[2], r.rank[1]);
}

TEST(PageRank, DanglingDocumentsDuplicateAndSelfLinks) {
  // 4 is dangling; the duplicate 0->1 and the self link 2->2 are ignored.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges = {{0, 1}, {0, 1}, {1, 4}, {2, 2}, {2, 4}, {3, 0}};
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> clean = {{0, 1}, {1, 4}, {2, 4}, {3, 0}};
  const auto exact = exact_pagerank(5, clean, 0.85);
  const auto r = compute_pagerank(5, edges, 0.85, 1000, 1e-14);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(r.rank[i], exact[i], 1e-10) << i;
}

TEST(PageRank, NoLinksGivesUniformRank) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> none;
  const auto r = compute_pagerank(3, none);
  for (double x : r.rank) EXPECT_DOUBLE_EQ(x, 1.0 / 3);
  EXPECT_EQ(r.iterations, 0);
}

}  // namespace
