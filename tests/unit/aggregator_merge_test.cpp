// The aggregator's merge and answer order: the k-way merge over the ISNs' sorted lists gives
// exactly merge_shard_results' answer (the in-process path), with each hit's external id; the
// arrival-order writer puts answers in the order queries arrived, whatever order they came in.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <sstream>

#include "aggregator/arrival_order_writer.hpp"
#include "aggregator/kway_merge.hpp"
#include "aggregator/run_writer_thread.hpp"

using namespace gpusearch;
using namespace gpusearch::wire;

namespace {

// Random per-shard answers: unique GS ranks, scores with many ties, each list sorted and cut at k.
std::vector<ShardAnswer> random_answers(std::mt19937& rng, std::size_t shards, unsigned k) {
  std::vector<ShardAnswer> out(shards);
  std::vector<GlobalRank> ranks(shards * 40);
  std::iota(ranks.begin(), ranks.end(), 0);
  std::shuffle(ranks.begin(), ranks.end(), rng);
  std::size_t next = 0;
  for (std::size_t s = 0; s < shards; ++s) {
    for (int o = 0; o < 2; ++o) {
      std::vector<RankedDoc> list;
      const std::size_t n = rng() % 20;
      for (std::size_t i = 0; i < n; ++i)
        list.push_back({double(rng() % 5), ranks[next++ % ranks.size()], std::uint32_t(s),
                        DocId(rng() % 1000)});
      std::sort(list.begin(), list.end(), ranks_before);
      list.erase(
          std::unique(list.begin(), list.end(),
                      [](const RankedDoc& a, const RankedDoc& b) { return a.rank == b.rank; }),
          list.end());
      if (list.size() > k) list.resize(k);
      auto& ids = o ? out[s].or_hit_ids : out[s].hit_ids;
      for (const RankedDoc& d : list) ids.push_back("r" + std::to_string(d.rank));
      (o ? out[s].result.or_hits : out[s].result.hits) = std::move(list);
    }
    out[s].result.and_matches = rng() % (2 * k);
    out[s].result.counters.postings_decoded = s + 1;
  }
  return out;
}

}  // namespace

TEST(AggregatorMerge, KWayEqualsPartialSort) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 500; ++trial) {
    const std::size_t shards = 1 + rng() % 6;
    SearchParams params;
    params.k = 1 + rng() % 15;
    params.mode = trial % 3 == 0 ? Mode::kOr : trial % 3 == 1 ? Mode::kAnd : Mode::kAndOr;
    const auto answers = random_answers(rng, shards, params.k);
    std::vector<const ShardAnswer*> a;
    std::vector<const ShardResult*> r;
    for (const auto& x : answers) a.push_back(&x), r.push_back(&x.result);
    const MergedAnswer m = merge_answers(params, a);
    const QueryResult ref = merge_shard_results(params, r);
    ASSERT_EQ(m.answer.answered_by_or, ref.answered_by_or);
    ASSERT_EQ(m.answer.hits.size(), ref.hits.size()) << "trial " << trial;
    for (std::size_t i = 0; i < ref.hits.size(); ++i) {
      EXPECT_EQ(m.answer.hits[i].score, ref.hits[i].score);
      EXPECT_EQ(m.answer.hits[i].docid, "r" + std::to_string(ref.hits[i].rank));
    }
    EXPECT_EQ(m.counters.postings_decoded, ref.counters.postings_decoded);
    // The merge thread's path: each shard's answer through the wire, decoded as views into
    // the message (ids copied only for the kept hits): the same answer.
    std::vector<WireBytes> messages;
    for (std::size_t j = 0; j < answers.size(); ++j) {
      ResultBatch rb;
      rb.shard_id = std::uint32_t(j);
      rb.answers.push_back(answers[j]);
      messages.push_back(encode(rb));
    }
    std::vector<ResultBatchView> decoded(messages.size());
    std::vector<ShardAnswerView> views;
    for (std::size_t j = 0; j < messages.size(); ++j) {
      decoded[j].decode(as_bytes(messages[j]));
      views.push_back(decoded[j].answer(0));
    }
    const MergedAnswer viewed = merge_answers(params, views);
    ASSERT_EQ(viewed.answer.answered_by_or, m.answer.answered_by_or);
    ASSERT_EQ(viewed.answer.hits.size(), m.answer.hits.size());
    for (std::size_t i = 0; i < m.answer.hits.size(); ++i) {
      EXPECT_EQ(viewed.answer.hits[i].docid, m.answer.hits[i].docid);
      EXPECT_EQ(viewed.answer.hits[i].score, m.answer.hits[i].score);
    }
    EXPECT_EQ(viewed.counters.postings_decoded, m.counters.postings_decoded);
  }
}

