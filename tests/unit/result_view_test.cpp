// The result batch decoded as views (common/wire/result_view.hpp): the same answers as the
// copying decode, ids that really are views into the message (no copy per hit), bad bytes
// refused with the copying decode's clear errors, and nothing left readable after a failure.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "common/wire/messages.capnp.h"
#include "common/wire/result_view.hpp"
#include "common/wire/wire.hpp"

using namespace gpusearch;
using namespace gpusearch::wire;

namespace {

// A batch of `queries` answers with ids of every length around the small-string buffer.
ResultBatch random_batch(std::mt19937& rng, std::size_t queries) {
  ResultBatch b;
  b.batch_id = 7;
  b.shard_id = 3;
  b.answers.resize(queries);
  GlobalRank rank = 0;
  for (auto& a : b.answers) {
    for (int o = 0; o < 2; ++o) {
      auto& hits = o ? a.result.or_hits : a.result.hits;
      auto& ids = o ? a.or_hit_ids : a.hit_ids;
      const std::size_t n = rng() % 12;
      for (std::size_t i = 0; i < n; ++i) {
        hits.push_back({double(20 - i), ++rank, 3, DocId(rng() % 5000)});
        ids.push_back(std::string(rng() % 40, char('a' + rng() % 26)));
      }
    }
    a.result.and_matches = rng() % 30;
    a.result.counters = {rng() % 9, rng() % 9, rng() % 9, rng() % 9, rng() % 2};
    a.result.partial = rng() % 7 == 0;
    a.result.ranker_fallback = rng() % 11 == 0;
  }
  return b;
}

void expect_same_answer(const ShardAnswerView& v, const ShardAnswer& a) {
  ASSERT_EQ(v.hits.size(), a.result.hits.size());
  ASSERT_EQ(v.or_hits.size(), a.result.or_hits.size());
  for (std::size_t i = 0; i < v.hits.size(); ++i) {
    EXPECT_EQ(v.hits[i].score, a.result.hits[i].score);
    EXPECT_EQ(v.hits[i].rank, a.result.hits[i].rank);
    EXPECT_EQ(v.hits[i].shard, a.result.hits[i].shard);
    EXPECT_EQ(v.hits[i].doc, a.result.hits[i].doc);
    EXPECT_EQ(v.hit_ids[i], a.hit_ids[i]);
  }
  for (std::size_t i = 0; i < v.or_hits.size(); ++i) {
    EXPECT_EQ(v.or_hits[i].rank, a.result.or_hits[i].rank);
    EXPECT_EQ(v.or_hit_ids[i], a.or_hit_ids[i]);
  }
  EXPECT_EQ(v.and_matches, a.result.and_matches);
  EXPECT_EQ(v.counters.docs_scored, a.result.counters.docs_scored);
  EXPECT_EQ(v.counters.early_terminations, a.result.counters.early_terminations);
  EXPECT_EQ(v.partial, a.result.partial);
  EXPECT_EQ(v.ranker_fallback, a.result.ranker_fallback);
}

bool inside(std::string_view id, std::span<const std::byte> bytes) {
  const auto* p = reinterpret_cast<const std::byte*>(id.data());
  return p >= bytes.data() && p + id.size() <= bytes.data() + bytes.size();
}

std::string error_of(std::span<const std::byte> bytes) {
  try {
    ResultBatchView v(bytes);
  } catch (const WireError& e) {
    return e.what();
  }
  return "";
}

// A result batch built field by field, for bytes the encoder would never write.
WireBytes flat(capnp::MallocMessageBuilder& m) {
  const auto words = capnp::messageToFlatArray(m);
  WireBytes out(words.size());
  std::memcpy(out.data(), words.begin(), words.size() * sizeof(capnp::word));
  return out;
}

// One query, two hits with the id ends given.
WireBytes two_hits_with_ends(std::uint32_t end0, std::uint32_t end1, std::size_t id_bytes) {
  capnp::MallocMessageBuilder m;
  auto r = m.initRoot<schema::ResultBatch>();
  auto counts = r.initHitCounts(2);
  counts.set(0, 2);
  counts.set(1, 0);
  r.initScores(2);
  r.initRanks(2);
  r.initDocs(2);
  auto ends = r.initExtIdEnds(2);
  ends.set(0, end0);
  ends.set(1, end1);
  r.initExtIds(unsigned(id_bytes));
  r.initAndMatches(1);
  r.initPartial(1);
  r.initRankerFallback(1);
  r.initCounters(5);
  return flat(m);
}

}  // namespace

