// The CPU engine against the reference engine: every algorithm, mode, scoring, k, thread count
// and resume point gives the reference's top-k (compare_top_k), on synthetic indexes of one and
// several shards and on the real collections of the shared data folder; adversarial queries.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <unordered_map>

#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/cpu_engine/top_k.hpp"
#include "isn/engine_factory.hpp"
#include "isn/search_session.hpp"
#include "partition/index_builder.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

namespace {

constexpr Mode kModes[] = {Mode::kAnd, Mode::kOr, Mode::kAndOr};
constexpr Scoring kScorings[] = {Scoring::kBm25, Scoring::kBm25Pr};
constexpr cpu::Algorithm kAlgorithms[] = {cpu::Algorithm::kExhaustive, cpu::Algorithm::kWand,
                                          cpu::Algorithm::kBmw, cpu::Algorithm::kMaxScore,
                                          cpu::Algorithm::kMaxScoreDaat};

std::string describe(const Query& q, const SearchParams& p, cpu::Algorithm a, unsigned threads) {
  std::string terms;
  for (TermId t : q.terms) terms += std::to_string(t) + " ";
  return "query " + q.id + " [" + terms + "] " + std::string(to_string(p.mode)) + " " +
         std::string(to_string(p.scoring)) + " k=" + std::to_string(p.k) + " " +
         std::string(cpu::to_string(a)) + " threads=" + std::to_string(threads);
}

// One CPU engine per shard of an index, for one algorithm and thread count.
struct Engines {
  Engines(const Index& index, cpu::Algorithm a, unsigned threads, cpu::CpuEngineOptions o = {}) {
    o.algorithm = a;
    o.intra_query_threads = threads;
    for (std::size_t s = 0; s < index.num_open_shards(); ++s)
      engines.push_back(std::make_unique<cpu::CpuEngine>(index.shard(s), index.shard_id(s), o));
  }
  std::vector<std::unique_ptr<cpu::CpuEngine>> engines;
};

// Merges per-shard results exactly as the aggregator does.
QueryResult merged(const SearchParams& p, const std::vector<ShardResult>& shards) {
  std::vector<const ShardResult*> ptrs;
  for (const auto& s : shards) ptrs.push_back(&s);
  return merge_shard_results(p, ptrs);
}

// The and-or contract per shard: and_matches exact whenever below k, or_hits present exactly
// when and_matches < k.
void expect_and_or_contract(const ReferenceShardAnswer& ref, const ShardResult& got, unsigned k,
                            const std::string& what) {
  if (ref.and_matches < k)
    EXPECT_EQ(got.and_matches, ref.and_matches) << what;
  else
    EXPECT_GE(got.and_matches, k) << what;
  EXPECT_EQ(got.or_hits.empty(), got.and_matches >= k || ref.or_matches == 0) << what;
}

// Checks every setting for `queries` on `index`; returns the number of checks.
std::size_t check_index(const Index& index, const std::vector<Query>& queries,
                        const std::vector<unsigned>& ks, const std::vector<unsigned>& threads,
                        const std::vector<cpu::Algorithm>& algorithms, double alpha = 0.3,
                        const cpu::CpuEngineOptions& options = {}) {
  std::size_t checks = 0;
  for (unsigned t : threads) {
    for (cpu::Algorithm a : algorithms) {
      Engines e(index, a, t, options);
      for (Scoring scoring : kScorings) {
        for (Mode mode : kModes) {
          for (unsigned k : ks) {
            const SearchParams p{mode, scoring, alpha, k};
            std::vector<ShardResult> out(index.num_open_shards() * queries.size());
            for (std::size_t s = 0; s < index.num_open_shards(); ++s)
              e.engines[s]->search(queries, p,
                                   std::span(out).subspan(s * queries.size(), queries.size()));
            for (std::size_t q = 0; q < queries.size(); ++q) {
              const auto ref = reference_answer(index, queries[q], p, k + 20);
              std::vector<ShardResult> shard_results;
              for (std::size_t s = 0; s < index.num_open_shards(); ++s)
                shard_results.push_back(out[s * queries.size() + q]);
              const QueryResult got = merged(p, shard_results);
              const auto diff = compare_top_k(ref.hits, ref.total_matches, k, got.hits);
              if (diff) {
                ADD_FAILURE() << describe(queries[q], p, a, t) << ": " << *diff;
                return checks;
              }
              EXPECT_EQ(got.answered_by_or, ref.answered_by_or) << describe(queries[q], p, a, t);
              if (mode == Mode::kAndOr && k == ks.front()) {
                for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
                  const auto r =
                      reference_search_shard(index.shard(s), index.shard_id(s), queries[q], p, k);
                  expect_and_or_contract(r, shard_results[s], k, describe(queries[q], p, a, t));
                }
              }
              ++checks;
            }
          }
        }
      }
    }
  }
  return checks;
}

