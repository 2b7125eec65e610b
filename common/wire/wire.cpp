#include "common/wire/wire.hpp"

#include <chrono>
#include <cstring>
#include <deque>
#include <set>
#include <tuple>
#include <utility>

#include <capnp/message.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>

#include "common/ranker/store_index.hpp"
#include "common/wire/messages.capnp.h"
#include "common/wire/wire_reader.hpp"

namespace gpusearch::wire {

namespace {

// A message builder whose first segment starts one word into its buffer: that word takes the
// flat format's segment table (segment count - 1, then the size) when the message is one
// segment, so the bytes MPI sends are the builder's own memory, contiguous, without a copy.
// Later segments (a message that outgrew its estimate) are separate pieces.
class PrefixedMessageBuilder final : public capnp::MessageBuilder {
 public:
  PrefixedMessageBuilder(std::size_t first_segment_words, std::shared_ptr<SegmentPool> pool)
      : first_words_(first_segment_words), pool_(std::move(pool)) {}
  // A pooled first segment goes back once the message is sealed and gone; the words written
  // (the table word and the segment's used words) are zeroed by the pool.
  ~PrefixedMessageBuilder() override {
    if (pool_ && written_words_ > 0) pool_->release(std::move(first_), written_words_);
  }
  kj::ArrayPtr<capnp::word> allocateSegment(unsigned minimum_words) override {
    // Value-initialized vectors are zeroed, which Cap'n Proto requires of a new segment; so are
    // the pool's buffers.
    if (first_.empty()) {
      const std::size_t words = 1 + std::max<std::size_t>(minimum_words, first_words_);
      if (pool_)
        first_ = pool_->acquire(words);
      else
        first_.assign(words, 0);
      return {reinterpret_cast<capnp::word*>(first_.data() + 1), first_.size() - 1};
    }
    const std::size_t n = std::max<std::size_t>(minimum_words, first_.size());
    more_.emplace_back(n, 0);
    return {reinterpret_cast<capnp::word*>(more_.back().data()), n};
  }
  std::uint64_t* prefix() { return first_.data(); }
  // The message is complete: its first segment used `words` words of the buffer (with the
  // table word). Unsealed buffers (a failed encode) are not pooled: what they hold is unknown.
  void sealed(std::size_t words) { written_words_ = words; }

 private:
  std::size_t first_words_;
  std::shared_ptr<SegmentPool> pool_;
  std::size_t written_words_ = 0;
  std::vector<std::uint64_t> first_;
  std::deque<std::vector<std::uint64_t>> more_;
};

}  // namespace

struct EncodedMessage::Impl {
  explicit Impl(std::size_t first_segment_words, std::shared_ptr<SegmentPool> pool = nullptr)
      : builder(std::min<std::size_t>(first_segment_words, std::size_t(1) << 28),
                std::move(pool)) {}
  PrefixedMessageBuilder builder;
  std::vector<std::uint32_t> table;  // the segment table, when there is more than one segment
  std::vector<std::span<const std::byte>> pieces;
  std::size_t bytes = 0;

