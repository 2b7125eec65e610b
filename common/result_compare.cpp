#include "common/result_compare.hpp"

#include <algorithm>
#include <cmath>
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
  for (std::size_t i = 0; i < ref.size(); ++i)
    if (!close(ref[i].score, cand[i].score, tol))
      return fmt::format("rank {}: score {} (document {}), reference {} (document {})", i + 1,
                         cand[i].score, cand[i].docid, ref[i].score, ref[i].docid);
  // Tie groups of the reference: documents may swap within one; the last group may be cut.
  for (std::size_t begin = 0; begin < ref.size();) {
    std::size_t end = begin + 1;
    while (end < ref.size() && close(ref[begin].score, ref[end].score, tol)) ++end;
    if (end < ref.size()) {
      std::vector<std::string> a, b;
      for (std::size_t i = begin; i < end; ++i) a.push_back(ref[i].docid), b.push_back(cand[i].docid);
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (a != b)
        return fmt::format("ranks {}-{}: documents differ (first: {} vs reference {})", begin + 1,
                           end, cand[begin].docid, ref[begin].docid);
    }
    begin = end;
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