// Resumes every query from docID `frac` of each shard with the reference's running top-k over
// the documents before it, and checks the completed answer.
std::size_t check_resume(const Index& index, const std::vector<Query>& queries,
                         const std::vector<unsigned>& ks, double frac, unsigned threads) {
  std::size_t checks = 0;
  for (cpu::Algorithm a : kAlgorithms) {
    Engines e(index, a, threads);
    for (Scoring scoring : kScorings) {
      for (Mode mode : kModes) {
        for (unsigned k : ks) {
          const SearchParams p{mode, scoring, 0.3, k};
          for (const Query& q : queries) {
            std::vector<ShardResult> shard_results;
            for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
              const ShardIndex& shard = index.shard(s);
              const DocId from = DocId(frac * shard.num_docs());
              const auto all =
                  reference_search_shard(shard, index.shard_id(s), q, p, shard.num_docs());
              auto before = [&](const std::vector<RankedDoc>& v) {
                std::vector<RankedDoc> r;
                for (const RankedDoc& d : v)
                  if (d.doc < from && r.size() < k) r.push_back(d);
                return r;
              };
              ShardResult running;
              switch (mode) {
                case Mode::kAnd:
                  running.hits = before(all.and_hits);
                  break;
                case Mode::kOr:
                  running.hits = before(all.or_hits);
                  break;
                case Mode::kAndOr:
                  running.hits = before(all.and_hits);
                  running.or_hits = before(all.or_hits);
                  for (const RankedDoc& d : all.and_hits) running.and_matches += d.doc < from;
                  break;
              }
              shard_results.push_back(e.engines[s]->resume(q, p, from, running));
              if (mode != Mode::kAndOr) {
                const ShardResult via_span =
                    e.engines[s]->resume(q, p, from, std::span<const RankedDoc>(running.hits));
                EXPECT_EQ(via_span.hits.size(), shard_results.back().hits.size());
              }
            }
            const auto ref = reference_answer(index, q, p, k + 20);
            const auto diff =
                compare_top_k(ref.hits, ref.total_matches, k, merged(p, shard_results).hits);
            if (diff) {
              ADD_FAILURE() << "resumed at " << frac << " " << describe(q, p, a, threads) << ": "
                            << *diff;
              return checks;
            }
            ++checks;
          }
        }
      }
    }
  }
  return checks;
}

std::vector<Query> resolve_all(const ShardIndex& vocabulary, const std::filesystem::path& file,
                               std::size_t limit) {
  const QueryFile qf = read_query_file(file);
  std::vector<Query> out;
  for (const QueryText& qt : qf.queries) {
    if (out.size() >= limit) break;
    Query q;
    QueryProblem problem;
    if (resolve_query(vocabulary, qt, QueryLimits{}, q, problem, file.string()) && !q.terms.empty())
      out.push_back(std::move(q));
  }
  return out;
}

class CpuEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const auto spec = SyntheticParams::parse(
        "docs=12000,seed=11,mean_length=120,train_queries=5,test_queries=200");
    BuildOptions o;
    o.progress = false;
    o.out_dir = *dir_ / "one";
    build_index_synthetic(spec, o);
    o.out_dir = *dir_ / "three";
    o.num_shards = 3;
    build_index_synthetic(spec, o);
    // GS built with alpha = 0 (bm25 terminates early, bm25-pr may not), GS tiers, bp128.
    o.out_dir = *dir_ / "tiers";
    o.num_shards = 2;
    o.split = SplitMode::kGsTiers;
    o.gs_alpha = 0.0;
    o.codec = codec::Codec::kBitPacking;
    build_index_synthetic(spec, o);
  }
  static void TearDownTestSuite() { delete dir_; }
  static Index open(const std::string& name) { return Index::open(*dir_ / name); }
  static std::vector<Query> queries(const Index& index, std::size_t limit) {
    return resolve_all(index.shard(0), *dir_ / "one" / "queries.test.tsv", limit);
  }
  static TempDir* dir_;
};
TempDir* CpuEngineTest::dir_ = nullptr;

