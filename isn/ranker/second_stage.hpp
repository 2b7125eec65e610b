// Second-stage ranking on one shard (paper 004, 2.1.4: "the second step is the document ranking
// step"): the first stage's top-N candidates of each query are scored by the query's ranker
// (features from the shard's forward index, transforms, model; on the CPU twin or the GPU) and
// the best k by that score become the shard's answer. Queries of a batch that share a ranker are
// ranked in one call. A ranker that cannot be loaded (unknown, malformed, too large) leaves its
// queries with the first stage's top-k, flagged (ShardResult::ranker_fallback) and counted with
// the error; nothing is lost.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/forward_index.hpp"
#include "common/query.hpp"
#include "common/search_result.hpp"
#include "common/shard_index.hpp"
#include "isn/ranker/ranker_backend.hpp"
#include "isn/ranker/ranker_cache.hpp"

namespace gpusearch::ranker {

class SecondStageRanker {
 public:
  // resident_streams: offer the forward index to the backend to keep (a GPU copies it to the
  // device once); else every request carries its candidates' streams.
  SecondStageRanker(const ShardIndex& shard, const ForwardIndex& forward, RankerCache& cache,
                    RankerBackend& backend, bool resident_streams = true);

  // results[q]: the first stage's answer of queries[q] (params.candidates or more hits). On
  // return: a query with a ranker holds its top params.k by ranker score (score descending, then
  // GS rank); one without, its first k hits. and-or's OR list is ranked the same way.
  void rank(std::span<const Query> queries, const SearchParams& params,
            std::span<ShardResult> results);

  RankerCache& cache() { return cache_; }
  nlohmann::json stats() const;

 private:
  const ShardIndex& shard_;
  const ForwardIndex& forward_;
  RankerCache& cache_;
  RankerBackend& backend_;
  FeatureBatch batch_;
  std::vector<float> scores_;
  // Counters.
  std::uint64_t queries_ranked_ = 0, candidates_scored_ = 0, fallbacks_ = 0, calls_ = 0;
  std::vector<std::string> fallback_messages_;  // the first few
  RankingTimes times_;
  double gather_ms_ = 0;
  bool streams_resident_ = false;
};

// Fills `batch` (cleared first) with the candidates of queries[members]: for each, its hits then
// its OR hits, their streams referenced in the forward index (or with `gather`, copied into the
// batch); bm25-pr features use `alpha`.
void build_feature_batch(const ShardIndex& shard, const ForwardIndex& forward,
                         std::span<const Query> queries, std::span<const std::size_t> members,
                         std::span<const ShardResult> results, double alpha, FeatureBatch& batch,
                         bool gather = false);

// Keeps the best k of `hits` (in place) by score, then GS rank.
void keep_top_k(std::vector<RankedDoc>& hits, unsigned k);

}  // namespace gpusearch::ranker
