// Scoring (ARCHITECTURE.md, "Scoring"). Every engine writes a document's score in one form,
//   score(d, q) = static_weight * PR'(d) + sum_i term_weight[i] * impact(d, t_i),
//   impact(d, t) = tf / (tf + k1 * (1 - b + b * |d| / avgdl))   = IR(d, t) / (k1 + 1), in [0, 1),
// which is bm25 with term_weight = idf * (k1 + 1) and static_weight = 0, and bm25-pr (paper 000,
// eq. 3) with term_weight = (1 - alpha) * idf / sum(idf) and static_weight = alpha.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/types.hpp"

namespace gpusearch {

struct Bm25Params {
  double k1 = 1.2;
  double b = 0.75;
};

// Collection-wide statistics. Every shard carries the same values, so scores never depend on
// the partitioning.
struct CollectionStats {
  std::uint64_t num_docs = 0;
  std::uint64_t total_tokens = 0;
  double avg_doc_length = 0;
};

inline double idf(std::uint64_t num_docs, std::uint64_t df) {
  const double n = static_cast<double>(num_docs), f = static_cast<double>(df);
  return std::log(1.0 + (n - f + 0.5) / (f + 0.5));
}

// k1 * (1 - b + b * |d| / avgdl): the per-document part of the BM25 denominator.
inline double length_norm(const Bm25Params& p, std::uint32_t doc_length, double avg_doc_length) {
  return p.k1 * (1.0 - p.b + p.b * static_cast<double>(doc_length) / avg_doc_length);
}

inline double impact(std::uint32_t tf, double norm) {
  return static_cast<double>(tf) / (static_cast<double>(tf) + norm);
}
inline float impact_f(std::uint32_t tf, float norm) {
  return static_cast<float>(tf) / (static_cast<float>(tf) + norm);
}

// The query-dependent weights of the score formula above.
struct QueryWeights {
  double static_weight = 0;
  std::vector<double> term_weight;  // in query term order (after de-duplication)
  double sum_term_weight = 0;
};

// Into `w`, reusing its vector (an engine's per-run scratch).
inline void make_query_weights(QueryWeights& w, Scoring scoring, double alpha,
                               const Bm25Params& p, std::uint64_t num_docs,
                               std::span<const std::uint32_t> global_df) {
  w.term_weight.clear();
  double sum_idf = 0;
  for (auto df : global_df) {
    const double i = idf(num_docs, df);
    sum_idf += i;
    w.term_weight.push_back(i);  // the idf for now: one logarithm a term
  }
  for (double& x : w.term_weight)
    x = scoring == Scoring::kBm25 ? x * (p.k1 + 1.0) : (1.0 - alpha) * x / sum_idf;
  w.static_weight = scoring == Scoring::kBm25 ? 0.0 : alpha;
  w.sum_term_weight = 0;
  for (double x : w.term_weight) w.sum_term_weight += x;
}
inline QueryWeights make_query_weights(Scoring scoring, double alpha, const Bm25Params& p,
                                       std::uint64_t num_docs,
                                       std::span<const std::uint32_t> global_df) {
  QueryWeights w;
  w.term_weight.reserve(global_df.size());
  make_query_weights(w, scoring, alpha, p, num_docs, global_df);
  return w;
}

// Global score (paper 000, eq. 4) in normalized form:
//   GS(d) = alpha * PR'(d) + (1 - alpha) * max over t in d of impact(d, t).
inline double global_score(double alpha, double pagerank_normalized, double max_impact) {
  return alpha * pagerank_normalized + (1.0 - alpha) * max_impact;
}

// The factor f with score(d, q) <= f * GS(d) for every document d, for an index whose GS was
// built with index_alpha. Since score <= static_weight * PR' + sum_term_weight * max_impact, f
// needs f * index_alpha >= static_weight and f * (1 - index_alpha) >= sum_term_weight. Returns
// nullopt where no such f exists (index_alpha = 0 and the query has a static part), in which
// case an engine must not terminate early on GS.
inline std::optional<double> gs_bound_factor(const QueryWeights& w, double index_alpha) {
  if (index_alpha <= 0.0) {
    if (w.static_weight > 0.0) return std::nullopt;
    return w.sum_term_weight;
  }
  if (index_alpha >= 1.0) {
    if (w.sum_term_weight > 0.0) return std::nullopt;
    return w.static_weight;
  }
  return std::max(w.static_weight / index_alpha, w.sum_term_weight / (1.0 - index_alpha));
}

// Float rounding in fast engines can put a computed score a few ulps above the exact bound; an
// engine that stops early compares against the bound inflated by this relative slack.
inline constexpr double kBoundSlack = 1e-5;

}  // namespace gpusearch
