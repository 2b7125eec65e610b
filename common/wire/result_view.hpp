// A result batch decoded without copying its external ids: the aggregator's merge thread reads
// every hit of every ISN's answer but keeps only k per query, so building a std::string per hit
// (one heap allocation each: most ids are past the small-string buffer) was most of the decode.
// Here each id is a std::string_view into the received message, the hits of the whole batch sit
// in one array and each query's answer is a set of spans into them; strings are made only for
// the hits a merge keeps (aggregator/kway_merge.hpp). The checks are decode_result_batch's, with
// the same errors: decode_result_batch is this decode followed by a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/search_result.hpp"
#include "common/wire/wire.hpp"

namespace gpusearch::wire {

// One shard's answer to one query, as views into a ResultBatchView (valid while it is, and while
// the bytes it was decoded from are).
struct ShardAnswerView {
  std::span<const RankedDoc> hits;            // best first; for and-or, the AND top-k
  std::span<const RankedDoc> or_hits;         // and-or: the OR top-k, when and_matches < k
  std::span<const std::string_view> hit_ids;  // the external ids of `hits`, same order
  std::span<const std::string_view> or_hit_ids;
  std::uint64_t and_matches = 0;
  QueryCounters counters;
  bool partial = false;
  bool ranker_fallback = false;
};

// Ownership: the ids point into the bytes given to decode(), which the caller keeps alive and
// unchanged for as long as it reads this view's ids (the merge thread: the InFlightBatch holds
// its received messages until its answers are merged and their kept ids copied out). Bytes that
// are not word-aligned are copied into the view first, and then the ids point into that copy.
// Moving a view keeps its spans valid; copying is not allowed (the copy's views would point
// into the original's storage).
class ResultBatchView {
 public:
  ResultBatchView() = default;
  explicit ResultBatchView(std::span<const std::byte> bytes) { decode(bytes); }
  ResultBatchView(ResultBatchView&&) noexcept = default;
  ResultBatchView& operator=(ResultBatchView&&) noexcept = default;
  ResultBatchView(const ResultBatchView&) = delete;
  ResultBatchView& operator=(const ResultBatchView&) = delete;

  // Decodes and checks a result batch (WireError naming what is wrong, as decode_result_batch),
  // replacing what the view held; reuses its arrays' capacity. After a throw the view is empty.
  void decode(std::span<const std::byte> bytes);
  // Forgets the batch (keeps the capacity): no view into old bytes is left to read.
  void clear();

  const ResultHeader& header() const { return header_; }
  std::size_t size() const { return queries_.size(); }  // the queries answered
  ShardAnswerView answer(std::size_t q) const;
  ShardAnswer copy_answer(std::size_t q) const;  // with owned id strings

 private:
  struct Query {
    std::uint32_t first = 0;  // its first hit in hits_ / ids_ (the AND list, then the OR list)
    std::uint32_t and_hits = 0, or_hits = 0;
    std::uint64_t and_matches = 0;
    QueryCounters counters;
    bool partial = false, ranker_fallback = false;
  };
  void decode_checked(std::span<const std::byte> bytes);

  ResultHeader header_;
  std::vector<std::uint64_t> aligned_copy_;  // only for bytes that were not word-aligned
  std::vector<RankedDoc> hits_;              // every hit of the batch, in wire order
  std::vector<std::string_view> ids_;        // hits_[h]'s external id
  std::vector<Query> queries_;
};

}  // namespace gpusearch::wire
