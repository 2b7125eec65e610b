// The aggregator's merge: each ISN's list is already sorted in the answer order (score
// descending, then collection-wide GS rank ascending), so the top-k of their union is a k-way
// merge of their heads: O(k * ISNs) comparisons, no copy of the union, no sort, and each hit
// keeps the external id its ISN sent with it. (GS ranks are unique per document, so the answer
// order is total and the result equals merge_shard_results' partial sort, which
// AggregatorMerge.KWayEqualsPartialSort checks.)
#pragma once

#include <span>
#include <vector>

#include "aggregator/result_cache.hpp"
#include "common/search_result.hpp"
#include "common/wire/result_view.hpp"
#include "common/wire/wire.hpp"

namespace gpusearch {

struct MergedAnswer {
  CachedAnswer answer;  // hits with external ids, best first; answered_by_or for and-or
  QueryCounters counters;
  bool partial = false;  // some ISN's answer is partial (a missing ISN is the caller's to add)
  bool ranker_fallback = false;  // some ISN answered with its first stage (the ranker failed)
};

// A merged answer whose hits are views into the answers merged (valid while they are).
struct MergedHits {
  std::vector<HitView> hits;  // best first
  bool answered_by_or = false;
  QueryCounters counters;
  bool partial = false;
  bool ranker_fallback = false;
};

// For and-or, OR answers when the ISNs together found fewer than k AND matches (each ISN's
// count is exact below k), as merge_shard_results decides. The merge thread's form: the answers
// are views into the received messages (wire::ResultBatchView) and so are the kept hits' ids;
// `out` is overwritten (its capacity reused), nothing is allocated per hit.
void merge_answer_views(const SearchParams& params, std::span<const wire::ShardAnswerView> answers,
                        MergedHits& out);
// The same merge with owned ids (for callers that keep the answer past the answers' life).
MergedAnswer merge_answers(const SearchParams& params,
                           std::span<const wire::ShardAnswerView> answers);
// The same merge over decoded answers that own their ids (a hit past its answer's id list gets
// the id "").
MergedAnswer merge_answers(const SearchParams& params,
                           std::span<const wire::ShardAnswer* const> answers);

}  // namespace gpusearch
