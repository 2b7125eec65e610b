#include "common/result_compare.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace gpusearch {

namespace {
bool close(double a, double b, double tol) {
  return std::abs(a - b) <= tol * std::max({std::abs(a), std::abs(b), 1e-12});
}
}  // namespace

std::optional<std::string> compare_top_k(std::span<const RankedDoc> ref, std::size_t total_matches,
                                         std::size_t k, std::span<const RankedDoc> cand,
                                         double tol) {
  const std::size_t expected = std::min(k, total_matches);
  if (cand.size() != expected)
    return fmt::format("returned {} documents, expected {}", cand.size(), expected);
  if (ref.size() < expected)
    return fmt::format("reference list too short ({} < {})", ref.size(), expected);
  std::unordered_map<GlobalRank, std::size_t> ref_pos;
  for (std::size_t j = 0; j < ref.size(); ++j) ref_pos.emplace(ref[j].rank, j);
  std::unordered_set<GlobalRank> seen;
  for (std::size_t i = 0; i < cand.size(); ++i) {
    if (!seen.insert(cand[i].rank).second)
      return fmt::format("rank {}: document (global rank {}) returned twice", i + 1, cand[i].rank);
    if (!close(cand[i].score, ref[i].score, tol))
      return fmt::format("rank {}: score {:.9g}, reference {:.9g}", i + 1, cand[i].score,
                         ref[i].score);
    if (cand[i].rank == ref[i].rank) continue;
    // A different document passes only if it ties, within tolerance, with the reference's.
    auto it = ref_pos.find(cand[i].rank);
    if (it != ref_pos.end()) {
      if (close(ref[it->second].score, ref[i].score, tol)) continue;
      return fmt::format("rank {}: document (global rank {}) has reference score {:.9g}, but "
                         "rank {} needs {:.9g}",
                         i + 1, cand[i].rank, ref[it->second].score, i + 1, ref[i].score);
    }
    // Not in the deep list: acceptable only if the tie group runs past the deep list's end.
    const bool tie_group_runs_past_end =
        ref.size() < total_matches && close(ref.back().score, ref[i].score, tol);
    if (!tie_group_runs_past_end)
      return fmt::format("rank {}: document (global rank {}) is not in the reference top {}",
                         i + 1, cand[i].rank, ref.size());
  }
  return std::nullopt;
}

}  // namespace gpusearch

namespace gpusearch {

namespace {
std::optional<std::string> compare_run_query(const std::vector<RunEntry>& ref,
                                             const std::vector<RunEntry>& cand, double tol) {
  if (ref.size() != cand.size())
    return fmt::format("{} documents, reference has {}", cand.size(), ref.size());
  // The rule of compare_top_k: rank by rank the score within tol, and a different document only
  // if it ties, within tol, with the reference's document at that rank. Near-ties chain (a ~ b,
  // b ~ c, a !~ c): b and c may swap although c is not near a. (A grouping by each tie group's
  // first score refused that swap: one H200 run of 20,000 queries at k = 1000, session 44.)
  std::unordered_map<std::string_view, std::size_t> ref_pos;
  for (std::size_t j = 0; j < ref.size(); ++j) ref_pos.emplace(ref[j].docid, j);
  std::unordered_set<std::string_view> seen;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!seen.insert(cand[i].docid).second)
      return fmt::format("rank {}: document {} listed twice", i + 1, cand[i].docid);
    if (!close(ref[i].score, cand[i].score, tol))
      return fmt::format("rank {}: score {} (document {}), reference {} (document {})", i + 1,
                         cand[i].score, cand[i].docid, ref[i].score, ref[i].docid);
    if (cand[i].docid == ref[i].docid) continue;
    const auto it = ref_pos.find(cand[i].docid);
    if (it != ref_pos.end()) {
      if (close(ref[it->second].score, ref[i].score, tol)) continue;
      return fmt::format(
          "rank {}: document {} has reference score {} (rank {}), but rank {} "
          "needs {} (document {})",
          i + 1, cand[i].docid, ref[it->second].score, it->second + 1, i + 1, ref[i].score,
          ref[i].docid);
    }
    // Not in the reference's list: only where a tie group may run past the run's depth.
    if (!close(ref.back().score, ref[i].score, tol))
      return fmt::format("rank {}: document {} is not in the reference's {} (rank {} there: {})",
                         i + 1, cand[i].docid, ref.size(), i + 1, ref[i].docid);
  }
  return std::nullopt;
}
}  // namespace

RunComparison compare_runs(const std::map<std::string, std::vector<RunEntry>>& reference,
                           const std::map<std::string, std::vector<RunEntry>>& candidate,
                           double tol, std::size_t max_differences) {
  RunComparison c;
  auto differ = [&](const std::string& qid, const std::string& what) {
    ++c.differing_queries;
    if (c.differences.size() < max_differences) c.differences.push_back("query " + qid + ": " + what);
  };
  for (const auto& [qid, ref] : reference) {
    ++c.queries;
    c.documents += ref.size();
    const auto it = candidate.find(qid);
    if (it == candidate.end()) {
      differ(qid, fmt::format("missing (reference has {} documents)", ref.size()));
      continue;
    }
    if (auto d = compare_run_query(ref, it->second, tol)) differ(qid, *d);
  }
  for (const auto& [qid, cand] : candidate)
    if (!reference.count(qid)) {
      ++c.queries;
      differ(qid, fmt::format("not in the reference ({} documents)", cand.size()));
    }
  return c;
}

}  // namespace gpusearch