  // Writes the segment table once the message is complete; the builder must not change after.
  void seal() {
    const auto segments = builder.getSegmentsForOutput();
    builder.sealed(1 + segments[0].size());
    pieces.clear();
    if (segments.size() == 1) {
      auto* header = reinterpret_cast<std::uint32_t*>(builder.prefix());
      header[0] = 0;
      header[1] = std::uint32_t(segments[0].size());
      pieces.push_back(std::as_bytes(
          std::span<const std::uint64_t>(builder.prefix(), 1 + segments[0].size())));
      bytes = pieces.back().size();
      return;
    }
    table.assign(segments.size() + 1 + (segments.size() + 1) % 2, 0);
    table[0] = std::uint32_t(segments.size() - 1);
    for (std::size_t i = 0; i < segments.size(); ++i)
      table[i + 1] = std::uint32_t(segments[i].size());
    pieces.push_back(std::as_bytes(std::span<const std::uint32_t>(table)));
    bytes = pieces.back().size();
    for (const auto& seg : segments) {
      pieces.push_back(std::as_bytes(std::span<const capnp::word>(seg.begin(), seg.size())));
      bytes += pieces.back().size();
    }
  }
};

EncodedMessage::EncodedMessage() = default;
EncodedMessage::EncodedMessage(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->seal();
}
EncodedMessage::EncodedMessage(EncodedMessage&&) noexcept = default;
EncodedMessage& EncodedMessage::operator=(EncodedMessage&&) noexcept = default;
EncodedMessage::~EncodedMessage() = default;
std::size_t EncodedMessage::bytes() const { return impl_ ? impl_->bytes : 0; }
const std::vector<std::span<const std::byte>>& EncodedMessage::pieces() const {
  static const std::vector<std::span<const std::byte>> none;
  return impl_ ? impl_->pieces : none;
}
WireBytes EncodedMessage::flat() const {
  WireBytes out((bytes() + 7) / 8);
  std::size_t at = 0;
  for (const auto& p : pieces()) {
    std::memcpy(reinterpret_cast<std::byte*>(out.data()) + at, p.data(), p.size());
    at += p.size();
  }
  return out;
}

namespace {

namespace s = schema;
using detail::get_header;
using detail::with_reader;

// The first segment is sized for the message at hand (estimate_words), so that a message is
// almost always one segment; more segments are fine too (they travel as more pieces).
std::unique_ptr<EncodedMessage::Impl> new_message(std::size_t estimate_words,
                                                  std::shared_ptr<SegmentPool> pool = nullptr) {
  return std::make_unique<EncodedMessage::Impl>(std::max<std::size_t>(estimate_words, 64),
                                                std::move(pool));
}

std::uint64_t steady_us() {
  return std::uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count());
}

s::Mode to_wire(Mode m) {
  switch (m) {
    case Mode::kAnd:
      return s::Mode::MODE_AND;
    case Mode::kOr:
      return s::Mode::MODE_OR;
    case Mode::kAndOr:
      return s::Mode::MODE_AND_OR;
  }
  return s::Mode::MODE_OR;
}
Mode from_wire(s::Mode m) {
  switch (m) {
    case s::Mode::MODE_AND:
      return Mode::kAnd;
    case s::Mode::MODE_OR:
      return Mode::kOr;
    case s::Mode::MODE_AND_OR:
      return Mode::kAndOr;
  }
  throw WireError(fmt::format("query batch: unknown mode {}", unsigned(m)));
}
Scoring from_wire(s::Scoring sc) {
  switch (sc) {
    case s::Scoring::BM25:
      return Scoring::kBm25;
    case s::Scoring::BM25_PR:
      return Scoring::kBm25Pr;
  }
  throw WireError(fmt::format("query batch: unknown scoring {}", unsigned(sc)));
}

// Packs a batch's answers into the ResultBatch's columns. `ids` are the hits' external ids in
// packing order (query by query, its AND/only list before its OR list). Each query's hits and id
// bytes go to offsets known from prefix sums, so a large batch is packed on oneTBB's threads,
// chunks of queries writing disjoint parts of the columns (the ISN's answer is on every batch's
// critical path: 0.5-0.9 ms a batch of 1,024 on one thread on the H200 host, session 45); the
// two Bool columns, whose bits neighbouring queries share, are written after, on this thread.
template <typename AnswerAt>
void pack_answers(s::ResultBatch::Builder root, std::size_t n, AnswerAt&& answer,
                  std::span<const std::string_view> ids) {
  // Query q's first hit and first id byte. Reused by this thread; the chunks on oneTBB's threads
  // read them through these references (a thread_local named there would be that thread's own).
  thread_local std::vector<std::size_t> reused_hit_at, reused_byte_at;
  std::vector<std::size_t>& hit_at = reused_hit_at;
  std::vector<std::size_t>& byte_at = reused_byte_at;
  hit_at.assign(n + 1, 0);
  byte_at.assign(n + 1, 0);
  for (std::size_t q = 0; q < n; ++q)
    hit_at[q + 1] = hit_at[q] + answer(q).hits.size() + answer(q).or_hits.size();
  if (hit_at[n] != ids.size())
    throw Error(fmt::format("pack_answers: {} ids for {} hits", ids.size(), hit_at[n]));
  for (std::size_t q = 0; q < n; ++q) {
    std::size_t bytes = 0;
    for (std::size_t h = hit_at[q]; h < hit_at[q + 1]; ++h) bytes += ids[h].size();
    byte_at[q + 1] = byte_at[q] + bytes;
  }
  const auto counts = root.initHitCounts(unsigned(2 * n));
  const auto scores = root.initScores(unsigned(hit_at[n]));
  const auto ranks = root.initRanks(unsigned(hit_at[n]));
  const auto docs = root.initDocs(unsigned(hit_at[n]));
  const auto ends = root.initExtIdEnds(unsigned(hit_at[n]));
  const auto id_data = root.initExtIds(unsigned(byte_at[n]));
  const auto and_matches = root.initAndMatches(unsigned(n));
  auto partial = root.initPartial(unsigned(n));
  auto ranker_fallback = root.initRankerFallback(unsigned(n));
  const auto counters = root.initCounters(unsigned(5 * n));
  const auto pack = [&](std::size_t from, std::size_t to) {
    // Copies of the list builders: each writes only its elements, none allocates.
    auto c = counts;
    auto sc = scores;
    auto rk = ranks;
    auto dc = docs;
    auto en = ends;
    auto id = id_data;
    auto am = and_matches;
    auto ct = counters;
    for (std::size_t q = from; q < to; ++q) {
      const ShardResult& r = answer(q);
      std::size_t h = hit_at[q], at = byte_at[q];
      for (int o = 0; o < 2; ++o) {
        const auto& list = o ? r.or_hits : r.hits;
        c.set(unsigned(2 * q + o), unsigned(list.size()));
        for (std::size_t i = 0; i < list.size(); ++i, ++h) {
          sc.set(unsigned(h), list[i].score);
          rk.set(unsigned(h), list[i].rank);
          dc.set(unsigned(h), list[i].doc);
          std::memcpy(id.begin() + at, ids[h].data(), ids[h].size());
          at += ids[h].size();
          en.set(unsigned(h), unsigned(at));
        }
      }
      am.set(unsigned(q), r.and_matches);
      const QueryCounters& k = r.counters;
      const std::uint64_t cs[5] = {k.postings_decoded, k.blocks_decoded, k.blocks_skipped,
                                   k.docs_scored, k.early_terminations};
      for (unsigned j = 0; j < 5; ++j) ct.set(unsigned(5 * q + j), cs[j]);
    }
  };
  if (n >= kParallelPackQueries)
    // Isolated: the caller, while it waits, takes only these chunks (not another batch's work).
    tbb::this_task_arena::isolate([&] {
      tbb::parallel_for(
          tbb::blocked_range<std::size_t>(0, n, 64),
          [&](const tbb::blocked_range<std::size_t>& r) { pack(r.begin(), r.end()); });
    });
  else
    pack(0, n);
  for (std::size_t q = 0; q < n; ++q) {
    partial.set(unsigned(q), answer(q).partial);
    ranker_fallback.set(unsigned(q), answer(q).ranker_fallback);
  }
}

void set_header(s::ResultBatch::Builder root, const ResultHeader& b) {
  root.setBatchId(b.batch_id);
  root.setIsnRank(b.isn_rank);
  root.setShardId(b.shard_id);
  root.setComputeUs(b.compute_us);
  root.setIdleUs(b.idle_us);
  root.setFallbackActive(b.fallback_active);
  root.setError(b.error);
  root.setReceivedUs(b.received_us);
  root.setStartUs(b.start_us);
  root.setEndUs(b.end_us);
  root.setEncodedUs(b.encoded_us);
  root.setEncodedOffEngine(b.encoded_off_engine);
}

// Words a result batch of this many hits and id bytes needs, so that it fits one segment.
// Per hit 2.5 words of columns (a Float64 score, three UInt32s), per query 7 (two counts, a
// UInt64 match count, five UInt64 counters, two bits), 64 for the header and list pointers.
std::size_t result_words(std::size_t queries, std::size_t hits, std::size_t id_bytes) {
  return 64 + 11 * queries + 3 * hits + (id_bytes + 7) / 8;
}

// A ranker-cache command is checked like every message: names of the store's form, lists within
// their limit, no name twice, none both evicted and loaded, and something to do.
RankerCacheCommand read_ranker_cache_command(s::RankerCacheCommand::Reader rc) {
  RankerCacheCommand c;
  c.batch_id = rc.getBatchId();
  std::set<std::string> seen;
  for (const auto& [list, out, what] :
       {std::tuple{rc.getEvict(), &c.evict, "evict"}, std::tuple{rc.getLoad(), &c.load, "load"}}) {
    if (list.size() > kMaxRankerCommandNames)
      throw WireError(fmt::format("ranker-cache command (batch {}): {} names to {}, over {}",
                                  c.batch_id, list.size(), what, kMaxRankerCommandNames));
    for (auto t : list) {
      std::string name(t.cStr(), t.size());
      if (!ranker::valid_ranker_name(name))
        throw WireError(fmt::format("ranker-cache command (batch {}): '{}' to {} is not a ranker "
                                    "name (1-128 of A-Z a-z 0-9 . _ -)",
                                    c.batch_id, name.substr(0, 64), what));
      if (!seen.insert(name).second)
        throw WireError(fmt::format("ranker-cache command (batch {}): ranker '{}' named twice",
                                    c.batch_id, name));
      out->push_back(std::move(name));
    }
  }
  if (c.evict.empty() && c.load.empty())
    throw WireError(fmt::format("ranker-cache command (batch {}): nothing to evict or load",
                                c.batch_id));
  return c;
}

}  // namespace

