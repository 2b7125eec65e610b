// Per term of a shard, lower bounds of the K-th largest impact among its postings, for a ladder
// of K (issue 9: a starting threshold for the GPU's OR kernels, as the CPU engine's per-query
// threshold seed is for it, issue 17). Every score is a sum of non-negative parts, so a query's
// score of a document is at least one term's share of it, and for every query term t
//   weight_t * kth_impact_t(K)  <=  the query's K-th best score in the shard,
// once t's list holds K documents. Built once per shard from the blocks of highest block maxima
// of each list (decoded, never the whole list), so it costs a fraction of a pass over the shard.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/shard_index.hpp"

namespace gpusearch {

class KthImpactTable {
 public:
  // K of each stored bound; a query's k takes the smallest K >= k (a K-th best is at most the
  // k-th best for K >= k). k past the last: no bound.
  static constexpr std::array<std::uint32_t, 10> kLadder = {1,  2,   5,   10,  20,
                                                            50, 100, 200, 500, 1000};
  // Blocks decoded per list beyond what kLadder.back() postings need: the more high-maximum
  // blocks are decoded, the closer each bound is to the list's real K-th impact.
  static constexpr unsigned kExtraBlocks = 3;

  KthImpactTable() = default;
  // Decodes at most ceil(kLadder.back() / 128) + kExtraBlocks blocks of each list, those of
  // highest block maximum, on every core (oneTBB). Lists shorter than `min_df` get no bounds
  // (lower_bound gives 0): a shard's many short lists dominate the build time (5.5M terms of
  // the synthetic 2.5M shard: 17 s on 2 cores), and a caller can decode one of them per query.
  explicit KthImpactTable(const ShardIndex& shard, std::uint32_t min_df = 1);

  // A lower bound (>= 0) of the k-th largest impact(d, t) over t's postings in the shard; 0 when
  // t has fewer than k postings, k is 0 or past the ladder, or t is not a term of the shard.
  // The stored floats are rounded down.
  double lower_bound(TermId t, std::size_t k) const;

  // From rows already computed: term t's bounds are values[row_begin[t], row_begin[t + 1]), one
  // per ladder K from the first (a prefix of kLadder; tests, and combine()).
  KthImpactTable(std::vector<std::uint32_t> row_begin, std::vector<float> values);

  // The tables of several docID-range shards of one collection that share a vocabulary (the
  // same term ids): bounds of each term's K-th largest impact over the shards together, for
  // pruning toward the collection's top-k (issue 16: four quarter-shard engines then start
  // from the threshold one whole-shard engine starts from). Shard s has at least K_j postings
  // of impact >= its bound L_s(K_j); so at least sum_s max{K_j : L_s(K_j) >= x} postings of the
  // collection have impact >= x, and the K-th bound is the largest such x reaching K. Every
  // table must have the same number of terms (else Error).
  static KthImpactTable combine(std::span<const KthImpactTable* const> shards);

  // The rows as flat arrays, and back (an MPI exchange between the ISNs of a node): the terms
  // that have bounds, their bound counts, and the bounds in term order.
  struct Rows {
    std::uint32_t num_terms = 0;
    std::vector<std::uint32_t> terms;
    std::vector<std::uint8_t> counts;
    std::vector<float> values;
  };
  Rows rows() const;
  static KthImpactTable from_rows(const Rows& rows);

  // Every bound times `factor` (a test's weakened bound: above 1 it is no longer a lower bound).
  KthImpactTable scaled(double factor) const;

  std::size_t num_terms() const { return row_begin_.empty() ? 0 : row_begin_.size() - 1; }
  std::size_t bytes() const { return row_begin_.size() * 4 + values_.size() * 4; }
  double build_seconds() const { return build_seconds_; }

 private:
  // Term t's bounds are values_[row_begin_[t], row_begin_[t + 1]): one per ladder K <= its df.
  std::vector<std::uint32_t> row_begin_;
  std::vector<float> values_;
  double build_seconds_ = 0;
};

}  // namespace gpusearch
