// PageRank by power iteration (damping d; dangling documents spread their rank evenly),
// parallel with oneTBB. Duplicate links and self links are ignored.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace gpusearch {

struct PageRankResult {
  std::vector<double> rank;  // sums to 1
  int iterations = 0;
  double final_delta = 0;  // L1 change of the last iteration
};

// edges: (source, target) document indices < n. Consumes the vector (sorted in place).
PageRankResult compute_pagerank(std::uint32_t n, std::vector<std::pair<std::uint32_t, std::uint32_t>>& edges,
                                double damping = 0.85, int max_iterations = 200,
                                double tolerance = 1e-10);

}  // namespace gpusearch
