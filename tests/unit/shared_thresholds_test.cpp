// Thresholds shared between the engines of several shards (--share-thresholds, issue 16): the
// slot logic (one batch per slot, rounding down, never lowered), and four CPU engines on four
// shards sharing their queries' k-th scores: the merged answers equal the reference's for every
// algorithm and mode, the engines do less work together than alone, and a slot raised above the
// final k-th score (a weakened bound) gives answers the check catches.
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <thread>

#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/cpu_engine/threshold_slot.hpp"
#include "isn/cpu_engine/top_k.hpp"
#include "isn/shared_thresholds.hpp"
#include "partition/index_builder.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using cpu::ThresholdSlot;
using gpusearch::testing::TempDir;

namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

TEST(ThresholdSlot, RoundsDownToTheLargestFloatNotAbove) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> score(0.0, 60.0);
  for (int i = 0; i < 100000; ++i) {
    const double x = score(rng);
    const float f = ThresholdSlot::round_down(x);
    ASSERT_LE(double(f), x) << x;
    ASSERT_GT(double(std::nextafter(f, std::numeric_limits<float>::infinity())), x) << x;
  }
  EXPECT_EQ(ThresholdSlot::round_down(2.5), 2.5f);  // representable: unchanged
  EXPECT_EQ(ThresholdSlot::round_down(1e300), std::numeric_limits<float>::max());
  // What a reader gets back is never above what was raised.
  std::uint64_t word = 0;
  ThresholdSlot slot(&word, 1);
  slot.raise(0.1);
  EXPECT_LE(slot.get(), 0.1);
  EXPECT_GT(slot.get(), 0.1 - 1e-7);
}

TEST(ThresholdSlot, ASlotNeverMixesTwoBatches) {
  std::uint64_t word = 0;
  ThresholdSlot batch5(&word, 5), batch6(&word, 6), batch4(&word, 4);
  EXPECT_EQ(batch5.get(), kMinusInf);  // empty
  batch5.raise(3.0);
  EXPECT_EQ(batch5.get(), 3.0);
  EXPECT_EQ(batch6.get(), kMinusInf) << "another batch's value read";
  batch4.raise(9.0);  // an older batch: dropped
  EXPECT_EQ(batch5.get(), 3.0);
  EXPECT_EQ(batch4.get(), kMinusInf);
  batch6.raise(1.0);  // a newer batch, even with a lower value: overwrites
  EXPECT_EQ(batch6.get(), 1.0);
  EXPECT_EQ(batch5.get(), kMinusInf) << "a stale value read after the slot moved on";
  batch5.raise(7.0);  // the older batch again: dropped
  EXPECT_EQ(batch6.get(), 1.0);
  EXPECT_EQ(batch5.get(), kMinusInf);
}

TEST(ThresholdSlot, NeverLowersAndIgnoresWhatIsNotAScore) {
  std::uint64_t word = 0;
  ThresholdSlot slot(&word, 2);
  slot.raise(5.0);
  slot.raise(4.0);
  EXPECT_EQ(slot.get(), 5.0);
  slot.raise(std::nan(""));
  slot.raise(kMinusInf);
  EXPECT_EQ(slot.get(), 5.0);
  ThresholdSlot unlinked;
  unlinked.raise(8.0);  // nothing to write
  EXPECT_EQ(unlinked.get(), kMinusInf);
  EXPECT_EQ(slot.get(), 5.0);
}

TEST(ThresholdSlot, SequenceNumbersWrapAndAreNeverZero) {
  EXPECT_TRUE(ThresholdSlot::newer(1, 0xFFFFFFFFu));
  EXPECT_FALSE(ThresholdSlot::newer(0xFFFFFFFFu, 1));
  EXPECT_TRUE(ThresholdSlot::newer(7, 6));
  EXPECT_FALSE(ThresholdSlot::newer(6, 6));
  for (std::uint64_t b :
       {0ull, 1ull, 0xFFFFFFFEull, 0xFFFFFFFFull, 0x100000000ull, 0x1FFFFFFFEull, ~0ull})
    EXPECT_NE(SharedThresholdWindow::sequence_of_batch(b), 0u) << b;
  EXPECT_NE(SharedThresholdWindow::sequence_of_batch(7),
            SharedThresholdWindow::sequence_of_batch(8));
}