TEST_F(CpuEngineTest, EveryAlgorithmEqualsTheReferenceOnOneShard) {
  const Index index = open("one");
  EXPECT_GT(check_index(index, queries(index, 40), {1, 10, 100, 1000}, {1},
                        {std::begin(kAlgorithms), std::end(kAlgorithms)}),
            3000u);
}

TEST_F(CpuEngineTest, EveryAlgorithmEqualsTheReferenceOnThreeShards) {
  const Index index = open("three");
  EXPECT_GT(check_index(index, queries(index, 30), {1, 10, 100, 1000}, {1},
                        {std::begin(kAlgorithms), std::end(kAlgorithms)}),
            2000u);
}

TEST_F(CpuEngineTest, EveryAlgorithmEqualsTheReferenceOnGsTiersWithAlphaZero) {
  const Index index = open("tiers");
  EXPECT_GT(check_index(index, queries(index, 30), {1, 10, 100, 1000}, {1},
                        {std::begin(kAlgorithms), std::end(kAlgorithms)}),
            2000u);
}

// bm25-pr with a query-time alpha other than the index's: GS bounds must adapt (or switch off,
// for an index built with alpha 0), and alpha = 1 leaves only the static part.
TEST_F(CpuEngineTest, QueryAlphaOtherThanTheIndexAlpha) {
  for (const char* name : {"one", "tiers"}) {
    const Index index = open(name);
    for (double alpha : {0.0, 0.05, 0.7, 1.0})
      EXPECT_GT(check_index(index, queries(index, 15), {1, 10, 100}, {1, 3},
                            {std::begin(kAlgorithms), std::end(kAlgorithms)}, alpha),
                500u)
          << name << " alpha " << alpha;
  }
}

TEST_F(CpuEngineTest, IntraQueryParallelismKeepsTheAnswer) {
  for (const char* name : {"one", "three"}) {
    const Index index = open(name);
    EXPECT_GT(check_index(index, queries(index, 25), {1, 10, 100, 1000}, {3, 8},
                          {std::begin(kAlgorithms), std::end(kAlgorithms)}),
              1000u);
  }
}

TEST_F(CpuEngineTest, ResumeFromADocIdWithARunningTopK) {
  for (const char* name : {"one", "three"}) {
    const Index index = open(name);
    const auto qs = queries(index, 12);
    for (double frac : {0.0, 0.003, 0.4, 0.999, 1.0})
      EXPECT_GT(check_resume(index, qs, {1, 10, 1000}, frac, 1), 100u);
    EXPECT_GT(check_resume(index, qs, {10, 100}, 0.25, 4), 100u);
  }
}

TEST_F(CpuEngineTest, AdversarialQueries) {
  for (const char* name : {"one", "three", "tiers"}) {
    const Index index = open(name);
    const ShardIndex& s0 = index.shard(0);
    std::vector<Query> qs;
    auto add = [&](std::vector<TermId> terms) {
      Query q;
      q.id = "adv" + std::to_string(qs.size());
      q.terms = std::move(terms);
      qs.push_back(std::move(q));
    };
    // Terms by global df: one-posting lists, lists of one block, long lists, and terms absent
    // from some shard.
    TermId one_posting = kNoDoc, short_list = kNoDoc, long_list = 0, absent_somewhere = kNoDoc;
    for (TermId t = 0; t < s0.num_terms(); ++t) {
      const TermInfo& ti = s0.term(t);
      if (ti.df_global == 1 && one_posting == kNoDoc) one_posting = t;
      if (ti.df_global > 20 && ti.df_global < 100 && short_list == kNoDoc) short_list = t;
      if (ti.df_global > s0.term(long_list).df_global) long_list = t;
      if (ti.df_shard == 0 && ti.df_global > 0 && absent_somewhere == kNoDoc) absent_somewhere = t;
    }
    ASSERT_NE(one_posting, kNoDoc);
    ASSERT_NE(short_list, kNoDoc);
    add({one_posting});             // single term, one posting
    add({short_list});              // single term
    add({long_list});               // single term, every block
    add({one_posting, long_list});  // AND with a one-posting list
    add({short_list, long_list, one_posting});
    add({long_list, long_list});  // duplicate terms (not de-duplicated here)
    add({short_list, long_list, short_list});
    if (absent_somewhere != kNoDoc) {
      add({absent_somewhere});  // absent from shard 0
      add({absent_somewhere, long_list});
    }
    add({});  // no known term
    EXPECT_GT(check_index(index, qs, {1, 10, 100, 1000, 100000}, {1, 4},
                          {std::begin(kAlgorithms), std::end(kAlgorithms)}),
              500u);
  }
}

