// The ISN's engine wrappers: a batch split over threads answers exactly as one call does, and a
// failing primary engine falls back to the CPU engine for that batch and every later one
// without losing a query.
#include <gtest/gtest.h>

#include <set>

#include "common/reference_engine.hpp"
#include "common/shard_index.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/fallback_engine.hpp"
#include "isn/isn_engine_stack.hpp"
#include "isn/memo_engine.hpp"
#include "isn/parallel_batch_engine.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

namespace {

struct SmallShard {
  TempDir tmp;
  Index index;
  std::vector<Query> queries;
  SmallShard() : index(make()) {
    const QueryFile f = read_query_file(tmp / "idx" / "queries.test.tsv");
    for (const auto& qt : f.queries) {
      Query q;
      QueryProblem p;
      if (resolve_query(index.shard(0), qt, {}, q, p, "test")) queries.push_back(std::move(q));
    }
  }
  Index make() {
    BuildOptions o;
    o.out_dir = tmp / "idx";
    o.progress = false;
    build_index_synthetic(
        SyntheticParams::parse("docs=1500,seed=4,train_queries=2,test_queries=60,mean_length=120"),
        o);
    return Index::open(tmp / "idx");
  }
};

void expect_same(const std::vector<ShardResult>& a, const std::vector<ShardResult>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t q = 0; q < a.size(); ++q) {
    ASSERT_EQ(a[q].hits.size(), b[q].hits.size()) << q;
    for (std::size_t i = 0; i < a[q].hits.size(); ++i) {
      EXPECT_EQ(a[q].hits[i].rank, b[q].hits[i].rank);
      EXPECT_EQ(a[q].hits[i].score, b[q].hits[i].score);
    }
    EXPECT_EQ(a[q].and_matches, b[q].and_matches);
    EXPECT_EQ(a[q].or_hits.size(), b[q].or_hits.size());
  }
}

// Counts calls, so the test can see that the batch really was split.
class CountingEngine final : public QueryEngine {
 public:
  CountingEngine(const ShardIndex& s, std::atomic<int>& calls) : inner_(s, 0), calls_(calls) {}
  std::string_view name() const override { return "counting"; }
  void search(std::span<const Query> q, const SearchParams& p,
              std::span<ShardResult> out) override {
    ++calls_;
    inner_.search(q, p, out);
  }

 private:
  ReferenceEngine inner_;
  std::atomic<int>& calls_;
};

}  // namespace

TEST(IsnEngines, ParallelBatchEqualsOneCall) {
  SmallShard s;
  ASSERT_GT(s.queries.size(), 20u);
  const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
  std::vector<ShardResult> one(s.queries.size()), split(s.queries.size());
  ReferenceEngine(s.index.shard(0), 0).search(s.queries, p, one);
  std::atomic<int> calls{0};
  ParallelBatchEngine par(std::make_unique<CountingEngine>(s.index.shard(0), calls), 4);
  par.search(s.queries, p, split);
  expect_same(one, split);
  EXPECT_GE(calls.load(), int(s.queries.size() / 4));
}

TEST(IsnEngines, FallbackAnswersEveryBatchAfterAFault) {
  SmallShard s;
  const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
  std::vector<ShardResult> expected(s.queries.size());
  ReferenceEngine(s.index.shard(0), 0).search(s.queries, p, expected);
  int fallbacks_made = 0;
  FallbackEngine engine(
      std::make_unique<FaultInjectingEngine>(std::make_unique<ReferenceEngine>(s.index.shard(0), 0),
                                             2),
      [&] {
        ++fallbacks_made;
        return std::make_unique<ReferenceEngine>(s.index.shard(0), 0);
      },
      "test");
  std::vector<ShardResult> got(s.queries.size());
  const std::size_t half = s.queries.size() / 2;
  const std::span<const Query> all(s.queries);
  for (int round = 0; round < 2; ++round) {
    engine.search(all.first(half), p, std::span(got).first(half));  // batch 1 (3): ok / fallback
    EXPECT_EQ(engine.fallback_active(), round == 1);
    engine.search(all.subspan(half), p, std::span(got).subspan(half));  // batch 2 (4): fault
    EXPECT_TRUE(engine.fallback_active());
    expect_same(expected, got);
  }
  EXPECT_EQ(fallbacks_made, 1);
  EXPECT_EQ(engine.batches_on_fallback(), 3u);
  EXPECT_NE(engine.failure().find("injected engine fault"), std::string::npos);
}