TEST(ThresholdSlot, ConcurrentRaisesKeepTheMaximum) {
  std::uint64_t word = 0;
  std::vector<std::thread> threads;
  std::vector<double> best(4, 0.0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      ThresholdSlot slot(&word, 9);
      std::mt19937_64 rng(t);
      std::uniform_real_distribution<double> score(0.0, 100.0);
      for (int i = 0; i < 20000; ++i) {
        const double x = score(rng);
        best[t] = std::max(best[t], x);
        slot.raise(x);
      }
    });
  for (auto& t : threads) t.join();
  const double max = *std::max_element(best.begin(), best.end());
  EXPECT_EQ(ThresholdSlot(&word, 9).get(), double(ThresholdSlot::round_down(max)));
}

// publish(): the union keeps the k best scores published under its sequence number, raises the
// slot to their smallest once it holds k (rounded down), ignores what does not improve it, counts
// an older batch's entries as empty and leaves a later batch's alone; from several threads at
// once the final slot is the k-th of everything published.
TEST(ThresholdSlot, UnionRaisesTheSlotToTheKthPublished) {
  std::uint64_t w[1 + ThresholdSlot::kUnionCapacity] = {};
  ThresholdSlot slot(&w[0], 5, &w[1], ThresholdSlot::kUnionCapacity);
  EXPECT_TRUE(slot.publishes(10));
  EXPECT_FALSE(slot.publishes(16));
  EXPECT_FALSE(ThresholdSlot(&w[0], 5).publishes(10));
  for (int i = 1; i <= 9; ++i) slot.publish(i, 10);
  EXPECT_EQ(slot.get(), -std::numeric_limits<double>::infinity());  // 9 of 10
  slot.publish(0.5, 10);
  EXPECT_EQ(slot.get(), 0.5);
  slot.publish(0.25, 10);  // not among the best 10
  EXPECT_EQ(slot.get(), 0.5);
  slot.publish(1.0 / 3.0, 10);
  EXPECT_EQ(slot.get(), 0.5);
  slot.publish(20.0 / 3.0, 10);  // evicts 0.5; the 10th best is now 1
  EXPECT_EQ(slot.get(), 1.0);
  // The next batch in this ring place: the old entries count as empty.
  ThresholdSlot next(&w[0], 6, &w[1], ThresholdSlot::kUnionCapacity);
  for (int i = 0; i < 9; ++i) next.publish(100 + i, 10);
  EXPECT_EQ(next.get(), -std::numeric_limits<double>::infinity());
  next.publish(2.0 / 3.0, 10);
  EXPECT_EQ(next.get(), double(ThresholdSlot::round_down(2.0 / 3.0)));
  // The old batch no longer changes anything.
  slot.publish(1000, 10);
  EXPECT_EQ(next.get(), double(ThresholdSlot::round_down(2.0 / 3.0)));

  std::uint64_t c[1 + ThresholdSlot::kUnionCapacity] = {};
  constexpr int kThreads = 4, kEach = 5000;
  std::vector<double> all;
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kEach; ++i) all.push_back(std::ldexp(double((i * 7919 + t * 104729) % 1000003), -7) + t * 1e-3);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ThresholdSlot mine(&c[0], 1, &c[1], ThresholdSlot::kUnionCapacity);
      for (int i = 0; i < kEach; ++i) mine.publish(all[std::size_t(t * kEach + i)], 12);
    });
  for (auto& th : threads) th.join();
  std::sort(all.begin(), all.end(), std::greater<>());
  EXPECT_EQ(ThresholdSlot(&c[0], 1).get(), double(ThresholdSlot::round_down(all[11])));
}