// The windowed MaxScore at window sizes that put many window edges inside the lists (64), one
// that is not a power of two (700), and one larger than the shards (one window per query).
TEST_F(CpuEngineTest, WindowedMaxScoreAtEveryWindowSize) {
  for (unsigned window : {64u, 700u, 1u << 16}) {
    cpu::CpuEngineOptions o;
    o.window_docs = window;
    o.daat_docs_per_posting = 0;  // the windowed algorithm for every query
    for (const char* name : {"one", "three", "tiers"}) {
      const Index index = open(name);
      EXPECT_GT(check_index(index, queries(index, 25), {1, 10, 100, 1000}, {1, 3},
                            {cpu::Algorithm::kMaxScore}, 0.3, o),
                500u)
          << name << " window " << window;
    }
  }
}

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
  for (const Query& q : qs) singles.push_back(Query{q.id, {q.terms.front()}});
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
  for (const Query& q : qs) singles.push_back(Query{q.id, {q.terms.front()}});
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

TEST_F(CpuEngineTest, CountersAreHonest) {
  const Index index = open("one");
  const auto qs = queries(index, 40);
  const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
  // Without the threshold seed first: its blocks are decoded apart from the cursors (below).
  QueryCounters exhaustive, bmw, maxscore, maxscore_daat, seeded;
  cpu::CpuEngineOptions o;
  o.seed_blocks_per_term = 0;
  for (auto [a, c] :
       {std::pair{cpu::Algorithm::kExhaustive, &exhaustive}, std::pair{cpu::Algorithm::kBmw, &bmw},
        std::pair{cpu::Algorithm::kMaxScore, &maxscore},
        std::pair{cpu::Algorithm::kMaxScoreDaat, &maxscore_daat}}) {
    o.algorithm = a;
    cpu::CpuEngine e(index.shard(0), 0, o);
    for (const Query& q : qs) c->add(e.search_one(q, p).counters);
  }
  std::uint64_t postings = 0, blocks = 0, terms = 0;
  for (const Query& q : qs)
    for (TermId t : q.terms)
      postings += index.shard(0).term(t).df_shard, blocks += index.shard(0).term(t).num_blocks,
          ++terms;
  // With the seed (one block per list at k = 10): its postings count as decoded, its blocks
  // neither as decoded nor skipped (the cursors account for each block once).
  o.algorithm = cpu::Algorithm::kMaxScore;
  o.seed_blocks_per_term = 1;
  const cpu::CpuEngine with_seed(index.shard(0), 0, o);
  for (const Query& q : qs) seeded.add(with_seed.search_one(q, p).counters);
  EXPECT_EQ(seeded.blocks_decoded + seeded.blocks_skipped, blocks);
  EXPECT_LE(seeded.postings_decoded, exhaustive.postings_decoded + terms * kBlockSize);
  // Exhaustive OR decodes every block once and skips none.
  EXPECT_EQ(exhaustive.postings_decoded, postings);
  EXPECT_EQ(exhaustive.blocks_decoded, blocks);
  EXPECT_EQ(exhaustive.blocks_skipped, 0u);
  EXPECT_EQ(exhaustive.early_terminations, 0u);
  // Pruning algorithms account for every block either way, and score fewer documents.
  for (const QueryCounters* c : {&bmw, &maxscore, &maxscore_daat}) {
    EXPECT_EQ(c->blocks_decoded + c->blocks_skipped, blocks);
    EXPECT_LT(c->docs_scored, exhaustive.docs_scored);
    EXPECT_LE(c->postings_decoded, exhaustive.postings_decoded);
  }
}

