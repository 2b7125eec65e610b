#include "partition/pagerank.hpp"

#include <algorithm>
#include <cmath>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <tbb/parallel_sort.h>

namespace gpusearch {

PageRankResult compute_pagerank(std::uint32_t n, std::vector<std::pair<std::uint32_t, std::uint32_t>>& edges,
                                double damping, int max_iterations, double tolerance) {
  PageRankResult r;
  r.rank.assign(n, n ? 1.0 / n : 0.0);
  if (n == 0) return r;
  // Pull form: in-links grouped by target (CSR), so each target sums without write conflicts.
  std::erase_if(edges, [](const auto& e) { return e.first == e.second; });
  tbb::parallel_sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second < b.second : a.first < b.first;
  });
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::vector<std::uint32_t> out_degree(n, 0);
  std::vector<std::uint64_t> in_start(std::size_t(n) + 1, 0);
  for (const auto& [src, dst] : edges) {
    ++out_degree[src];
    ++in_start[dst + 1];
  }
  for (std::uint32_t v = 0; v < n; ++v) in_start[v + 1] += in_start[v];
  if (edges.empty()) return r;

  std::vector<double> contribution(n), next(n);
  const double base = (1.0 - damping) / n;
  for (r.iterations = 1; r.iterations <= max_iterations; ++r.iterations) {
    const double dangling = tbb::parallel_reduce(
        tbb::blocked_range<std::uint32_t>(0, n), 0.0,
        [&](const tbb::blocked_range<std::uint32_t>& range, double sum) {
          for (std::uint32_t u = range.begin(); u != range.end(); ++u) {
            contribution[u] = out_degree[u] ? r.rank[u] / out_degree[u] : 0.0;
            if (!out_degree[u]) sum += r.rank[u];
          }
          return sum;
        },
        std::plus<>());
    const double teleport = base + damping * dangling / n;
    r.final_delta = tbb::parallel_reduce(
        tbb::blocked_range<std::uint32_t>(0, n), 0.0,
        [&](const tbb::blocked_range<std::uint32_t>& range, double delta) {
          for (std::uint32_t v = range.begin(); v != range.end(); ++v) {
            double sum = 0;
            for (std::uint64_t e = in_start[v]; e < in_start[v + 1]; ++e)
              sum += contribution[edges[e].first];
            next[v] = teleport + damping * sum;
            delta += std::abs(next[v] - r.rank[v]);
          }
          return delta;
        },
        std::plus<>());
    r.rank.swap(next);
    if (r.final_delta < tolerance) break;
  }
  r.iterations = std::min(r.iterations, max_iterations);
  return r;
}

}  // namespace gpusearch
