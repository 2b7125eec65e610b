// The wire: every message round-trips, and truncated, garbage or oversized bytes are rejected
// with WireError, never a crash.
#include <gtest/gtest.h>

#include <random>

#include <fmt/format.h>

#include "common/wire/wire.hpp"

using namespace gpusearch;
using namespace gpusearch::wire;

namespace {

QueryBatch sample_batch() {
  QueryBatch b;
  b.batch_id = 42;
  b.params = {Mode::kAndOr, Scoring::kBm25Pr, 0.25, 1000, 5000};
  b.queries = {{"q1", {"apple", "pie"}, {}, "R-M-BGD"},
               {"q2", {}, {}},
               {"q3", {"z\xc3\xa9ro", "a", "b", "c"}, {}},
               {"q4", {}, {7, 0, 4000000000u}}};
  return b;
}

ResultBatch sample_results() {
  ResultBatch r;
  r.batch_id = 42;
  r.isn_rank = 3;
  r.shard_id = 2;
  r.compute_us = 1234;
  r.idle_us = 77;
  r.fallback_active = true;
  r.received_us = 10, r.start_us = 11, r.end_us = 12, r.encoded_us = 13;
  r.encoded_off_engine = true;
  ShardAnswer a;
  a.result.hits = {{9.5, 17, 2, 4}, {8.25, 30, 2, 7}};
  a.hit_ids = {"doc-4", "doc-7"};
  a.result.and_matches = 2;
  a.result.or_hits = {{9.5, 17, 2, 4}};
  a.or_hit_ids = {"doc-4"};
  a.result.counters = {1, 2, 3, 4, 5};
  a.result.partial = true;
  ShardAnswer b;
  b.result.ranker_fallback = true;
  r.answers = {a, b};
  return r;
}

}  // namespace

TEST(Wire, QueryBatchRoundTrips) {
  const QueryBatch b = sample_batch();
  const QueryBatch d = decode_query_batch(as_bytes(encode(b)));
  EXPECT_EQ(d.batch_id, 42u);
  EXPECT_EQ(d.params.mode, Mode::kAndOr);
  EXPECT_EQ(d.params.scoring, Scoring::kBm25Pr);
  EXPECT_EQ(d.params.alpha, 0.25);
  EXPECT_EQ(d.params.k, 1000u);
  EXPECT_EQ(d.params.candidates, 5000u);
  EXPECT_EQ(d.queries, b.queries);
  EXPECT_EQ(d.queries[0].ranker, "R-M-BGD");
}

// The aggregator encodes a batch from views of its pending queries: the very bytes of the
// QueryBatch holding copies of them.
TEST(Wire, QueryBatchFromViewsIsTheSameMessage) {
  const QueryBatch b = sample_batch();
  std::vector<WireQueryView> views;
  for (const WireQuery& q : b.queries) views.push_back({q.id, q.terms, q.term_ids, q.ranker});
  const WireBytes from_views = encode_query_batch(b.batch_id, b.params, views).flat();
  EXPECT_EQ(from_views, encode(b));
  EXPECT_EQ(decode_query_batch(as_bytes(from_views)).queries, b.queries);
}