// A score at or below the slot's value (raised by some shard's own k-th) leaves the union's lines
// untouched: it could never be one of the k entries above that value that would raise the slot.
// Scores above it are published, and the slot follows them as before.
TEST(ThresholdSlot, ScoresAtOrBelowTheSlotAreNotPublished) {
  std::uint64_t w[1 + ThresholdSlot::kUnionCapacity] = {};
  ThresholdSlot slot(&w[0], 2, &w[1], ThresholdSlot::kUnionCapacity);
  slot.raise(5.0);  // another shard's k-th
  for (int i = 0; i < 20; ++i) slot.publish(1.0 + 0.2 * i, 10);  // 1.0 .. 4.8, and 5.0 itself
  slot.publish(5.0, 10);
  for (std::size_t i = 1; i <= ThresholdSlot::kUnionCapacity; ++i)
    EXPECT_EQ(w[i], 0u) << "union entry " << i << " written";
  EXPECT_EQ(slot.get(), 5.0);
  for (int i = 1; i <= 10; ++i) slot.publish(5.0 + i, 10);  // 6 .. 15
  EXPECT_EQ(slot.get(), 6.0);  // the 10th of what is above 5
  slot.publish(5.5, 10);       // below the slot now: nothing
  EXPECT_EQ(slot.get(), 6.0);
  slot.publish(16.0, 10);  // evicts 6
  EXPECT_EQ(slot.get(), 7.0);
}

TEST(SharedThreshold, LinkedReadsTheLargerAndRaisesBoth) {
  std::uint64_t word = 0;
  ThresholdSlot other(&word, 3);
  cpu::SharedThreshold linked(ThresholdSlot(&word, 3));
  EXPECT_TRUE(linked.has_external());
  linked.raise(2.0);
  EXPECT_EQ(other.get(), 2.0);  // published
  other.raise(6.0);             // another process's shard
  EXPECT_EQ(linked.get(), 6.0);
  linked.raise(4.0);
  EXPECT_EQ(linked.get(), 6.0);
  EXPECT_EQ(other.get(), 6.0);
  cpu::SharedThreshold alone;
  EXPECT_FALSE(alone.has_external());
  alone.raise(1.0);
  EXPECT_EQ(alone.get(), 1.0);
}