// Through the in-process search session (what `gpusearch search --engine cpu` runs), the CPU
// engine writes the reference's run file byte for byte: same documents, order and scores.
TEST_F(CpuEngineTest, SearchSessionWritesTheReferenceRunFile) {
  auto run = [&](const std::string& engine, const std::string& algorithm, unsigned threads,
                 Mode mode, Scoring scoring) {
    SearchSessionOptions so;
    so.index_dir = *dir_ / "three";
    so.queries_path = *dir_ / "one" / "queries.test.tsv";
    so.params.mode = mode;
    so.params.scoring = scoring;
    so.params.k = 50;
    so.engine = {engine, algorithm, threads, -1};
    so.progress = false;
    so.batch_size = 64;
    std::ostringstream out;
    run_search_session(so, out);
    return out.str();
  };
  for (Mode mode : kModes) {
    for (Scoring scoring : kScorings) {
      const std::string ref = run("reference", "", 1, mode, scoring);
      ASSERT_FALSE(ref.empty());
      for (const char* a : {"exhaustive", "wand", "bmw", "maxscore", "maxscore-daat"})
        EXPECT_EQ(run("cpu", a, 2, mode, scoring), ref)
            << a << " " << to_string(mode) << " " << to_string(scoring);
    }
  }
}

TEST_F(CpuEngineTest, EarlyTerminationIsCountedAndResumeNeedsTheAndOrState) {
  const Index index = open("one");
  const auto qs = queries(index, 40);
  cpu::CpuEngine e(index.shard(0), 0, {cpu::Algorithm::kMaxScore, 1, true});
  QueryCounters c;
  for (const Query& q : qs) c.add(e.search_one(q, {Mode::kOr, Scoring::kBm25Pr, 0.3, 1}).counters);
  EXPECT_GT(c.early_terminations, 0u);
  EXPECT_LE(c.early_terminations, qs.size());
  const std::vector<RankedDoc> running;
  EXPECT_THROW(e.resume(qs[0], {Mode::kAndOr, Scoring::kBm25, 0.3, 10}, 5,
                        std::span<const RankedDoc>(running)),
               InputError);
  // Resuming past the end returns the running answer untouched.
  const ShardResult full = e.search_one(qs[0], {Mode::kOr, Scoring::kBm25, 0.3, 10});
  const ShardResult same =
      e.resume(qs[0], {Mode::kOr, Scoring::kBm25, 0.3, 10}, index.shard(0).num_docs(),
               std::span<const RankedDoc>(full.hits));
  ASSERT_EQ(same.hits.size(), full.hits.size());
  for (std::size_t i = 0; i < full.hits.size(); ++i) EXPECT_EQ(same.hits[i].doc, full.hits[i].doc);
  EXPECT_EQ(same.counters.postings_decoded, 0u);
}

TEST(CpuEngine, FactoryMakesTheCpuEngineAndRejectsUnknownAlgorithms) {
  TempDir tmp;
  BuildOptions o;
  o.progress = false;
  o.out_dir = tmp / "idx";
  build_index_synthetic(SyntheticParams::parse("docs=300,seed=2,train_queries=1,test_queries=5"),
                        o);
  const Index index = Index::open(tmp / "idx");
  for (const char* a : {"", "exhaustive", "wand", "bmw", "maxscore", "maxscore-daat"}) {
    auto e = make_engine({"cpu", a, 2, -1}, index.shard(0), 0);
    EXPECT_EQ(e->name(), "cpu");
  }
  EXPECT_THROW(make_engine({"cpu", "nope", 1, -1}, index.shard(0), 0), InputError);
}