TEST(Wire, ResultBatchRoundTrips) {
  const ResultBatch r = sample_results();
  const ResultBatch d = decode_result_batch(as_bytes(encode(r)));
  EXPECT_EQ(d.batch_id, 42u);
  EXPECT_EQ(d.isn_rank, 3u);
  EXPECT_EQ(d.shard_id, 2u);
  EXPECT_EQ(d.compute_us, 1234u);
  EXPECT_EQ(d.idle_us, 77u);
  EXPECT_TRUE(d.fallback_active);
  EXPECT_EQ(d.received_us, 10u);
  EXPECT_EQ(d.start_us, 11u);
  EXPECT_EQ(d.end_us, 12u);
  EXPECT_EQ(d.encoded_us, 13u);
  EXPECT_TRUE(d.encoded_off_engine);
  ResultBatch on_engine = r;
  on_engine.encoded_off_engine = false;
  EXPECT_FALSE(decode_result_batch(as_bytes(encode(on_engine))).encoded_off_engine);
  ASSERT_EQ(d.answers.size(), 2u);
  const ShardAnswer& a = d.answers[0];
  ASSERT_EQ(a.result.hits.size(), 2u);
  EXPECT_EQ(a.result.hits[1].score, 8.25);
  EXPECT_EQ(a.result.hits[1].rank, 30u);
  EXPECT_EQ(a.result.hits[1].doc, 7u);
  EXPECT_EQ(a.result.hits[1].shard, 2u);  // the shard comes from the batch
  EXPECT_EQ(a.hit_ids, (std::vector<std::string>{"doc-4", "doc-7"}));
  EXPECT_EQ(a.or_hit_ids, std::vector<std::string>{"doc-4"});
  EXPECT_EQ(a.result.and_matches, 2u);
  EXPECT_EQ(a.result.counters.blocks_skipped, 3u);
  EXPECT_EQ(a.result.counters.early_terminations, 5u);
  EXPECT_TRUE(a.result.partial);
  EXPECT_FALSE(a.result.ranker_fallback);
  EXPECT_TRUE(d.answers[1].result.hits.empty());
  EXPECT_TRUE(d.answers[1].result.ranker_fallback);
}

TEST(Wire, ControlRoundTrips) {
  for (auto kind : {Control::Kind::kHello, Control::Kind::kStatsRequest, Control::Kind::kStatsReply,
                    Control::Kind::kShutdown}) {
    Control c{kind, kind == Control::Kind::kHello || kind == Control::Kind::kStatsReply
                        ? "{\"x\":1}"
                        : ""};
    const Control d = decode_control(as_bytes(encode(c)));
    EXPECT_EQ(d.kind, c.kind);
    EXPECT_EQ(d.payload, c.payload);
  }
}

TEST(Wire, RankerCacheCommandRoundTrips) {
  Control c{Control::Kind::kRankerCache, ""};
  c.ranker_cache = {17, {"mix-007", "R-L-D"}, {"mix-000", "R-S-BLG", "mix-199"}};
  const Control d = decode_control(as_bytes(encode(c)));
  EXPECT_EQ(d.kind, Control::Kind::kRankerCache);
  EXPECT_EQ(d.ranker_cache, c.ranker_cache);
  c.ranker_cache = {18, {}, {"only-load"}};
  EXPECT_EQ(decode_control(as_bytes(encode(c))).ranker_cache, c.ranker_cache);
  c.ranker_cache = {19, {"only-evict"}, {}};
  EXPECT_EQ(decode_control(as_bytes(encode(c))).ranker_cache, c.ranker_cache);
}

TEST(Wire, RejectsBadRankerCacheCommands) {
  auto rejected = [](RankerCacheCommand rc, const std::string& says) {
    Control c{Control::Kind::kRankerCache, ""};
    c.ranker_cache = std::move(rc);
    try {
      decode_control(as_bytes(encode(c)));
    } catch (const WireError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      return true;
    }
    return false;
  };
  EXPECT_TRUE(rejected({5, {}, {}}, "nothing to evict or load"));
  EXPECT_TRUE(rejected({5, {}, {"../etc/passwd"}}, "is not a ranker name"));
  EXPECT_TRUE(rejected({5, {""}, {}}, "is not a ranker name"));
  EXPECT_TRUE(rejected({5, {}, {std::string(129, 'a')}}, "is not a ranker name"));
  EXPECT_TRUE(rejected({5, {}, {"r1", "r1"}}, "'r1' named twice"));
  EXPECT_TRUE(rejected({5, {"r1"}, {"r1"}}, "'r1' named twice"));  // evict and load at once
  std::vector<std::string> many;
  for (std::size_t i = 0; i <= kMaxRankerCommandNames; ++i) many.push_back(fmt::format("r{}", i));
  EXPECT_TRUE(rejected({5, {}, many}, "over"));
  many.pop_back();
  EXPECT_FALSE(rejected({5, {}, many}, ""));
}