TEST(SharedThreshold, AMootSlotGoingFiniteStopsTheRunAndNothingElse) {
  std::uint64_t or_word = 0, and_word = 0;
  ThresholdSlot and_slot(&and_word, 4);
  cpu::SharedThreshold or_phase(ThresholdSlot(&or_word, 4), ThresholdSlot(&and_word, 4));
  EXPECT_TRUE(or_phase.has_external());
  or_phase.raise(3.0);
  EXPECT_EQ(or_phase.get(), 3.0);  // not moot yet: the OR slot's value
  and_slot.raise(0.5);             // another shard: k AND matches, however low their k-th
  EXPECT_EQ(or_phase.get(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(ThresholdSlot(&or_word, 4).get(), 3.0) << "the OR slot itself was changed";
  // A later batch's value in the AND slot does not make this batch's run moot.
  std::uint64_t and_word2 = 0, or_word2 = 0;
  ThresholdSlot(&and_word2, 9).raise(1.0);
  cpu::SharedThreshold older(ThresholdSlot(&or_word2, 8), ThresholdSlot(&and_word2, 8));
  EXPECT_EQ(older.get(), kMinusInf);
  // A top-k reading the moot threshold refuses every document from its next refresh on.
  std::uint64_t or_word3 = 0, and_word3 = 0;
  cpu::SharedThreshold t(ThresholdSlot(&or_word3, 2), ThresholdSlot(&and_word3, 2));
  cpu::TopK top(3, &t, /*concurrent=*/true, nullptr, /*refresh=*/1);
  EXPECT_EQ(top.threshold(), kMinusInf);
  ThresholdSlot(&and_word3, 2).raise(0.1);
  EXPECT_EQ(top.threshold(), std::numeric_limits<double>::infinity());
}

// ---- Four engines on four shards --------------------------------------------------------------

class SharedThresholdEngines : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    BuildOptions o;
    o.progress = false;
    o.out_dir = *dir_ / "four";
    o.num_shards = 4;
    build_index_synthetic(SyntheticParams::parse(
                              "docs=16000,seed=23,mean_length=120,train_queries=5,test_queries=60"),
                          o);
  }
  static void TearDownTestSuite() { delete dir_; }

  struct Run {
    std::vector<std::vector<ShardResult>> by_shard;  // [shard][query]
    QueryCounters work;                              // summed over shards and queries
  };

  // The four shards' engines answer `queries`; sharing: through one slot pair per query (as one
  // batch in the node's window), the shards one after the other (`parallel` false: each starts
  // from the thresholds of the shards before it) or at once. `seed` raises the slots first.
  // `collection_seeds` > 0: sharing engines seed from their tables combined
  // (KthImpactTable::combine, as the ISNs of a node combine them), times that factor (1: as
  // shipped; above 1 a weakened bound the check must catch). `in_order`: the engines' threads
  // take the queries in batch order, one at a time (CpuEngineOptions::sharing_in_batch_order).
  static Run run(const Index& index, const std::vector<Query>& queries, const SearchParams& p,
                 cpu::Algorithm a, bool sharing, bool parallel,
                 const std::function<void(std::vector<cpu::QueryThresholdSlots>&)>& seed = {},
                 double collection_seeds = 0, bool unions = true, unsigned refresh = 1,
                 bool in_order = false) {
    constexpr std::size_t phase = 1 + ThresholdSlot::kUnionCapacity;
    std::vector<std::uint64_t> words(2 * phase * queries.size(), 0);
    std::vector<cpu::QueryThresholdSlots> slots(queries.size());
    auto slot = [&](std::uint64_t* w) {
      return unions ? ThresholdSlot(w, 1, w + 1, ThresholdSlot::kUnionCapacity)
                    : ThresholdSlot(w, 1);
    };
    if (sharing)
      for (std::size_t q = 0; q < queries.size(); ++q)
        slots[q] = {slot(&words[2 * phase * q]), slot(&words[2 * phase * q + phase])};
    if (seed) seed(slots);
    const std::size_t shards = index.num_open_shards();
    std::vector<std::unique_ptr<cpu::CpuEngine>> engines;
    for (std::size_t s = 0; s < shards; ++s)
    {
      cpu::CpuEngineOptions o{a};
      o.shared_threshold_refresh = refresh;
      o.sharing_in_batch_order = in_order;
      engines.push_back(std::make_unique<cpu::CpuEngine>(index.shard(s), index.shard_id(s), o));
    }
    if (collection_seeds > 0) {
      std::vector<const KthImpactTable*> tables;
      for (const auto& e : engines) tables.push_back(e->kth_impacts());
      auto combined = std::make_shared<const KthImpactTable>(
          KthImpactTable::combine(tables).scaled(collection_seeds));
      for (const auto& e : engines) e->set_collection_seeds(combined);
    }
    Run r;
    r.by_shard.assign(shards, std::vector<ShardResult>(queries.size()));
    auto one = [&](std::size_t s) { engines[s]->search(queries, p, r.by_shard[s], slots); };
    if (parallel) {
      std::vector<std::thread> threads;
      for (std::size_t s = 0; s < shards; ++s) threads.emplace_back(one, s);
      for (auto& t : threads) t.join();
    } else {
      for (std::size_t s = 0; s < shards; ++s) one(s);
    }
    for (const auto& shard : r.by_shard)
      for (const ShardResult& x : shard) r.work.add(x.counters);
    return r;
  }

  // Queries whose merged answer differs from the reference's (the first difference reported
  // when `report`).
  static std::size_t count_wrong(const Index& index, const std::vector<Query>& queries,
                                 const SearchParams& p, const Run& r, const std::string& what,
                                 bool report) {
    std::size_t wrong = 0;
    for (std::size_t q = 0; q < queries.size(); ++q) {
      std::vector<const ShardResult*> ptrs;
      for (const auto& shard : r.by_shard) ptrs.push_back(&shard[q]);
      const QueryResult got = merge_shard_results(p, ptrs);
      const auto ref = reference_answer(index, queries[q], p, p.k + 20);
      auto diff = compare_top_k(ref.hits, ref.total_matches, p.k, got.hits);
      if (!diff && got.answered_by_or != ref.answered_by_or)
        diff = "answered by the " + std::string(got.answered_by_or ? "OR" : "AND") + " list";
      if (diff) {
        if (report && wrong == 0)
          ADD_FAILURE() << what << " query " << queries[q].id << ": " << *diff;
        ++wrong;
      }
    }
    return wrong;
  }

  static std::vector<Query> queries(const Index& index, std::size_t limit) {
    const QueryFile qf = read_query_file(*dir_ / "four" / "queries.test.tsv");
    std::vector<Query> out;
    for (const QueryText& qt : qf.queries) {
      Query q;
      QueryProblem problem;
      if (out.size() < limit && resolve_query(index.shard(0), qt, QueryLimits{}, q, problem, "") &&
          !q.terms.empty())
        out.push_back(std::move(q));
    }
    return out;
  }
  static TempDir* dir_;
};
TempDir* SharedThresholdEngines::dir_ = nullptr;