// Real collections (skipped loudly when absent): Cranfield with its own and MS MARCO queries,
// Debian package descriptions with MS MARCO queries.
void check_real(const std::filesystem::path& corpus,
                const std::vector<std::filesystem::path>& query_files, std::size_t per_file) {
  TempDir tmp;
  auto r = gpusearch::testing::run_gpusearch("index --corpus " + corpus.string() +
                                             " --shards 2 --out " + (tmp / "idx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Index index = Index::open(tmp / "idx");
  std::vector<Query> qs;
  for (const auto& f : query_files) {
    auto v = resolve_all(index.shard(0), f, per_file);
    qs.insert(qs.end(), v.begin(), v.end());
  }
  ASSERT_FALSE(qs.empty());
  EXPECT_GT(check_index(index, qs, {1, 10, 100, 1000}, {1, 3},
                        {std::begin(kAlgorithms), std::end(kAlgorithms)}),
            1000u);
  EXPECT_GT(
      check_resume(
          index, std::vector<Query>(qs.begin(), qs.begin() + std::min<std::size_t>(qs.size(), 15)),
          {10, 1000}, 0.3, 1),
      100u);
}

TEST(CpuEngineRealData, CranfieldAndMsMarcoQueries) {
  const auto dir = gpusearch::testing::shared_data("cranfield");
  if (!std::filesystem::exists(dir / "corpus.jsonl"))
    GTEST_SKIP() << "SKIPPED: " << dir
                 << " not found (the shared data folder is not beside the checkout)";
  check_real(
      dir / "corpus.jsonl",
      {dir / "queries.tsv", gpusearch::testing::shared_data("msmarco-queries-sample/queries.tsv")},
      40);
}

TEST(CpuEngineRealData, DebianDescriptions) {
  const auto corpus =
      std::filesystem::path(GPUSEARCH_BINARY_DIR) / "data" / "debian-descriptions.jsonl";
  if (!std::filesystem::exists(corpus))
    GTEST_SKIP()
        << "SKIPPED: " << corpus
        << " not found (launch/test.sh makes it with ../shared/data/make-debian-descriptions.sh)";
  const auto queries = gpusearch::testing::shared_data("msmarco-queries-sample/queries.tsv");
  if (!std::filesystem::exists(queries))
    GTEST_SKIP() << "SKIPPED: " << queries
                 << " not found (the shared data folder is not beside the checkout)";
  check_real(corpus, {queries}, 25);
}

}  // namespace

// The top-k on its own, with many ties at the k-th score: the buffer (k >= 256) selects the
// k-th score over the scores alone and decides the ties on the rank, which it reads from the
// shard's ranks only for ties; the heap (k < 256) likewise. Both must give the k best in the
// answer order (score descending, then rank ascending) whatever the order of the pushes.
TEST(CpuTopK, TiesAtTheKthScoreAreDecidedOnTheRank) {
  std::mt19937 rng(17);
  for (const std::size_t k : {1u, 10u, 255u, 256u, 300u, 1000u}) {
    for (const int distinct : {3, 50, 100000}) {
      const DocId n = 5000;
      std::vector<GlobalRank> ranks(n);
      for (DocId d = 0; d < n; ++d) ranks[d] = d;
      std::shuffle(ranks.begin(), ranks.end(), rng);
      std::vector<double> scores(n);
      std::uniform_int_distribution<int> pick(0, distinct - 1);
      for (double& s : scores) s = 1.0 + pick(rng) * 0.25;
      cpu::TopK top(k, nullptr, false, ranks.data());
      for (DocId d = 0; d < n; ++d)
        if (!(scores[d] < top.threshold())) top.push(scores[d], d);
      const std::vector<RankedDoc> got = top.take_sorted(0);
      std::vector<RankedDoc> all;
      for (DocId d = 0; d < n; ++d) all.push_back({scores[d], ranks[d], 0, d});
      std::sort(all.begin(), all.end(), ranks_before);
      all.resize(std::min<std::size_t>(k, n));
      ASSERT_EQ(got.size(), all.size()) << "k " << k << " distinct " << distinct;
      for (std::size_t i = 0; i < all.size(); ++i) {
        EXPECT_EQ(got[i].doc, all[i].doc) << "k " << k << " distinct " << distinct << " #" << i;
        EXPECT_EQ(got[i].rank, all[i].rank);
        EXPECT_EQ(got[i].score, all[i].score);
      }
    }
  }
}
