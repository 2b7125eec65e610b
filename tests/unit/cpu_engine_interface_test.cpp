// The CPU engine's counters, the in-process search session's run file, early termination and
// resume's edge cases, the engine factory, and the top-k's ties at the k-th score.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "isn/cpu_engine/top_k.hpp"
#include "isn/engine_factory.hpp"
#include "isn/search_session.hpp"

#include "cpu_engine_fixture.hpp"

using namespace gpusearch;
using namespace gpusearch::cpu_engine_testing;
using gpusearch::testing::TempDir;

namespace {

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
  // The session writes a batch's answers while the engines search the next: the run file must
  // still list the queries in the query file's order, over several batches of 64.
  std::vector<std::string> file_order;
  {
    std::ifstream qf(*dir_ / "one" / "queries.test.tsv");
    for (std::string line; std::getline(qf, line);)
      file_order.push_back(line.substr(0, line.find('\t')));
  }
  ASSERT_GT(file_order.size(), 2u * 64u);
  auto run_order = [](const std::string& run_text) {  // each query id once, as first written
    std::vector<std::string> ids;
    std::istringstream in(run_text);
    for (std::string line; std::getline(in, line);) {
      std::string id = line.substr(0, line.find(' '));
      if (ids.empty() || ids.back() != id) ids.push_back(id);
    }
    return ids;
  };
  for (Mode mode : kModes) {
    for (Scoring scoring : kScorings) {
      const std::string ref = run("reference", "", 1, mode, scoring);
      ASSERT_FALSE(ref.empty());
      const std::vector<std::string> written = run_order(ref);
      std::vector<std::string> expected;
      std::copy_if(file_order.begin(), file_order.end(), std::back_inserter(expected),
                   [&](const std::string& id) {
                     return std::find(written.begin(), written.end(), id) != written.end();
                   });
      EXPECT_EQ(written, expected) << "run file out of the query file's order";
      EXPECT_GT(written.size(), 64u);
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
  // A multi-GPU split that does not exist is refused by name, whatever the engine.
  EngineOptions bad_split{"cpu", "", 1, -1};
  bad_split.gpu_split = "diagonal";
  try {
    make_engine(bad_split, index.shard(0), 0);
    ADD_FAILURE() << "--gpu-split diagonal was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--gpu-split"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("diagonal"), std::string::npos) << e.what();
  }
  for (const char* split : {"ranges", "queries"}) {
    EngineOptions ok{"cpu", "", 1, -1};
    ok.gpu_split = split;
    EXPECT_EQ(make_engine(ok, index.shard(0), 0)->name(), "cpu");
  }
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
