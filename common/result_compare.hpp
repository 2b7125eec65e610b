// The exactness check (ARCHITECTURE.md, "Exactness"): an engine's top-k must equal the
// reference's, same documents in the same order, scores within 1e-5 relative; where reference
// scores tie within that tolerance, either order (and, at the cut-off, either document) passes.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "common/search_result.hpp"

namespace gpusearch {

inline constexpr double kScoreRelativeTolerance = 1e-5;

// `reference_deep` is the reference's answer computed to a depth beyond k (so that documents
// tying with the k-th can be recognized); `total_matches` is how many documents match in all.
// Returns a description of the first difference, or nullopt if `candidate` is a correct top-k.
std::optional<std::string> compare_top_k(std::span<const RankedDoc> reference_deep,
                                         std::size_t total_matches, std::size_t k,
                                         std::span<const RankedDoc> candidate,
                                         double relative_tolerance = kScoreRelativeTolerance);

}  // namespace gpusearch

#include <map>
#include <vector>

#include "common/run_file.hpp"

namespace gpusearch {

// Two TREC runs compared query by query under the same rule: the same queries, the same number
// of documents each, scores within tolerance position by position, and the same documents
// within each group of tied reference scores (at the cut-off, any tied document passes).
struct RunComparison {
  std::size_t queries = 0;  // compared
  std::size_t documents = 0;
  std::size_t differing_queries = 0;
  std::vector<std::string> differences;  // the first few, one line each
  bool equal() const { return differing_queries == 0; }
};
RunComparison compare_runs(const std::map<std::string, std::vector<RunEntry>>& reference,
                           const std::map<std::string, std::vector<RunEntry>>& candidate,
                           double relative_tolerance = kScoreRelativeTolerance,
                           std::size_t max_differences = 20);

}  // namespace gpusearch
