// What an engine returns for one query on one shard, and how per-shard results merge into the
// answer (the same code for in-process search and the aggregator).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/types.hpp"

namespace gpusearch {

struct RankedDoc {
  double score = 0;
  GlobalRank rank = 0;  // collection-wide tie-break key
  std::uint32_t shard = 0;
  DocId doc = 0;  // shard-local docID
};

// The answer order (ARCHITECTURE.md, "Exactness"): score descending, then docID ascending, where
// the docID is the collection-wide GS rank, so that ties break the same for every partitioning.
inline bool ranks_before(const RankedDoc& a, const RankedDoc& b) {
  return a.score > b.score || (a.score == b.score && a.rank < b.rank);
}

struct SearchParams {
  Mode mode = Mode::kOr;
  Scoring scoring = Scoring::kBm25;
  double alpha = 0.3;  // bm25-pr's alpha at query time
  unsigned k = 10;
  // Two-stage ranking (issue 12): each shard's first stage keeps its top `candidates` (0: one
  // stage), the second stage scores them with the query's ranker and keeps the top k.
  std::uint32_t candidates = 0;
};
// Whether queries with these parameters may share an engine call (the aggregator's batches, the
// scheduler's): every field equal, a NaN alpha (the index's default) equal to a NaN alpha.
inline bool same_params(const SearchParams& a, const SearchParams& b) {
  return a.mode == b.mode && a.scoring == b.scoring && a.k == b.k &&
         a.candidates == b.candidates &&
         (a.alpha == b.alpha || (std::isnan(a.alpha) && std::isnan(b.alpha)));
}
inline constexpr std::uint32_t kMaxCandidates = 10000;
// Candidates per shard when a ranker store is given without --candidates.
inline constexpr std::uint32_t kDefaultCandidates = 1000;

// Work counters, so that every speed figure can be explained.
struct QueryCounters {
  std::uint64_t postings_decoded = 0;
  std::uint64_t blocks_decoded = 0;
  std::uint64_t blocks_skipped = 0;
  std::uint64_t docs_scored = 0;
  std::uint64_t early_terminations = 0;  // queries that stopped before the end of their lists
  // and-or on shards sharing thresholds: OR phases stopped (and dropped) once the shards' AND
  // matches came to k (SharedThreshold's moot slot). Counted in process, not on the wire.
  std::uint64_t or_phases_stopped = 0;
  void add(const QueryCounters& o) {
    postings_decoded += o.postings_decoded;
    blocks_decoded += o.blocks_decoded;
    blocks_skipped += o.blocks_skipped;
    docs_scored += o.docs_scored;
    early_terminations += o.early_terminations;
    or_phases_stopped += o.or_phases_stopped;
  }
};
nlohmann::json to_json(const QueryCounters& c);

struct ShardResult {
  std::vector<RankedDoc> hits;     // best first, at most k; for and-or, the AND top-k
  // and-or: AND matches seen; exact whenever it is below k. With thresholds shared between
  // shards (CpuEngine::search with slots), a shard may count fewer and leave out or_hits where
  // another shard has found k AND matches: the sum over the shards, which decides, stays >= k.
  std::uint64_t and_matches = 0;
  std::vector<RankedDoc> or_hits;  // and-or: the OR top-k, present when and_matches < k
  QueryCounters counters;
  bool partial = false;
  bool ranker_fallback = false;  // its ranker failed: the first stage's top-k (issue 12)
};

class ShardIndex;

// The external ids of `results`' hits on `shard`, into out[0..] in packing order (query by
// query, its AND hits before its OR hits): the ISN's answer. Two prefetch rounds over all the
// hits first (their offsets, then their strings), so that the random misses overlap
// (tests/benchmarks/bench_answer_path.cpp times it).
void look_up_external_ids(const ShardIndex& shard, std::span<const ShardResult> results,
                          std::string_view* out);

struct QueryResult {
  std::vector<RankedDoc> hits;  // best first, at most k
  bool answered_by_or = false;  // and-or fell back to OR
  bool partial = false;         // some shard's answer is missing
  bool ranker_fallback = false; // some shard answered with its first stage (ranker failed)
  QueryCounters counters;
};

// Merges per-shard results. For and-or, AND answers if the shards together found at least k AND
// matches (each shard's count is exact below k, and a shard that stopped early has k), else OR.
QueryResult merge_shard_results(const SearchParams& params,
                                std::span<const ShardResult* const> shards);

// Keeps the best k of a stream of documents (min-heap on the answer order).
class TopKHeap {
 public:
  explicit TopKHeap(std::size_t k) : k_(k) { heap_.reserve(k); }
  bool full() const { return heap_.size() >= k_; }
  // Score a new document must beat (or tie with a smaller rank) to enter; -inf until full.
  double threshold() const {
    return full() && k_ > 0 ? heap_.front().score : -std::numeric_limits<double>::infinity();
  }
  void push(const RankedDoc& d);
  std::vector<RankedDoc> take_sorted();  // best first; empties the heap
  std::size_t size() const { return heap_.size(); }

 private:
  std::size_t k_;
  std::vector<RankedDoc> heap_;
};

}  // namespace gpusearch
