// The CPU engine's bounds can fail a test: weakened list and block maxima and an inflated
// starting threshold give wrong answers (and the true ones none); the threshold seed at every
// block budget, with and without the K-th impact table; search_range over a docID range alone.
#include <gtest/gtest.h>

#include "cpu_engine_fixture.hpp"

using namespace gpusearch;
using namespace gpusearch::cpu_engine_testing;

namespace {

// Wrong answers (against the reference) of `a` with every term bound scaled by `scale`.
std::size_t count_wrong(const Index& index, const std::vector<Query>& queries,
                        const cpu::CpuEngineOptions& o) {
  std::size_t wrong = 0;
  for (Scoring scoring : kScorings) {
    for (Mode mode : {Mode::kOr, Mode::kAnd}) {
      for (unsigned k : {1u, 10u, 100u}) {
        const SearchParams p{mode, scoring, 0.3, k};
        for (const Query& q : queries) {
          std::vector<ShardResult> shard_results;
          for (std::size_t s = 0; s < index.num_open_shards(); ++s)
            shard_results.push_back(
                cpu::CpuEngine(index.shard(s), index.shard_id(s), o).search_one(q, p));
          const auto ref = reference_answer(index, q, p, k + 20);
          wrong += compare_top_k(ref.hits, ref.total_matches, k, merged(p, shard_results).hits)
                       .has_value();
        }
      }
    }
  }
  return wrong;
}
std::size_t count_wrong(const Index& index, const std::vector<Query>& queries, cpu::Algorithm a,
                        double scale) {
  cpu::CpuEngineOptions o;
  o.algorithm = a;
  o.bound_scale = scale;
  o.daat_docs_per_posting = 0;  // kMaxScore: the windowed algorithm for every query
  return count_wrong(index, queries, o);
}

// The tests above can fail: every pruning algorithm with its list and block maxima weakened by
// 3% gives wrong answers on these queries (and with the true bounds, none).
TEST_F(CpuEngineTest, WeakenedBoundsAreCaught) {
  const Index index = open("one");
  const auto qs = queries(index, 40);
  for (cpu::Algorithm a : {cpu::Algorithm::kWand, cpu::Algorithm::kBmw, cpu::Algorithm::kMaxScore,
                           cpu::Algorithm::kMaxScoreDaat}) {
    EXPECT_EQ(count_wrong(index, qs, a, 1.0), 0u) << cpu::to_string(a);
    EXPECT_GT(count_wrong(index, qs, a, 0.97), 0u) << cpu::to_string(a) << " bounds x 0.97";
  }
  // One-term queries take maxscore's single-list path (single_list_top_k), with the starting
  // threshold and without it: exact with the true bounds, caught with weakened ones.
  std::vector<Query> singles;
  for (const Query& q : qs) {
    Query single;
    single.id = q.id;
    single.terms = {q.terms.front()};
    singles.push_back(std::move(single));
  }
  for (unsigned seed_blocks : {1u, 0u}) {
    cpu::CpuEngineOptions o;
    o.algorithm = cpu::Algorithm::kMaxScore;
    o.seed_blocks_per_term = seed_blocks;
    EXPECT_EQ(count_wrong(index, singles, o), 0u) << "one term, seed blocks " << seed_blocks;
    o.bound_scale = 0.97;
    EXPECT_GT(count_wrong(index, singles, o), 0u)
        << "one term, seed blocks " << seed_blocks << ", bounds x 0.97";
  }
}

// The starting threshold (threshold_seed.hpp): every pruning algorithm without it and with a
// larger block budget equals the reference (the tests above run the default budget), and a seed
// raised by 0.1% above the k-th score its blocks give makes wrong answers (single-term queries
// whose best blocks hold their top k, so the seed is their k-th score itself).
TEST_F(CpuEngineTest, ThresholdSeedIsALowerBoundAndAnInflatedOneIsCaught) {
  const Index index = open("one");
  const auto qs = queries(index, 25);
  std::vector<Query> singles;
  for (const Query& q : qs) {
    Query single;
    single.id = q.id;
    single.terms = {q.terms.front()};
    singles.push_back(std::move(single));
  }
  for (cpu::Algorithm a : {cpu::Algorithm::kWand, cpu::Algorithm::kBmw, cpu::Algorithm::kMaxScore,
                           cpu::Algorithm::kMaxScoreDaat}) {
    // Seeds from decoded blocks only, and from the K-th impact table (lists of two blocks or
    // more) with the blocks of the short lists; k on the table's ladder (1, 10, 100, 1000), off
    // it (7: the next step's bound, 20) and past it (1500: blocks only).
    for (bool table : {false, true}) {
      cpu::CpuEngineOptions o;
      o.algorithm = a;
      o.seed_from_kth_impacts = table;
      for (unsigned blocks : {0u, 4u}) {
        o.seed_blocks_per_term = blocks;
        EXPECT_GT(check_index(index, qs, {1, 7, 10, 100, 1000, 1500}, {1}, {a}, 0.3, o), 500u)
            << cpu::to_string(a) << " seed blocks " << blocks << " table " << table;
      }
      o.seed_blocks_per_term = 1;
      EXPECT_EQ(count_wrong(index, singles, o), 0u) << cpu::to_string(a) << " table " << table;
      o.seed_scale = 1.001;
      EXPECT_GT(count_wrong(index, singles, o), 0u)
          << cpu::to_string(a) << " seed x 1.001, table " << table;
    }
  }
}

// search_range answers for its docID range alone (a GPU of several checks its range's top-k
// against it): every pruning algorithm, with its seeds, gives the exhaustive algorithm's answer
// over the range, documents and scores. A seed of the whole shard (the K-th impact table) would
// prune documents of a range's own top-k below the shard's k-th score: the table only seeds
// whole-shard runs, and this test fails where a range takes it.
TEST_F(CpuEngineTest, SearchRangeAnswersForItsRangeAlone) {
  const Index index = open("one");
  const auto qs = queries(index, 40);
  const DocId n = index.shard(0).num_docs();
  const cpu::CpuEngine exhaustive(index.shard(0), 0, {.algorithm = cpu::Algorithm::kExhaustive});
  std::size_t hits = 0;
  for (cpu::Algorithm a : {cpu::Algorithm::kWand, cpu::Algorithm::kBmw, cpu::Algorithm::kMaxScore,
                           cpu::Algorithm::kMaxScoreDaat}) {
    const cpu::CpuEngine engine(index.shard(0), 0, {.algorithm = a});
    for (auto [begin, end] :
         {std::pair{DocId(0), n / 3}, std::pair{n / 2, n}, std::pair{n - n / 8, n}}) {
      for (unsigned k : {1u, 10u, 100u}) {
        const SearchParams p{Mode::kOr, Scoring::kBm25Pr, 0.3, k};
        for (const Query& q : qs) {
          const ShardResult want = exhaustive.search_range(q, p, begin, end);
          const ShardResult got = engine.search_range(q, p, begin, end);
          ASSERT_EQ(got.hits.size(), want.hits.size())
              << cpu::to_string(a) << " query " << q.id << " range [" << begin << ", " << end
              << ") k=" << k;
          for (std::size_t i = 0; i < want.hits.size(); ++i) {
            ASSERT_EQ(got.hits[i].doc, want.hits[i].doc) << cpu::to_string(a) << " query " << q.id;
            ASSERT_EQ(got.hits[i].score, want.hits[i].score) << cpu::to_string(a);
          }
          hits += want.hits.size();
        }
      }
    }
  }
  EXPECT_GT(hits, 10000u);
}

}  // namespace
