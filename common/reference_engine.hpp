// The exhaustive reference engine: the oracle every fast engine is tested against. It decodes
// every posting list of the query in full, accumulates each document's score in double
// precision in query-term order, and sorts. Simple and obviously correct, not fast.
#pragma once

#include <cstdint>
#include <vector>

#include "common/query_engine.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

// One query on one shard, to depth `depth` (>= k; deeper lists let tests recognize ties at the
// cut-off). and_matches and the OR list are always exact and complete to depth.
struct ReferenceShardAnswer {
  std::vector<RankedDoc> and_hits;  // AND, best first, at most depth
  std::vector<RankedDoc> or_hits;   // OR, best first, at most depth
  std::uint64_t and_matches = 0;
  std::uint64_t or_matches = 0;
  QueryCounters counters;
};
ReferenceShardAnswer reference_search_shard(const ShardIndex& shard, std::uint32_t shard_id,
                                            const Query& query, const SearchParams& params,
                                            std::size_t depth);

// The reference answer over every open shard of `index`, to `depth`.
struct ReferenceAnswer {
  std::vector<RankedDoc> hits;
  std::uint64_t total_matches = 0;  // of the list that answers (AND, OR, or and-or's choice)
  bool answered_by_or = false;
};
ReferenceAnswer reference_answer(const Index& index, const Query& query, const SearchParams& params,
                                 std::size_t depth);

// The reference as a QueryEngine on one shard.
class ReferenceEngine final : public QueryEngine {
 public:
  ReferenceEngine(const ShardIndex& shard, std::uint32_t shard_id)
      : shard_(shard), shard_id_(shard_id) {}
  std::string_view name() const override { return "reference"; }
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;

 private:
  const ShardIndex& shard_;
  std::uint32_t shard_id_;
};

}  // namespace gpusearch