namespace detail {

ResultHeader get_header(schema::ResultBatch::Reader root) {
  ResultHeader b;
  b.batch_id = root.getBatchId();
  b.isn_rank = root.getIsnRank();
  b.shard_id = root.getShardId();
  b.compute_us = root.getComputeUs();
  b.idle_us = root.getIdleUs();
  b.fallback_active = root.getFallbackActive();
  b.error.assign(root.getError().cStr(), root.getError().size());
  b.received_us = root.getReceivedUs();
  b.start_us = root.getStartUs();
  b.end_us = root.getEndUs();
  b.encoded_us = root.getEncodedUs();
  b.encoded_off_engine = root.getEncodedOffEngine();
  return b;
}

}  // namespace detail

std::string vocabulary_fingerprint(const ShardManifest& manifest, std::uint32_t num_terms) {
  auto sum = [&](const char* name) {
    const auto it = manifest.files.find(name);
    return it == manifest.files.end() ? std::uint64_t(0) : it->second.xxh3;
  };
  return fmt::format("{}:{:016x}:{:016x}", num_terms, sum(shard_files::kLexiconOffsets),
                     sum(shard_files::kLexiconStrings));
}

EncodedMessage encode_query_batch(std::uint64_t batch_id, const SearchParams& params,
                                  std::span<const WireQueryView> queries) {
  std::size_t estimate = 32;
  for (const WireQueryView& q : queries) {
    estimate += 4 + (q.id.size() + 8) / 8 + (q.term_ids.size() + 1) / 2;
    for (const std::string& t : q.terms) estimate += 2 + (t.size() + 8) / 8;
  }
  auto m = new_message(estimate);
  auto root = m->builder.initRoot<s::QueryBatch>();
  root.setBatchId(batch_id);
  auto p = root.initParams();
  p.setMode(to_wire(params.mode));
  p.setScoring(params.scoring == Scoring::kBm25 ? s::Scoring::BM25 : s::Scoring::BM25_PR);
  p.setAlpha(params.alpha);
  p.setK(params.k);
  p.setCandidates(params.candidates);
  auto qs = root.initQueries(unsigned(queries.size()));
  for (std::size_t i = 0; i < queries.size(); ++i) {
    const WireQueryView& wq = queries[i];
    auto q = qs[unsigned(i)];
    q.setId(capnp::Text::Reader(wq.id.data(), wq.id.size()));
    if (!wq.ranker.empty()) q.setRanker(capnp::Text::Reader(wq.ranker.data(), wq.ranker.size()));
    if (!wq.terms.empty()) {
      auto ts = q.initTerms(unsigned(wq.terms.size()));
      for (std::size_t t = 0; t < wq.terms.size(); ++t) ts.set(unsigned(t), wq.terms[t]);
    }
    if (!wq.term_ids.empty()) {
      auto ids = q.initTermIds(unsigned(wq.term_ids.size()));
      for (std::size_t t = 0; t < wq.term_ids.size(); ++t) ids.set(unsigned(t), wq.term_ids[t]);
    }
  }
  return EncodedMessage(std::move(m));
}