std::string describe(const SearchParams& p, cpu::Algorithm a, const char* how) {
  return std::string(to_string(p.mode)) + " " + std::string(to_string(p.scoring)) +
         " k=" + std::to_string(p.k) + " " + std::string(cpu::to_string(a)) + " " + how;
}

TEST_F(SharedThresholdEngines, MergedAnswersEqualTheReference) {
  const Index index = Index::open(*dir_ / "four");
  ASSERT_EQ(index.num_open_shards(), 4u);
  const auto qs = queries(index, 40);
  ASSERT_GE(qs.size(), 30u);
  std::size_t checks = 0;
  for (cpu::Algorithm a : {cpu::Algorithm::kExhaustive, cpu::Algorithm::kWand, cpu::Algorithm::kBmw,
                           cpu::Algorithm::kMaxScore, cpu::Algorithm::kMaxScoreDaat})
    for (Scoring scoring : {Scoring::kBm25, Scoring::kBm25Pr})
      for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr})
        for (unsigned k : {10u, 1000u}) {
          const SearchParams p{mode, scoring, 0.3, k};
          for (bool parallel : {false, true}) {
            const Run r = run(index, qs, p, a, true, parallel);
            const std::string what = describe(p, a, parallel ? "shards at once" : "shards in turn");
            ASSERT_EQ(count_wrong(index, qs, p, r, what, true), 0u) << what;
            checks += qs.size();
          }
        }
  EXPECT_GE(checks, 30u * 5 * 2 * 3 * 2 * 2);
}

TEST_F(SharedThresholdEngines, SharingSavesWork) {
  const Index index = Index::open(*dir_ / "four");
  const auto qs = queries(index, 40);
  for (Mode mode : {Mode::kOr, Mode::kAndOr, Mode::kAnd})
    for (cpu::Algorithm a : {cpu::Algorithm::kMaxScore, cpu::Algorithm::kBmw}) {
      const SearchParams p{mode, Scoring::kBm25, 0.3, 10};
      const Run alone = run(index, qs, p, a, false, false);
      const Run shared = run(index, qs, p, a, true, false);
      const std::string what = describe(p, a, "");
      EXPECT_LT(shared.work.docs_scored, alone.work.docs_scored) << what;
      EXPECT_LE(shared.work.postings_decoded, alone.work.postings_decoded) << what;
      EXPECT_EQ(count_wrong(index, qs, p, shared, what, true), 0u) << what;
      if (mode == Mode::kOr) {
        EXPECT_LT(shared.work.docs_scored * 10, alone.work.docs_scored * 9)
            << what << ": less than 10% saved (" << shared.work.docs_scored << " vs "
            << alone.work.docs_scored << " documents scored)";
      }
    }
}

