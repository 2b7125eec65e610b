#include "common/wire/result_view.hpp"

#include <cstring>

#include "common/wire/wire_reader.hpp"

namespace gpusearch::wire {

void ResultBatchView::clear() {
  header_ = {};
  aligned_copy_.clear();
  hits_.clear();
  ids_.clear();
  queries_.clear();
}

void ResultBatchView::decode(std::span<const std::byte> bytes) {
  clear();
  try {
    decode_checked(bytes);
  } catch (...) {
    clear();  // nothing half-read stays readable
    throw;
  }
}

void ResultBatchView::decode_checked(std::span<const std::byte> bytes) {
  // The ids will point into the bytes the reader reads: when with_reader would read an aligned
  // copy of its own (gone when it returns), make that copy here, where it lives with the view.
  // Sizes it refuses are left for it to refuse, with its error.
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(std::uint64_t) != 0 &&
      !bytes.empty() && bytes.size() % sizeof(std::uint64_t) == 0 &&
      bytes.size() <= kMaxWireBytes) {
    aligned_copy_.resize(bytes.size() / sizeof(std::uint64_t));
    std::memcpy(aligned_copy_.data(), bytes.data(), bytes.size());
    bytes = std::as_bytes(std::span<const std::uint64_t>(aligned_copy_));
  }
  detail::with_reader(bytes, "result batch", [&](capnp::MessageReader& reader) {
    const auto root = reader.getRoot<schema::ResultBatch>();
    header_ = detail::get_header(root);
    const auto counts = root.getHitCounts();
    const auto scores = root.getScores();
    const auto ranks = root.getRanks();
    const auto docs = root.getDocs();
    const auto ends = root.getExtIdEnds();
    const auto ids = root.getExtIds();
    const auto and_matches = root.getAndMatches();
    const auto partial = root.getPartial();
    const auto ranker_fallback = root.getRankerFallback();
    const auto counters = root.getCounters();
    // Every column must agree with the counts before anything is read through them.
    const std::size_t nq = counts.size() / 2;
    if (counts.size() % 2 != 0 || nq > kMaxBatchQueries)
      throw WireError(fmt::format("result batch: {} hit counts", counts.size()));
    std::size_t total = 0;
    for (auto c : counts) {
      if (c > kMaxK) throw WireError(fmt::format("result batch: {} hits, over k", c));
      total += c;
    }
    if (scores.size() != total || ranks.size() != total || docs.size() != total ||
        ends.size() != total)
      throw WireError(fmt::format("result batch: columns of {}/{}/{}/{} hits for {} counted",
                                  scores.size(), ranks.size(), docs.size(), ends.size(), total));
    if (and_matches.size() != nq || partial.size() != nq || ranker_fallback.size() != nq ||
        counters.size() != 5 * nq)
      throw WireError("result batch: per-query columns do not match the query count");
    // The id bytes are the message's own (a flat-array reader reads in place).
    const char* id_bytes = reinterpret_cast<const char*>(ids.begin());
    hits_.resize(total);
    ids_.resize(total);
    std::uint32_t at = 0;
    for (unsigned h = 0; h < total; ++h) {
      hits_[h] = {scores[h], ranks[h], header_.shard_id, docs[h]};
      const std::uint32_t end = ends[h];
      if (end < at || end > ids.size())
        throw WireError(fmt::format("result batch: external id {} out of range", h));
      ids_[h] = std::string_view(id_bytes + at, end - at);
      at = end;
    }
    queries_.resize(nq);
    std::uint32_t first = 0;
    for (std::size_t q = 0; q < nq; ++q) {
      Query& e = queries_[q];
      e.first = first;
      e.and_hits = counts[unsigned(2 * q)];
      e.or_hits = counts[unsigned(2 * q + 1)];
      first += e.and_hits + e.or_hits;
      e.and_matches = and_matches[unsigned(q)];
      e.partial = partial[unsigned(q)];
      e.ranker_fallback = ranker_fallback[unsigned(q)];
      const unsigned c = unsigned(5 * q);
      e.counters = {counters[c], counters[c + 1], counters[c + 2], counters[c + 3],
                    counters[c + 4]};
    }
  });
}

ShardAnswerView ResultBatchView::answer(std::size_t q) const {
  const Query& e = queries_.at(q);
  const std::span<const RankedDoc> hits(hits_);
  const std::span<const std::string_view> ids(ids_);
  ShardAnswerView a;
  a.hits = hits.subspan(e.first, e.and_hits);
  a.or_hits = hits.subspan(e.first + e.and_hits, e.or_hits);
  a.hit_ids = ids.subspan(e.first, e.and_hits);
  a.or_hit_ids = ids.subspan(e.first + e.and_hits, e.or_hits);
  a.and_matches = e.and_matches;
  a.counters = e.counters;
  a.partial = e.partial;
  a.ranker_fallback = e.ranker_fallback;
  return a;
}

ShardAnswer ResultBatchView::copy_answer(std::size_t q) const {
  const ShardAnswerView v = answer(q);
  ShardAnswer a;
  a.result.hits.assign(v.hits.begin(), v.hits.end());
  a.result.or_hits.assign(v.or_hits.begin(), v.or_hits.end());
  a.result.and_matches = v.and_matches;
  a.result.counters = v.counters;
  a.result.partial = v.partial;
  a.result.ranker_fallback = v.ranker_fallback;
  a.hit_ids.assign(v.hit_ids.begin(), v.hit_ids.end());
  a.or_hit_ids.assign(v.or_hit_ids.begin(), v.or_hit_ids.end());
  return a;
}

ResultBatch decode_result_batch(std::span<const std::byte> bytes) {
  const ResultBatchView view(bytes);
  ResultBatch b;
  static_cast<ResultHeader&>(b) = view.header();
  b.answers.reserve(view.size());
  for (std::size_t q = 0; q < view.size(); ++q) b.answers.push_back(view.copy_answer(q));
  return b;
}

}  // namespace gpusearch::wire