EncodedMessage encode_message(const QueryBatch& b) {
  std::vector<WireQueryView> views;
  views.reserve(b.queries.size());
  for (const WireQuery& q : b.queries) views.push_back({q.id, q.terms, q.term_ids, q.ranker});
  return encode_query_batch(b.batch_id, b.params, views);
}

QueryBatch decode_query_batch(std::span<const std::byte> bytes) {
  return with_reader(bytes, "query batch", [](capnp::MessageReader& reader) {
    const auto root = reader.getRoot<s::QueryBatch>();
    QueryBatch b;
    b.batch_id = root.getBatchId();
    const auto p = root.getParams();
    b.params.mode = from_wire(p.getMode());
    b.params.scoring = from_wire(p.getScoring());
    b.params.alpha = p.getAlpha();
    b.params.k = p.getK();
    if (b.params.k == 0 || b.params.k > kMaxK)
      throw WireError(fmt::format("query batch: k = {} out of range", b.params.k));
    if (!(b.params.alpha >= 0.0 && b.params.alpha <= 1.0))
      throw WireError("query batch: alpha out of [0, 1]");
    b.params.candidates = p.getCandidates();
    if (b.params.candidates > kMaxCandidates)
      throw WireError(fmt::format("query batch: {} candidates, over {}", b.params.candidates,
                                  kMaxCandidates));
    const auto qs = root.getQueries();
    if (qs.size() > kMaxBatchQueries)
      throw WireError(fmt::format("query batch: {} queries, over {}", qs.size(), kMaxBatchQueries));
    b.queries.reserve(qs.size());
    for (auto q : qs) {
      WireQuery wq;
      wq.id.assign(q.getId().cStr(), q.getId().size());
      wq.ranker.assign(q.getRanker().cStr(), q.getRanker().size());
      if (!wq.ranker.empty() && !ranker::valid_ranker_name(wq.ranker))
        throw WireError(fmt::format("query batch: query '{}' names an invalid ranker", wq.id));
      const auto ts = q.getTerms();
      const auto ids = q.getTermIds();
      if (ts.size() > kMaxQueryTerms || ids.size() > kMaxQueryTerms)
        throw WireError(fmt::format("query batch: query '{}' has {} terms", wq.id,
                                    std::max(ts.size(), ids.size())));
      if (ts.size() > 0 && ids.size() > 0)
        throw WireError(fmt::format("query batch: query '{}' has both terms and term IDs", wq.id));
      wq.terms.reserve(ts.size());
      for (auto t : ts) wq.terms.emplace_back(t.cStr(), t.size());
      wq.term_ids.reserve(ids.size());
      for (auto id : ids) wq.term_ids.push_back(id);
      b.queries.push_back(std::move(wq));
    }
    return b;
  });
}

