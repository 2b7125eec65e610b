#include "common/search_result.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/shard_index.hpp"

namespace gpusearch {

void look_up_external_ids(const ShardIndex& shard, std::span<const ShardResult> results,
                          std::string_view* out) {
  for (int stage = 0; stage < 2; ++stage)
    for (const ShardResult& r : results)
      for (const auto* list : {&r.hits, &r.or_hits})
        for (const RankedDoc& d : *list) shard.prefetch_external_id(d.doc, stage);
  for (const ShardResult& r : results)
    for (const auto* list : {&r.hits, &r.or_hits})
      for (const RankedDoc& d : *list) *out++ = shard.external_id(d.doc);
}

nlohmann::json to_json(const QueryCounters& c) {
  return {{"postings_decoded", c.postings_decoded},
          {"blocks_decoded", c.blocks_decoded},
          {"blocks_skipped", c.blocks_skipped},
          {"docs_scored", c.docs_scored},
          {"early_terminations", c.early_terminations},
          {"or_phases_stopped", c.or_phases_stopped}};
}

void TopKHeap::push(const RankedDoc& d) {
  if (k_ == 0) return;
  // heap_.front() is the worst kept document: the heap is ordered so that "better" sinks.
  if (heap_.size() < k_) {
    heap_.push_back(d);
    std::push_heap(heap_.begin(), heap_.end(), ranks_before);
  } else if (ranks_before(d, heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), ranks_before);
    heap_.back() = d;
    std::push_heap(heap_.begin(), heap_.end(), ranks_before);
  }
}

std::vector<RankedDoc> TopKHeap::take_sorted() {
  std::vector<RankedDoc> out = std::move(heap_);
  heap_.clear();
  std::sort(out.begin(), out.end(), ranks_before);
  return out;
}

QueryResult merge_shard_results(const SearchParams& params,
                                std::span<const ShardResult* const> shards) {
  QueryResult r;
  bool use_or = false;
  if (params.mode == Mode::kAndOr) {
    std::uint64_t and_matches = 0;
    for (const ShardResult* s : shards) and_matches += s->and_matches;
    use_or = and_matches < params.k;
  }
  std::vector<RankedDoc> all;
  for (const ShardResult* s : shards) {
    const auto& list = use_or ? s->or_hits : s->hits;
    all.insert(all.end(), list.begin(), list.end());
    r.counters.add(s->counters);
    r.partial = r.partial || s->partial;
    r.ranker_fallback = r.ranker_fallback || s->ranker_fallback;
  }
  const std::size_t n = std::min<std::size_t>(params.k, all.size());
  std::partial_sort(all.begin(), all.begin() + std::ptrdiff_t(n), all.end(), ranks_before);
  all.resize(n);
  r.hits = std::move(all);
  r.answered_by_or = use_or;
  return r;
}

}  // namespace gpusearch