TEST(IsnEngines, ParallelLoopOnlyAroundEnginesThatRunABatchSerially) {
  SmallShard s;
  // The CPU engine spreads a batch over oneTBB itself: wrapping it would nest two loops.
  auto cpu = run_batches_in_parallel(std::make_unique<cpu::CpuEngine>(s.index.shard(0), 0));
  EXPECT_EQ(dynamic_cast<ParallelBatchEngine*>(cpu.get()), nullptr);
  EXPECT_TRUE(cpu->runs_batch_in_parallel());
  auto ref = run_batches_in_parallel(std::make_unique<ReferenceEngine>(s.index.shard(0), 0));
  EXPECT_NE(dynamic_cast<ParallelBatchEngine*>(ref.get()), nullptr);
  // The ISN's stack: CPU primary and CPU fallback, neither wrapped; still exact.
  IsnEngineStackOptions o;
  o.engine.engine = "cpu";
  o.inject_engine_fault_at_batch = 2;
  auto stack = make_isn_engine_stack(o, s.index.shard(0), 0, "test");
  EXPECT_TRUE(stack->runs_batch_in_parallel());
  const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
  std::vector<ShardResult> expected(s.queries.size()), got(s.queries.size());
  ReferenceEngine(s.index.shard(0), 0).search(s.queries, p, expected);
  for (int batch = 1; batch <= 2; ++batch) {
    stack->search(s.queries, p, got);
    for (std::size_t q = 0; q < got.size(); ++q) {
      ASSERT_EQ(got[q].hits.size(), expected[q].hits.size()) << q;
      for (std::size_t i = 0; i < got[q].hits.size(); ++i)
        EXPECT_EQ(got[q].hits[i].rank, expected[q].hits[i].rank) << q;
      // The CPU engine counts AND matches exactly only below k (it may stop early).
      if (expected[q].and_matches < p.k)
        EXPECT_EQ(got[q].and_matches, expected[q].and_matches) << q;
      else
        EXPECT_GE(got[q].and_matches, p.k) << q;
    }
    EXPECT_EQ(stack->fallback_active(), batch == 2);
  }
  EXPECT_NE(stack->failure().find("--inject-engine-fault-at-batch"), std::string::npos);
}

// --probe-memo-answers: a repeat is answered from memory with the engine's own first answer
// (the inner engine is not called for it), and a query that differs in its terms, their order,
// or a parameter is searched, so every answer stays the engine's.
TEST(IsnEngines, MemoAnswersRepeatsWithTheEnginesOwnAnswers) {
  SmallShard s;
  ASSERT_GT(s.queries.size(), 20u);
  const SearchParams andor{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
  std::atomic<int> calls{0};
  MemoEngine memo(std::make_unique<CountingEngine>(s.index.shard(0), calls));
  std::vector<ShardResult> expected(s.queries.size()), first(s.queries.size()),
      again(s.queries.size());
  ReferenceEngine(s.index.shard(0), 0).search(s.queries, andor, expected);
  memo.search(s.queries, andor, first);
  expect_same(expected, first);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(memo.searched(), s.queries.size());
  // The same queries in reverse order: all from memory, each in its own place.
  std::vector<Query> reversed(s.queries.rbegin(), s.queries.rend());
  std::vector<ShardResult> expected_reversed(expected.rbegin(), expected.rend());
  memo.search(reversed, andor, again);
  expect_same(expected_reversed, again);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(memo.answered_from_memory(), s.queries.size());
  std::set<std::string> distinct;  // the synthetic log repeats queries
  for (const Query& q : s.queries) distinct.insert(MemoEngine::key(q, andor));
  EXPECT_EQ(memo.stats()["memo"]["distinct_queries"].get<std::size_t>(), distinct.size());

  // Other parameters (k, mode) or other terms: searched again, and answered as the engine does.
  for (const SearchParams& p : {SearchParams{Mode::kAndOr, Scoring::kBm25, 0.3, 5},
                                SearchParams{Mode::kOr, Scoring::kBm25, 0.3, 10}}) {
    std::vector<ShardResult> want(s.queries.size()), got(s.queries.size());
    ReferenceEngine(s.index.shard(0), 0).search(s.queries, p, want);
    const int before = calls.load();
    memo.search(s.queries, p, got);
    expect_same(want, got);
    EXPECT_EQ(calls.load(), before + 1);
  }
  std::vector<Query> changed;
  for (const Query& q : s.queries)
    if (q.terms.size() >= 2) {
      Query c = q;
      c.terms.pop_back();  // a prefix of a known query is another query
      changed.push_back(std::move(c));
    }
  ASSERT_FALSE(changed.empty());
  std::vector<ShardResult> want(changed.size()), got(changed.size());
  ReferenceEngine(s.index.shard(0), 0).search(changed, andor, want);
  const std::uint64_t searched = memo.searched();
  memo.search(changed, andor, got);
  expect_same(want, got);
  EXPECT_GT(memo.searched(), searched);
  EXPECT_NE(MemoEngine::key(s.queries[0], andor),
            MemoEngine::key(s.queries[0], SearchParams{Mode::kAndOr, Scoring::kBm25Pr, 0.3, 10}));
}