// A result batch's message: the header, then the answers packed (pack_answers), in one segment
// sized by the ids' exact bytes (it is zeroed, so an over-estimate costs); `stamp_encoded` sets
// encoded_us once they are packed (the ISN's path).
template <typename AnswerAt>
EncodedMessage result_message(const ResultHeader& header, std::size_t n, AnswerAt&& answer,
                              std::span<const std::string_view> ids,
                              std::shared_ptr<SegmentPool> pool, bool stamp_encoded) {
  std::size_t id_bytes = 0;
  for (const std::string_view id : ids) id_bytes += id.size();
  auto m = new_message(result_words(n, ids.size(), id_bytes + header.error.size()),
                       std::move(pool));
  auto root = m->builder.initRoot<s::ResultBatch>();
  set_header(root, header);
  pack_answers(root, n, answer, ids);
  if (stamp_encoded) root.setEncodedUs(steady_us());
  return EncodedMessage(std::move(m));
}

EncodedMessage encode_results(const ResultHeader& header, std::span<const ShardResult> results,
                              std::span<const std::string_view> ids,
                              std::shared_ptr<SegmentPool> pool) {
  return result_message(
      header, results.size(), [&](std::size_t q) -> const ShardResult& { return results[q]; },
      ids, std::move(pool), /*stamp_encoded*/ true);
}