// The union of published scores: the four shards' engines with it against the slots alone, in
// turn (each shard after the ones before it: the union then holds their best documents, the slot
// only the best of their k-th scores) and at once; exact with every algorithm, both scorings,
// every mode (the answers at k = 10, where unions publish; k = 1000 is beyond their capacity and
// runs as before), and fewer documents scored.
TEST_F(SharedThresholdEngines, UnionsOfPublishedScoresAreExactAndSaveWork) {
  const Index index = Index::open(*dir_ / "four");
  const auto qs = queries(index, 40);
  for (cpu::Algorithm a : {cpu::Algorithm::kExhaustive, cpu::Algorithm::kWand, cpu::Algorithm::kBmw,
                           cpu::Algorithm::kMaxScore, cpu::Algorithm::kMaxScoreDaat})
    for (Scoring scoring : {Scoring::kBm25, Scoring::kBm25Pr})
      for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
        const SearchParams p{mode, scoring, 0.3, 10};
        // The node's combined seeds as the ISNs use them (exhaustive OR has no table).
        const double seeds = a == cpu::Algorithm::kExhaustive ? 0.0 : 1.0;
        for (bool parallel : {false, true}) {
          const std::string what = describe(p, a, parallel ? "unions, at once" : "unions, in turn");
          const Run with = run(index, qs, p, a, true, parallel, {}, seeds, true);
          ASSERT_EQ(count_wrong(index, qs, p, with, what, true), 0u) << what;
          if (parallel || a == cpu::Algorithm::kExhaustive) continue;
          const Run without = run(index, qs, p, a, true, parallel, {}, seeds, false);
          EXPECT_LE(with.work.docs_scored, without.work.docs_scored) << what;
          if (mode == Mode::kOr)
            std::cout << what << ": documents scored " << without.work.docs_scored << " -> "
                      << with.work.docs_scored << ", postings decoded "
                      << without.work.postings_decoded << " -> " << with.work.postings_decoded
                      << "\n";
        }
      }
  // The shared threshold re-read every 16 checks (--share-refresh 16): a stale reading is a
  // lower bound still, so every answer stays exact.
  for (cpu::Algorithm a : {cpu::Algorithm::kWand, cpu::Algorithm::kBmw, cpu::Algorithm::kMaxScore,
                           cpu::Algorithm::kMaxScoreDaat})
    for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
      const SearchParams p{mode, Scoring::kBm25Pr, 0.3, 10};
      const std::string what = describe(p, a, "unions, re-read every 16 checks");
      const Run r = run(index, qs, p, a, true, true, {}, 1.0, true, 16);
      ASSERT_EQ(count_wrong(index, qs, p, r, what, true), 0u) << what;
    }
  // The batch's queries in batch order, one at a time, on four threads per shard (the ISN's
  // --share-in-order): every query answered, exactly, in every mode.
  tbb::task_arena four_threads(4);
  four_threads.execute([&] {
    for (cpu::Algorithm a : {cpu::Algorithm::kExhaustive, cpu::Algorithm::kBmw,
                             cpu::Algorithm::kMaxScore, cpu::Algorithm::kMaxScoreDaat})
      for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr})
        for (bool parallel : {false, true}) {
          const SearchParams p{mode, Scoring::kBm25Pr, 0.3, 10};
          const std::string what = describe(p, a, parallel ? "in batch order, at once"
                                                           : "in batch order, in turn");
          const double seeds = a == cpu::Algorithm::kExhaustive ? 0.0 : 1.0;
          const Run r = run(index, qs, p, a, true, parallel, {}, seeds, true, 4, true);
          ASSERT_EQ(count_wrong(index, qs, p, r, what, true), 0u) << what;
        }
  });
  // OR, in turn: the union's k-th is the k-th of the earlier shards' documents together.
  const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
  const Run with = run(index, qs, p, cpu::Algorithm::kMaxScore, true, false, {}, 1.0, true);
  const Run without = run(index, qs, p, cpu::Algorithm::kMaxScore, true, false, {}, 1.0, false);
  EXPECT_LT(with.work.docs_scored, without.work.docs_scored);
}

