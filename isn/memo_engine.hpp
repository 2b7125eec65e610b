// A measurement probe (ISN --probe-memo-answers, issue 16): the engine answers every query it has
// seen before (the same terms in the same order, the same search parameters) from memory, with
// the very ShardResult its inner engine gave the first time, and searches only the others. With
// a real query log replayed several times the ISN then costs almost nothing after the first
// pass, yet every answer is the engine's own, exact and of its real size: what is left of a
// batch's wall time is the cluster's own cost (the aggregator's ceiling), on real queries and
// real result lists. Not a result cache for serving: it is unbounded and keeps everything.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/query_engine.hpp"

namespace gpusearch {

class MemoEngine final : public QueryEngine {
 public:
  explicit MemoEngine(std::unique_ptr<QueryEngine> inner);
  std::string_view name() const override { return inner_->name(); }
  bool runs_batch_in_parallel() const override { return inner_->runs_batch_in_parallel(); }
  void prepare(const SearchParams& params) override { inner_->prepare(params); }
  // Queries seen before are copied from memory; the rest go to the inner engine as one batch.
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;
  // The inner engine's stats and a "memo" object: queries answered from memory and searched.
  nlohmann::json stats() const override;

  std::uint64_t answered_from_memory() const { return hits_; }
  std::uint64_t searched() const { return misses_; }

  // The key of a query under params: its terms (IDs, in order) and every parameter that changes
  // an answer. Public for the test.
  static std::string key(const Query& q, const SearchParams& params);

 private:
  std::unique_ptr<QueryEngine> inner_;
  std::unordered_map<std::string, ShardResult> memory_;
  std::uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace gpusearch