EncodedMessage encode_results(const ResultHeader& header, std::span<const ShardResult> results,
                              const std::function<std::string_view(DocId)>& external_id,
                              std::shared_ptr<SegmentPool> pool) {
  // One look-up per hit, in packing order.
  thread_local std::vector<std::string_view> ids;
  ids.clear();
  for (const ShardResult& r : results)
    for (const auto* list : {&r.hits, &r.or_hits})
      for (const RankedDoc& d : *list) ids.push_back(external_id(d.doc));
  return encode_results(header, results, ids, std::move(pool));
}

EncodedMessage encode_message(const ResultBatch& b) {
  // A hit without an id (a short id list) packs as "".
  std::vector<std::string_view> ids;
  for (const ShardAnswer& a : b.answers) {
    for (const auto& [list, names] : {std::pair{&a.result.hits, &a.hit_ids},
                                      std::pair{&a.result.or_hits, &a.or_hit_ids}})
      for (std::size_t i = 0; i < list->size(); ++i)
        ids.push_back(i < names->size() ? std::string_view((*names)[i]) : std::string_view());
  }
  return result_message(
      b, b.answers.size(),
      [&](std::size_t q) -> const ShardResult& { return b.answers[q].result; }, ids, nullptr,
      /*stamp_encoded*/ false);
}

ResultHeader decode_result_header(std::span<const std::byte> bytes) {
  return with_reader(bytes, "result batch", [](capnp::MessageReader& reader) {
    return get_header(reader.getRoot<s::ResultBatch>());
  });
}

EncodedMessage encode_message(const Control& c) {
  auto m = new_message(16 + c.payload.size() / 8);
  auto root = m->builder.initRoot<s::Control>();
  switch (c.kind) {
    case Control::Kind::kHello:
      root.setHello(c.payload);
      break;
    case Control::Kind::kStatsRequest:
      root.setStatsRequest();
      break;
    case Control::Kind::kStatsReply:
      root.setStatsReply(c.payload);
      break;
    case Control::Kind::kShutdown:
      root.setShutdown();
      break;
    case Control::Kind::kRankerCache: {
      auto rc = root.initRankerCache();
      rc.setBatchId(c.ranker_cache.batch_id);
      auto ev = rc.initEvict(unsigned(c.ranker_cache.evict.size()));
      for (std::size_t i = 0; i < c.ranker_cache.evict.size(); ++i)
        ev.set(unsigned(i), c.ranker_cache.evict[i]);
      auto ld = rc.initLoad(unsigned(c.ranker_cache.load.size()));
      for (std::size_t i = 0; i < c.ranker_cache.load.size(); ++i)
        ld.set(unsigned(i), c.ranker_cache.load[i]);
      break;
    }
    case Control::Kind::kClockPing:
      root.setClockPing(c.value);
      break;
    case Control::Kind::kClockPong:
      root.setClockPong(c.value);
      break;
  }
  return EncodedMessage(std::move(m));
}

Control decode_control(std::span<const std::byte> bytes) {
  return with_reader(bytes, "control message", [](capnp::MessageReader& reader) {
    const auto root = reader.getRoot<s::Control>();
    Control c;
    switch (root.which()) {
      case s::Control::HELLO:
        c.kind = Control::Kind::kHello;
        c.payload.assign(root.getHello().cStr(), root.getHello().size());
        break;
      case s::Control::STATS_REQUEST:
        c.kind = Control::Kind::kStatsRequest;
        break;
      case s::Control::STATS_REPLY:
        c.kind = Control::Kind::kStatsReply;
        c.payload.assign(root.getStatsReply().cStr(), root.getStatsReply().size());
        break;
      case s::Control::SHUTDOWN:
        c.kind = Control::Kind::kShutdown;
        break;
      case s::Control::RANKER_CACHE:
        c.kind = Control::Kind::kRankerCache;
        c.ranker_cache = read_ranker_cache_command(root.getRankerCache());
        break;
      case s::Control::CLOCK_PING:
        c.kind = Control::Kind::kClockPing;
        c.value = root.getClockPing();
        break;
      case s::Control::CLOCK_PONG:
        c.kind = Control::Kind::kClockPong;
        c.value = root.getClockPong();
        break;
      default:
        throw WireError("control message: unknown kind");
    }
    return c;
  });
}

}  // namespace gpusearch::wire
