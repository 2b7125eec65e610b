// Real collections from ../shared/data (read by path, never copied): index them, write run
// files through the command line and check they are well formed, and check the reference
// engine against the independent brute-force scorer on real text and real queries.
#include <gtest/gtest.h>

#include <unordered_map>

#include "brute_force.hpp"
#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "common/run_file.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using namespace gpusearch::testing;

namespace {

std::filesystem::path debian_corpus() {
  return std::filesystem::path(GPUSEARCH_BINARY_DIR) / "data" / "debian-descriptions.jsonl";
}

void check_collection(const std::filesystem::path& corpus, const std::vector<std::filesystem::path>& query_files,
                      const std::vector<unsigned>& ks, std::size_t max_queries) {
  TempDir tmp;
  auto r = run_gpusearch("index --corpus " + corpus.string() + " --shards 2 --out " + (tmp / "idx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Index index = Index::open(tmp / "idx");
  const BruteForceCollection brute(corpus.string());
  ASSERT_EQ(brute.size(), index.params().collection.num_docs);

  std::unordered_map<std::string, RankedDoc> by_id;
  for (std::size_t s = 0; s < index.num_open_shards(); ++s)
    for (DocId d = 0; d < index.shard(s).num_docs(); ++d)
      by_id[std::string(index.shard(s).external_id(d))] = {0, index.shard(s).global_ranks()[d], std::uint32_t(s), d};

  std::size_t checks = 0;
  for (const auto& qf : query_files) {
    for (const char* mode : {"and", "or", "and-or"}) {
      r = run_gpusearch("search --index " + (tmp / "idx").string() + " --queries " + qf.string() +
                        " --mode " + mode + " --k 100 --run " + (tmp / "run").string());
      ASSERT_EQ(r.exit_code, 0) << r.output;
      const auto runs = read_run_file(tmp / "run");  // throws on a malformed line
      EXPECT_FALSE(runs.empty());
      for (const auto& [qid, entries] : runs) {
        EXPECT_LE(entries.size(), 100u);
        for (const auto& e : entries) EXPECT_TRUE(by_id.count(e.docid)) << e.docid;
      }
    }
    const QueryFile file = read_query_file(qf);
    std::size_t n = 0;
    for (const QueryText& qt : file.queries) {
      if (++n > max_queries) break;
      Query q;
      QueryProblem problem;
      if (!resolve_query(index.shard(0), qt, QueryLimits{}, q, problem, qf.string())) continue;
      const auto answers = brute.search(qt.text, 0.3);
      for (Scoring scoring : {Scoring::kBm25, Scoring::kBm25Pr}) {
        const bool pr = scoring == Scoring::kBm25Pr;
        const auto& brute_and = answers.get(true, pr);
        const auto& brute_or = answers.get(false, pr);
        const auto deep_and = to_ranked(brute_and, by_id), deep_or = to_ranked(brute_or, by_id);
        for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
          for (unsigned k : ks) {
            const bool use_or = mode == Mode::kOr || (mode == Mode::kAndOr && brute_and.size() < k);
            const auto& expected = use_or ? brute_or : brute_and;
            const auto& deep = use_or ? deep_or : deep_and;
            const auto got = reference_answer(index, q, {mode, scoring, 0.3, k}, k);
            const auto diff = compare_top_k(deep, expected.size(), k, got.hits);
            ASSERT_FALSE(diff) << corpus << " query " << qt.id << " '" << qt.text << "' "
                               << to_string(mode) << " " << to_string(scoring) << " k=" << k
                               << ": " << *diff;
            ++checks;
          }
        }
      }
    }
  }
  EXPECT_GT(checks, 100u);
}

TEST(RealData, CranfieldWithItsQueriesAndMsMarcoQueries) {
  const auto dir = shared_data("cranfield");
  if (!std::filesystem::exists(dir / "corpus.jsonl"))
    GTEST_SKIP() << "SKIPPED: " << dir << " not found (the shared data folder is not beside the checkout)";
  check_collection(dir / "corpus.jsonl",
                   {dir / "queries.tsv", shared_data("msmarco-queries-sample/queries.tsv")},
                   {10, 100, 1000}, 1000);
}

TEST(RealData, DebianPackageDescriptions) {
  if (!std::filesystem::exists(debian_corpus()))
    GTEST_SKIP() << "SKIPPED: " << debian_corpus()
                 << " not found (launch/test.sh makes it with ../shared/data/make-debian-descriptions.sh)";
  check_collection(debian_corpus(), {shared_data("msmarco-queries-sample/queries.tsv")}, {10, 100}, 80);
}

}  // namespace