TEST(Wire, RejectsBadRankersAndCandidatesInQueryBatches) {
  QueryBatch b = sample_batch();
  b.queries[1].ranker = "bad/name";
  EXPECT_THROW(decode_query_batch(as_bytes(encode(b))), WireError);
  b = sample_batch();
  b.params.candidates = kMaxCandidates + 1;
  EXPECT_THROW(decode_query_batch(as_bytes(encode(b))), WireError);
  b.params.candidates = kMaxCandidates;
  EXPECT_EQ(decode_query_batch(as_bytes(encode(b))).params.candidates, kMaxCandidates);
}

TEST(Wire, RejectsTruncatedMessages) {
  const WireBytes full = encode(sample_results());
  const auto bytes = as_bytes(full);
  for (std::size_t n = 0; n < bytes.size(); n += 8)
    EXPECT_THROW(decode_result_batch(bytes.first(n)), WireError) << n << " bytes";
  EXPECT_THROW(decode_result_batch(bytes.first(bytes.size() - 3)), WireError);  // not whole words
}

TEST(Wire, RejectsGarbageWithoutCrashing) {
  std::mt19937_64 rng(5);
  int rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    WireBytes junk(1 + rng() % 64);
    for (auto& w : junk) w = rng();
    if (trial % 2) junk[0] = 0;  // one segment: get past the segment table into the pointers
    try {
      decode_query_batch(as_bytes(junk));
      decode_result_batch(as_bytes(junk));
      decode_control(as_bytes(junk));
    } catch (const WireError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
}

TEST(Wire, RejectsOversizedAndOutOfRange) {
  std::vector<std::byte> huge(kMaxWireBytes + 8);
  EXPECT_THROW(decode_query_batch(huge), WireError);
  QueryBatch b = sample_batch();
  b.params.k = 0;
  EXPECT_THROW(decode_query_batch(as_bytes(encode(b))), WireError);
  b.params.k = 10;
  b.queries[0].terms.assign(kMaxQueryTerms + 1, "t");
  EXPECT_THROW(decode_query_batch(as_bytes(encode(b))), WireError);
  // A result batch is not a query batch: its fields read as nonsense and fail a check or decode.
  EXPECT_NO_FATAL_FAILURE({
    try {
      decode_query_batch(as_bytes(encode(sample_results())));
    } catch (const WireError&) {
    }
  });
}

TEST(Wire, MisalignedInputIsCopiedNotMisread) {
  const WireBytes full = encode(sample_batch());
  std::vector<std::byte> shifted(full.size() * 8 + 1);
  std::memcpy(shifted.data() + 1, full.data(), full.size() * 8);
  const QueryBatch d = decode_query_batch(std::span<const std::byte>(shifted).subspan(1));
  EXPECT_EQ(d.queries, sample_batch().queries);
}

TEST(Wire, ResultHeaderReadsWithoutTheAnswers) {
  const ResultHeader h = decode_result_header(as_bytes(encode(sample_results())));
  EXPECT_EQ(h.batch_id, 42u);
  EXPECT_EQ(h.isn_rank, 3u);
  EXPECT_EQ(h.compute_us, 1234u);
  EXPECT_TRUE(h.encoded_off_engine);  // the aggregator's model reads it from the header
  EXPECT_TRUE(h.error.empty());
}

TEST(Wire, EncodeResultsPacksEngineResultsWithTheirIds) {
  ResultHeader h;
  h.batch_id = 9;
  h.shard_id = 1;
  std::vector<ShardResult> results(3);
  results[0].hits = {{3.0, 5, 1, 2}, {1.5, 9, 1, 0}};
  results[0].and_matches = 2;
  results[0].or_hits = {{4.0, 4, 1, 1}};
  results[2].hits = {{2.0, 7, 1, 1}};
  results[2].counters = {10, 20, 30, 40, 1};
  const std::vector<std::string> ids = {"zero", "one-with-a-longer-id", "2"};
  const EncodedMessage m = encode_results(h, results, [&](DocId d) { return std::string_view(ids[d]); });
  const ResultBatch d = decode_result_batch(as_bytes(m.flat()));
  EXPECT_GT(d.encoded_us, 0u);  // set by encode_results
  ASSERT_EQ(d.answers.size(), 3u);
  EXPECT_EQ(d.answers[0].hit_ids, (std::vector<std::string>{"2", "zero"}));
  EXPECT_EQ(d.answers[0].or_hit_ids, std::vector<std::string>{"one-with-a-longer-id"});
  EXPECT_EQ(d.answers[0].result.hits[0].rank, 5u);
  EXPECT_EQ(d.answers[0].result.or_hits[0].score, 4.0);
  EXPECT_TRUE(d.answers[1].result.hits.empty());
  EXPECT_EQ(d.answers[2].hit_ids, std::vector<std::string>{"one-with-a-longer-id"});
  EXPECT_EQ(d.answers[2].result.counters.docs_scored, 40u);
}

// A batch large enough to be packed on oneTBB's threads (kParallelPackQueries): every column
// decodes as packed, ids of every length (empty ones too) at their hits, and the Bool columns'
// bits (shared by neighbouring queries) each query's own. The same answers through the
// look-up form and through ResultBatch give the same bytes.
TEST(Wire, LargeBatchesPackOnManyThreadsAsOnOne) {
  std::mt19937 rng(5);
  const std::size_t n = 3 * kParallelPackQueries + 17;
  std::vector<ShardResult> results(n);
  std::vector<std::string> names(5000);
  for (std::size_t d = 0; d < names.size(); ++d) names[d] = std::string(d % 23, char('a' + d % 26));
  ResultBatch batch;
  batch.batch_id = 77;
  batch.shard_id = 3;
  std::vector<std::string_view> ids;
  for (std::size_t q = 0; q < n; ++q) {
    ShardResult& r = results[q];
    for (int o = 0; o < 2; ++o) {
      auto& list = o ? r.or_hits : r.hits;
      const std::size_t hits = rng() % (o ? 4 : 12);
      for (std::size_t i = 0; i < hits; ++i) {
        const DocId doc = DocId(rng() % names.size());
        list.push_back({double(rng() % 1000) / 7.0, std::uint32_t(rng()), 1, doc});
      }
    }
    r.and_matches = rng() % 100;
    r.partial = q % 3 == 0;
    r.ranker_fallback = q % 5 == 1;
    r.counters = {q, q + 1, q + 2, q + 3, q % 2};
    ShardAnswer& a = batch.answers.emplace_back();
    a.result = r;
    for (const RankedDoc& d : r.hits) a.hit_ids.push_back(names[d.doc]);
    for (const RankedDoc& d : r.or_hits) a.or_hit_ids.push_back(names[d.doc]);
  }
  for (const ShardResult& r : results)
    for (const auto* list : {&r.hits, &r.or_hits})
      for (const RankedDoc& d : *list) ids.push_back(names[d.doc]);
  ResultHeader h = batch;
  h.encoded_us = 0;
  EncodedMessage m = encode_results(h, results, ids);
  const ResultBatch d = decode_result_batch(as_bytes(m.flat()));
  ASSERT_EQ(d.answers.size(), n);
  for (std::size_t q = 0; q < n; ++q) {
    const ShardAnswer& a = d.answers[q];
    ASSERT_EQ(a.result.hits.size(), results[q].hits.size()) << q;
    ASSERT_EQ(a.result.or_hits.size(), results[q].or_hits.size()) << q;
    for (int o = 0; o < 2; ++o) {
      const auto& got = o ? a.result.or_hits : a.result.hits;
      const auto& want = o ? results[q].or_hits : results[q].hits;
      const auto& got_ids = o ? a.or_hit_ids : a.hit_ids;
      for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i].score, want[i].score) << q;
        EXPECT_EQ(got[i].rank, want[i].rank) << q;
        EXPECT_EQ(got[i].doc, want[i].doc) << q;
        EXPECT_EQ(got_ids[i], names[want[i].doc]) << q;
      }
    }
    EXPECT_EQ(a.result.and_matches, results[q].and_matches) << q;
    EXPECT_EQ(a.result.partial, results[q].partial) << q;
    EXPECT_EQ(a.result.ranker_fallback, results[q].ranker_fallback) << q;
    EXPECT_EQ(a.result.counters.docs_scored, q + 3) << q;
    EXPECT_EQ(a.result.counters.early_terminations, q % 2) << q;
  }
  // The look-up form, and the whole-ResultBatch form (no encoded_us of its own): the same bytes.
  const EncodedMessage by_lookup =
      encode_results(h, results, [&](DocId doc) { return std::string_view(names[doc]); });
  ResultBatch from_lookup = decode_result_batch(as_bytes(by_lookup.flat()));
  batch.encoded_us = from_lookup.encoded_us;
  EXPECT_EQ(encode_message(batch).flat(), by_lookup.flat());
  // A count of ids that does not match the hits is refused.
  ids.pop_back();
  EXPECT_THROW(encode_results(h, results, ids), Error);
}