TEST(ResultView, DecodesAsTheCopyingDecodeWithIdsInsideTheMessage) {
  std::mt19937 rng(11);
  ResultBatchView view;  // one view reused, as the merge thread does
  for (std::size_t queries : {0, 1, 5, 64, 3, 300}) {
    const ResultBatch b = random_batch(rng, queries);
    const WireBytes message = encode(b);
    const auto bytes = as_bytes(message);
    view.decode(bytes);
    const ResultBatch copied = decode_result_batch(bytes);
    EXPECT_EQ(view.header().batch_id, 7u);
    EXPECT_EQ(view.header().shard_id, 3u);
    ASSERT_EQ(view.size(), queries);
    ASSERT_EQ(copied.answers.size(), queries);
    std::size_t ids = 0;
    for (std::size_t q = 0; q < queries; ++q) {
      const ShardAnswerView a = view.answer(q);
      expect_same_answer(a, b.answers[q]);
      expect_same_answer(a, copied.answers[q]);
      for (auto id_list : {a.hit_ids, a.or_hit_ids})
        for (std::string_view id : id_list) {
          EXPECT_TRUE(id.empty() || inside(id, bytes)) << "an id copied out of the message";
          ++ids;
        }
    }
    if (queries >= 64) {
      EXPECT_GT(ids, 100u);
    }
  }
  view.clear();
  EXPECT_EQ(view.size(), 0u);
}

TEST(ResultView, MisalignedBytesAreCopiedIntoTheViewAndStayValidWhenMoved) {
  std::mt19937 rng(12);
  const ResultBatch b = random_batch(rng, 20);
  const WireBytes message = encode(b);
  std::vector<std::byte> shifted(message.size() * 8 + 1);
  std::memcpy(shifted.data() + 1, message.data(), message.size() * 8);
  ResultBatchView view(std::span<const std::byte>(shifted).subspan(1));
  // The caller's misaligned bytes are not what the ids point into: scribbling over them (or
  // moving the view) changes nothing.
  std::fill(shifted.begin(), shifted.end(), std::byte{'#'});
  const ResultBatchView moved = std::move(view);
  ASSERT_EQ(moved.size(), 20u);
  for (std::size_t q = 0; q < 20; ++q) expect_same_answer(moved.answer(q), b.answers[q]);
}

TEST(ResultView, TruncatedMessagesThrowAClearErrorAndLeaveTheViewEmpty) {
  std::mt19937 rng(13);
  const WireBytes message = encode(random_batch(rng, 8));
  const auto bytes = as_bytes(message);
  ResultBatchView view(bytes);
  ASSERT_EQ(view.size(), 8u);
  for (std::size_t n = 0; n < bytes.size(); n += 8) {
    try {
      view.decode(bytes.first(n));
      ADD_FAILURE() << n << " of " << bytes.size() << " bytes decoded";
    } catch (const WireError& e) {
      EXPECT_NE(std::string(e.what()).find("result batch"), std::string::npos) << e.what();
    }
    EXPECT_EQ(view.size(), 0u) << "a failed decode left answers to read";
    EXPECT_EQ(view.header().batch_id, 0u);
  }
  EXPECT_NE(error_of(bytes.first(bytes.size() - 3)).find("not a whole number of words"),
            std::string::npos);
  EXPECT_NE(error_of({}).find("not a whole number of words"), std::string::npos);
}

TEST(ResultView, CorruptIdEndsAndColumnsAreRefusedByName) {
  // Well-formed ends: two ids "ab" and "cde" of 5 bytes.
  const WireBytes good = two_hits_with_ends(2, 5, 5);
  const ResultBatchView ok(as_bytes(good));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok.answer(0).hit_ids[0].size(), 2u);
  EXPECT_EQ(ok.answer(0).hit_ids[1].size(), 3u);
  // An end past the id bytes, and ends that go backwards: both name the id.
  const WireBytes past = two_hits_with_ends(2, 6, 5);
  EXPECT_NE(error_of(as_bytes(past)).find("external id 1 out of range"), std::string::npos)
      << error_of(as_bytes(past));
  const WireBytes backwards = two_hits_with_ends(4, 3, 5);
  EXPECT_NE(error_of(as_bytes(backwards)).find("external id 1 out of range"), std::string::npos);
  // Counts that promise more hits than the columns hold.
  capnp::MallocMessageBuilder m;
  auto r = m.initRoot<schema::ResultBatch>();
  auto counts = r.initHitCounts(2);
  counts.set(0, 3);
  r.initScores(2);
  const WireBytes short_columns = flat(m);
  EXPECT_NE(error_of(as_bytes(short_columns)).find("columns of 2/0/0/0 hits for 3 counted"),
            std::string::npos)
      << error_of(as_bytes(short_columns));
  // Random damage anywhere in a real message: refused or read, never a crash or an id outside.
  std::mt19937 rng(14);
  const WireBytes message = encode(random_batch(rng, 30));
  int refused = 0;
  for (int trial = 0; trial < 500; ++trial) {
    WireBytes bad = message;
    auto* b = reinterpret_cast<unsigned char*>(bad.data());
    for (int flips = 0; flips < 3; ++flips) b[rng() % (bad.size() * 8)] ^= 1u << (rng() % 8);
    try {
      const ResultBatchView v(as_bytes(bad));
      for (std::size_t q = 0; q < v.size(); ++q)
        for (std::string_view id : v.answer(q).hit_ids)
          EXPECT_TRUE(id.empty() || inside(id, as_bytes(bad)));
    } catch (const WireError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}
