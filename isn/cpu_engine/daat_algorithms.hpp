// Document-at-a-time query algorithms over PostingCursors, one shard, one docID range:
//   ranked_or               exhaustive disjunction (the baseline every speed-up is measured on)
//   ranked_and              conjunction, optionally with block-max skipping
//   wand                    Broder et al., CIKM 2003, section 3
//   block_max_wand          Ding and Suel, SIGIR 2011, section 4 (PISA's block_max_wand_query)
//   block_max_maxscore      Turtle and Flood 1995 with block-max bounds (Chakrabarti et al.,
//                           WSDM 2011; Mallia et al., SIGIR 2019)
// The pruning algorithms also stop early over GS-ordered docIDs (paper 000, eq. 5): every docID
// d' >= d has score(d', q) <= f * GS(d') <= f * GS(d), f = gs_bound_factor.
//
// Exactness (ARCHITECTURE.md): a document's score is the reference's, sum over query terms in
// query-term order in double of term_weight * impact, plus static_weight * PR'. A document is
// pruned only when an upper bound of its score is strictly below the threshold, so documents
// tying with the k-th keep their chance on the rank tie-break.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>

#include "common/scoring.hpp"
#include "common/search_result.hpp"
#include "common/shard_index.hpp"
#include "isn/cpu_engine/posting_cursor.hpp"
#include "isn/cpu_engine/top_k.hpp"

namespace gpusearch::cpu {

inline constexpr DocId kGsStride = 128;

// What every algorithm needs besides the cursors: the shard's per-document arrays and the
// query's static weight and bounds.
struct QueryContext {
  const ShardIndex* shard = nullptr;
  std::uint32_t shard_id = 0;
  DocId num_docs = 0;
  DocId range_end = 0;  // the run covers docIDs below it (min of the range's end and num_docs)
  // The reference's length normalization of every document, length_norm(bm25, |d|, avgdl),
  // computed once per shard (CpuEngine): bit-identical, and no division per candidate.
  const double* norms = nullptr;
  // The same norms as a 2-byte code per document into a table of the distinct values (a quarter
  // of the bytes: fewer cache misses on a large shard); null where the shard has too many
  // distinct lengths. cached_norm(d) reads whichever is there.
  const std::uint16_t* norm_codes = nullptr;
  const double* norm_table = nullptr;
  double cached_norm(DocId d) const { return norm_codes ? norm_table[norm_codes[d]] : norms[d]; }
  const float* pagerank = nullptr;
  // GS of the first document of every run of kGsStride docIDs: since GS is non-increasing in
  // the docID, gs_coarse[d / kGsStride] bounds GS(d') for every d' >= d, from a table small
  // enough to stay in cache (a lookup of GS(d) itself is a cache miss per candidate).
  const float* gs_coarse = nullptr;
  const GlobalRank* ranks = nullptr;
  double static_weight = 0;
  double index_alpha = 0;
  std::optional<double> gs_factor;  // set where GS early termination is exact and enabled

  // max PR'(d') over d' >= stride * i: a suffix maximum, exact (the same floats the score uses).
  const float* pagerank_suffix_max = nullptr;

  // An upper bound of static_weight * PR'(d') for every d' >= d: the suffix maximum of PR', and,
  // on a GS-ordered shard, GS(d) / index_alpha (PR'(d') <= GS(d') / index_alpha <= GS(d) /
  // index_alpha, inflated for float rounding).
  double static_bound(DocId d) const {
    if (static_weight == 0) return 0;
    double pr = double(pagerank_suffix_max[d / kGsStride]);
    if (index_alpha > 0)
      pr = std::min(pr, double(gs_coarse[d / kGsStride]) * (1 + kBoundSlack) / index_alpha);
    return static_weight * std::min(1.0, pr);
  }
  // True when no document d' >= d can reach `threshold` (paper 000, eq. 5).
  bool gs_stop(DocId d, double threshold) const {
    return gs_factor &&
           *gs_factor * double(gs_coarse[d / kGsStride]) * (1 + kBoundSlack) < threshold;
  }
  double norm(DocId d) const { return cached_norm(d); }
  // Starts loading what scoring d needs (a cache miss on large shards) while bounds are checked.
  void prefetch(DocId d) const {
    if (d == kNoDoc) return;
    if (norm_codes)
      __builtin_prefetch(norm_codes + d);
    else
      __builtin_prefetch(norms + d);
  }
  // The static part of d's score; zero (and no memory access) for bm25.
  double static_score(DocId d) const {
    return static_weight == 0 ? 0.0 : static_weight * double(pagerank[d]);
  }
  // Offers d with the given sum of term scores (query-term order) to the top-k (which reads
  // d's rank only on a tie and for the answer).
  void offer(TopK& top, DocId d, double term_sum) const {
    const double score = term_sum + static_score(d);
    if (score < top.threshold()) return;
    top.push(score, d);
  }
};

// Per-run outcome besides the heap.
struct RunStats {
  std::uint64_t and_matches = 0;  // ranked_and: matches seen (exact while the threshold is -inf)
  bool early_terminated = false;
};

// `terms` are in query-term order; every algorithm scores in that order.
RunStats ranked_or(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
                   QueryCounters& counters);
RunStats ranked_and(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
                    QueryCounters& counters, bool block_max);
RunStats wand(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
              QueryCounters& counters);
RunStats block_max_wand(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
                        QueryCounters& counters);
RunStats block_max_maxscore(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
                            QueryCounters& counters);

}  // namespace gpusearch::cpu