TEST(RunWriterThread, WritesTheSameBytesAsTheOrderingWriterOnItsOwnThread) {
  std::ostringstream direct, threaded;
  ArrivalOrderWriter w(direct, "t");
  {
    RunWriterThread t(threaded, "t");
    for (std::uint64_t i = 0; i < 500; ++i) {
      const std::uint64_t seq = i ^ 1;  // pairs answered out of order
      std::vector<CachedHit> hits;
      for (std::uint64_t h = 0; h < seq % 4; ++h)
        hits.push_back({"d" + std::to_string(h), 1.0 + h});
      w.add(seq, "q" + std::to_string(seq), hits);
      t.add(seq, "q" + std::to_string(seq), hits);
    }
    t.finish();
    EXPECT_EQ(t.order().written(), 500u);
    EXPECT_EQ(t.order().waiting(), 0u);
  }
  EXPECT_EQ(threaded.str(), direct.str());
  EXPECT_FALSE(direct.str().empty());
}

TEST(ArrivalOrderWriter, WritesInArrivalOrderWhateverTheAnswerOrder) {
  std::ostringstream out;
  ArrivalOrderWriter w(out, "t");
  w.add(2, "q2", {{"d", 1.0}});
  w.add(1, "q1", {});
  EXPECT_EQ(out.str(), "");  // q0 has not been answered
  EXPECT_EQ(w.waiting(), 2u);
  w.add(0, "q0", {{"a", 3.0}, {"b", 2.0}});
  EXPECT_EQ(out.str(), "q0 Q0 a 1 3 t\nq0 Q0 b 2 2 t\nq2 Q0 d 1 1 t\n");
  EXPECT_EQ(w.written(), 3u);
  EXPECT_EQ(w.waiting(), 0u);
  EXPECT_EQ(w.max_waiting(), 3u);
}

TEST(ArrivalOrderWriter, PackedJobsWriteTheSameBytesAsOneAnswerAtATime) {
  // Jobs of packed answers (the merge thread's hand-over), with answers out of order within and
  // across jobs, and ids of every length around the small-string buffer: the same bytes, the
  // same counts, as adding each answer on its own.
  std::mt19937 rng(21);
  std::vector<std::uint64_t> order(400);
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t i = 0; i + 3 < order.size(); i += 1 + rng() % 4)
    std::swap(order[i], order[i + 1 + rng() % 3]);
  std::ostringstream single, packed, threaded;
  ArrivalOrderWriter one(single, "tag"), jobs(packed, "tag");
  {
    RunWriterThread thread(threaded, "tag");
    PackedAnswers job, thread_job;
    for (std::size_t n = 0; n < order.size(); ++n) {
      const std::uint64_t seq = order[n];
      std::vector<CachedHit> hits;
      std::vector<HitView> views;
      for (std::size_t h = 0; h < seq % 12; ++h)
        hits.push_back({std::string(1 + (seq * 7 + h) % 40, char('a' + h)), 20.0 / (h + 1)});
      for (const CachedHit& h : hits) views.push_back({h.docid, h.score});
      one.add(seq, "q" + std::to_string(seq), hits);
      job.add(seq, "q" + std::to_string(seq), views);
      thread_job.add(seq, "q" + std::to_string(seq), views);
      if (rng() % 5 == 0 || n + 1 == order.size()) {
        jobs.add(job);
        job.clear();
        thread.add_all(thread_job);  // hands a spare buffer back, cleared
        EXPECT_TRUE(thread_job.empty());
      }
    }
    thread.finish();
    EXPECT_EQ(thread.order().written(), order.size());
  }
  EXPECT_EQ(packed.str(), single.str());
  EXPECT_EQ(threaded.str(), single.str());
  EXPECT_EQ(jobs.written(), order.size());
  EXPECT_EQ(jobs.waiting(), 0u);
  EXPECT_EQ(jobs.max_waiting(), one.max_waiting());
  EXPECT_GT(one.max_waiting(), 1u);
}