// The tightest legal threshold, the final k-th score (rounded down, as every slot is): ties at it
// must still enter, and the answers stay exact. One float above it, a weakened bound: documents
// of the top-k are pruned, and the check sees it.
TEST_F(SharedThresholdEngines, ThresholdAtTheFinalKthIsExactAndAboveItIsCaught) {
  const Index index = Index::open(*dir_ / "four");
  const auto qs = queries(index, 40);
  for (Mode mode : {Mode::kOr, Mode::kAnd, Mode::kAndOr}) {
    const SearchParams p{mode, Scoring::kBm25, 0.3, 10};
    std::size_t seeded = 0;  // queries with k documents: a k-th score to seed
    for (const Query& q : qs) seeded += reference_answer(index, q, p, p.k).hits.size() >= p.k;
    ASSERT_GE(seeded, 8u) << to_string(mode);
    auto seed_with = [&](bool above) {
      return [&, above](std::vector<cpu::QueryThresholdSlots>& slots) {
        for (std::size_t q = 0; q < qs.size(); ++q) {
          const auto ref = reference_answer(index, qs[q], p, p.k);
          if (ref.hits.size() < p.k) continue;
          float f = ThresholdSlot::round_down(ref.hits[p.k - 1].score);
          if (above) f = std::nextafter(f, std::numeric_limits<float>::infinity());
          // and-or: the phase that answers (a finite AND slot says the AND list answers).
          const bool conjunctive =
              mode == Mode::kAnd || (mode == Mode::kAndOr && !ref.answered_by_or);
          const ThresholdSlot& slot = slots[q].of(conjunctive);
          ThresholdSlot(slot).raise(double(f));
        }
      };
    };
    for (cpu::Algorithm a : {cpu::Algorithm::kMaxScore, cpu::Algorithm::kWand}) {
      const Run tight = run(index, qs, p, a, true, true, seed_with(false));
      EXPECT_EQ(count_wrong(index, qs, p, tight, describe(p, a, "seeded at the k-th"), true), 0u);
      const Run over = run(index, qs, p, a, true, true, seed_with(true));
      EXPECT_GT(count_wrong(index, qs, p, over, "", false), seeded / 2)
          << describe(p, a, "seeded one float above the k-th") << ": not caught (" << seeded
          << " queries seeded)";
    }
  }
}

TEST_F(SharedThresholdEngines, TwoStageRankingDoesNotShare) {
  const Index index = Index::open(*dir_ / "four");
  const auto qs = queries(index, 2);
  std::uint64_t words[2] = {0, 0};
  const std::vector<cpu::QueryThresholdSlots> slots(
      qs.size(), {ThresholdSlot(&words[0], 1), ThresholdSlot(&words[1], 1)});
  cpu::CpuEngine engine(index.shard(0), index.shard_id(0));
  SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
  p.candidates = 100;
  std::vector<ShardResult> out(qs.size());
  EXPECT_THROW(engine.search(qs, p, out, slots), InputError);
  EXPECT_THROW(engine.search(qs, SearchParams{}, out, std::span(slots).first(1)), InputError);
}

}  // namespace