TEST(Wire, MessagesGoOutInPlaceAsOneContiguousPiece) {
  // The usual case: one segment, the table in the word before it, one piece for MPI.
  const EncodedMessage m = encode_message(sample_batch());
  ASSERT_EQ(m.pieces().size(), 1u);
  EXPECT_EQ(m.pieces()[0].size(), m.bytes());
  // encode_results sizes its segment from the ids it packs: answers with ids far longer than
  // usual still go out as one piece.
  std::vector<ShardResult> results(500);
  for (auto& r : results) r.hits = {{2.0, 1, 0, 0}, {1.0, 2, 0, 1}};
  for (auto& r : results) r.or_hits = {{0.5, 3, 0, 0}};
  const std::string long_id(300, 'x');
  ResultHeader h;
  h.error = std::string(1000, 'e');  // counted too (a failed batch carries no answers, but still)
  const EncodedMessage long_ids =
      encode_results(h, results, [&](DocId) { return std::string_view(long_id); });
  EXPECT_EQ(long_ids.pieces().size(), 1u);
  const ResultBatch d = decode_result_batch(as_bytes(long_ids.flat()));
  ASSERT_EQ(d.answers.size(), 500u);
  EXPECT_EQ(d.answers[499].hit_ids[1], long_id);
  EXPECT_EQ(d.answers[499].or_hit_ids[0], long_id);
  EXPECT_EQ(d.answers[499].result.hits[1].score, 1.0);
  // A message that outgrows its estimate (a ranker-cache command's names are not counted in
  // it) grows more segments: several pieces (sent as one MPI datatype), and the same contents.
  Control c{Control::Kind::kRankerCache, ""};
  c.ranker_cache.batch_id = 5;
  for (int i = 0; i < 2000; ++i) c.ranker_cache.load.push_back(fmt::format("ranker-{:05}", i));
  const EncodedMessage many = encode_message(c);
  EXPECT_GT(many.pieces().size(), 2u);
  std::size_t sum = 0;
  for (const auto& p : many.pieces()) sum += p.size();
  EXPECT_EQ(sum, many.bytes());
  EXPECT_EQ(decode_control(as_bytes(many.flat())).ranker_cache, c.ranker_cache);
}

TEST(Wire, RejectsInconsistentColumns) {
  // A query batch must not carry both term strings and term IDs.
  QueryBatch b = sample_batch();
  b.queries[0].term_ids = {1};
  EXPECT_THROW(decode_query_batch(as_bytes(encode(b))), WireError);
}

TEST(Wire, ClockPingPongRoundTrips) {
  for (auto kind : {Control::Kind::kClockPing, Control::Kind::kClockPong}) {
    const Control d = decode_control(as_bytes(encode(Control{kind, "", 123456789012345u})));
    EXPECT_EQ(d.kind, kind);
    EXPECT_EQ(d.value, 123456789012345u);
  }
}
