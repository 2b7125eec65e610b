// The ISN's answer segments come from a pool (common/wire/segment_pool.hpp): a reused buffer
// must be as zeroed as a fresh one, or Cap'n Proto's padding and text terminators would carry
// the last answer's bytes. Messages built on reused buffers are the bytes of fresh ones.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/wire/segment_pool.hpp"
#include "common/wire/wire.hpp"

using namespace gpusearch;
using namespace gpusearch::wire;

TEST(SegmentPool, ReleasedBuffersComeBackZeroed) {
  SegmentPool pool(2);
  auto a = pool.acquire(100);
  ASSERT_GE(a.size(), 100u);
  for (auto& w : a) w = ~std::uint64_t(0);
  pool.release(std::move(a), 1000);  // more than its size: every word
  EXPECT_EQ(pool.free_buffers(), 1u);
  auto b = pool.acquire(50);  // the same buffer, smaller request
  EXPECT_EQ(pool.reused(), 1u);
  ASSERT_GE(b.size(), 100u);
  for (auto w : b) ASSERT_EQ(w, 0u);
  // Partly written: only those words need zeroing, and are zeroed.
  b[0] = b[7] = 5;
  pool.release(std::move(b), 8);
  auto c = pool.acquire(100);
  for (auto w : c) ASSERT_EQ(w, 0u);
  // Too large for every free buffer: a fresh one.
  pool.release(std::move(c), 0);
  auto d = pool.acquire(500);
  EXPECT_EQ(d.size(), 500u);
  EXPECT_EQ(pool.reused(), 2u);
  // A full pool keeps the larger buffers.
  pool.release(std::vector<std::uint64_t>(10, 0), 0);
  pool.release(std::move(d), 0);
  pool.release(std::vector<std::uint64_t>(1000, 0), 0);
  EXPECT_EQ(pool.free_buffers(), 2u);
  EXPECT_GE(pool.acquire(900).size(), 1000u);
  EXPECT_GE(pool.acquire(400).size(), 500u);
}

TEST(SegmentPool, AnswersEncodedOnReusedSegmentsAreTheBytesOfFreshOnes) {
  auto pool = std::make_shared<SegmentPool>();
  std::mt19937 rng(41);
  std::vector<std::string> ids;
  for (int i = 0; i < 5000; ++i) ids.push_back(std::string(1 + rng() % 45, char('a' + rng() % 26)));
  auto id_of = [&](DocId d) { return std::string_view(ids[d % ids.size()]); };
  for (int round = 0; round < 40; ++round) {
    // Sizes up and down, so that a smaller answer lands on a buffer a larger one dirtied.
    std::vector<ShardResult> results(1 + rng() % (round % 2 ? 300 : 20));
    for (auto& r : results) {
      for (std::size_t i = rng() % 11; i > 0; --i)
        r.hits.push_back({double(rng() % 1000) / 7, GlobalRank(rng()), 0, DocId(rng())});
      for (std::size_t i = rng() % 3; i > 0; --i)
        r.or_hits.push_back({1.5, GlobalRank(rng()), 0, DocId(rng())});
      r.and_matches = rng() % 20;
      r.partial = rng() % 2;
      r.counters = {rng(), rng(), rng(), rng(), rng()};
    }
    ResultHeader h;
    h.batch_id = round;
    h.error = round % 7 == 3 ? std::string(rng() % 30, 'e') : "";
    EncodedMessage pooled = encode_results(h, results, id_of, pool);
    EncodedMessage fresh = encode_results(h, results, id_of);
    WireBytes a = pooled.flat(), b = fresh.flat();
    // encoded_us is stamped at the end of each encode: equal it before comparing.
    const ResultHeader ha = decode_result_header(as_bytes(a));
    const ResultHeader hb = decode_result_header(as_bytes(b));
    ASSERT_EQ(a.size(), b.size()) << "round " << round;
    std::size_t differ = 0;
    for (std::size_t w = 0; w < a.size(); ++w) differ += a[w] != b[w];
    EXPECT_LE(differ, 1u) << "round " << round << ": only the encode timestamp may differ";
    if (differ == 1) {
      EXPECT_NE(ha.encoded_us, hb.encoded_us);
    }
    const ResultBatch d = decode_result_batch(as_bytes(a));
    ASSERT_EQ(d.answers.size(), results.size());
    if (!results.empty() && !results[0].hits.empty()) {
      EXPECT_EQ(d.answers[0].hit_ids[0], id_of(results[0].hits[0].doc));
    }
  }  // each pooled message goes back to the pool here, for the next round
  EXPECT_GT(pool->reused(), 30u);
}