// The node's combined K-th impact bounds as every shard's seed: the merged answers stay the
// reference's (every algorithm that seeds, both scorings, or and and-or, k 10 and 1000) and the
// shards score fewer documents than sharing slots alone; the bounds times 1.5 (no longer lower
// bounds) lose documents of the top-k, and the check sees it.
TEST_F(SharedThresholdEngines, CollectionSeedsAreExactSaveWorkAndAWeakenedOneIsCaught) {
  const Index index = Index::open(*dir_ / "four");
  const auto qs = queries(index, 40);
  for (cpu::Algorithm a : {cpu::Algorithm::kWand, cpu::Algorithm::kBmw, cpu::Algorithm::kMaxScore,
                           cpu::Algorithm::kMaxScoreDaat})
    for (Scoring scoring : {Scoring::kBm25, Scoring::kBm25Pr})
      for (Mode mode : {Mode::kOr, Mode::kAndOr})
        for (unsigned k : {10u, 1000u}) {
          const SearchParams p{mode, scoring, 0.3, k};
          const std::string what = describe(p, a, "collection seeds");
          const Run seeded = run(index, qs, p, a, true, true, {}, 1.0);
          ASSERT_EQ(count_wrong(index, qs, p, seeded, what, true), 0u) << what;
        }
  for (cpu::Algorithm a : {cpu::Algorithm::kMaxScore, cpu::Algorithm::kBmw}) {
    const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
    const std::string what = describe(p, a, "collection seeds");
    // In turn: the first shard finds no threshold in the slots, so what it saves is the seed's.
    const Run slots_only = run(index, qs, p, a, true, false);
    const Run seeded = run(index, qs, p, a, true, false, {}, 1.0);
    EXPECT_LT(seeded.work.docs_scored, slots_only.work.docs_scored) << what;
    std::cout << what << ": documents scored " << slots_only.work.docs_scored << " -> "
              << seeded.work.docs_scored << ", postings decoded "
              << slots_only.work.postings_decoded << " -> " << seeded.work.postings_decoded
              << "\n";
    const Run weakened = run(index, qs, p, a, true, false, {}, 1.5);
    EXPECT_GT(count_wrong(index, qs, p, weakened, what + " x1.5", false), 0u)
        << what << ": bounds 1.5x too high went unnoticed";
  }
}

// combine(): a term's K-th bound over shards together is the largest x that the shards' ladders
// show at least K postings at or above; rows() and from_rows() round-trip; tables of different
// vocabularies are refused.
TEST(KthImpactTableCombine, CountsPostingsAtOrAboveEachBoundAcrossShards) {
  // Term 0: shard A's 1st, 2nd and 5th largest impacts are at least 9, 8, 5; shard B's 1st and
  // 2nd at least 7, 6. Term 1: only in B. Term 2: neither.
  const KthImpactTable a({0, 3, 3, 3}, {9.0f, 8.0f, 5.0f});
  const KthImpactTable b({0, 2, 4, 4}, {7.0f, 6.0f, 3.0f, 2.0f});
  const KthImpactTable* both[] = {&a, &b};
  const KthImpactTable c = KthImpactTable::combine(both);
  EXPECT_EQ(c.lower_bound(0, 1), 9.0);  // A alone
  EXPECT_EQ(c.lower_bound(0, 2), 8.0);  // A's two
  EXPECT_EQ(c.lower_bound(0, 5), 5.0);  // at 6: A's 2 + B's 2 = 4 < 5; at 5: A's 5 + B's 2
  EXPECT_EQ(c.lower_bound(0, 10), 0.0);  // at most 7 known anywhere
  EXPECT_EQ(c.lower_bound(1, 1), 3.0);
  EXPECT_EQ(c.lower_bound(1, 2), 2.0);
  EXPECT_EQ(c.lower_bound(1, 5), 0.0);
  EXPECT_EQ(c.lower_bound(2, 1), 0.0);
  // Four copies of A: 20 postings known at or above 5, 8 at or above 8.
  const KthImpactTable* four[] = {&a, &a, &a, &a};
  const KthImpactTable d = KthImpactTable::combine(four);
  EXPECT_EQ(d.lower_bound(0, 5), 8.0);
  EXPECT_EQ(d.lower_bound(0, 10), 5.0);
  EXPECT_EQ(d.lower_bound(0, 20), 5.0);
  EXPECT_EQ(d.lower_bound(0, 50), 0.0);
  const KthImpactTable round = KthImpactTable::from_rows(c.rows());
  for (TermId t = 0; t < 3; ++t)
    for (std::size_t k : {1u, 2u, 5u, 10u}) EXPECT_EQ(round.lower_bound(t, k), c.lower_bound(t, k));
  const KthImpactTable other({0, 1}, {1.0f});
  const KthImpactTable* mixed[] = {&a, &other};
  EXPECT_THROW(KthImpactTable::combine(mixed), Error);
  EXPECT_THROW(KthImpactTable({0, 2}, {1.0f}), Error);
}

