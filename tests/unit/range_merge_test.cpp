// The CPU twin of the multi-GPU ISN (--gpus-per-isn G): per-range top-k rows merged by the
// lead GPU's merge (gpu/topk_rows.hpp). The merge, and its kernel's form (each hit placed by its
// merged rank), equal a sort of the union on random and adversarial rows (ties, empty and short
// rows), and the shard split into G = 1..8 docID ranges answers every mode as the reference does.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "gpu/topk_rows.hpp"
#include "isn/range_split_engine.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpu::RangeHit;
using gpu::RowMeta;
using gpusearch::testing::TempDir;

TEST(RangeMerge, EqualsASortOfTheUnionOnRandomAndTiedRows) {
  std::mt19937 rng(9);
  for (unsigned ranges = 1; ranges <= gpu::kMaxRangesPerIsn; ++ranges) {
    for (unsigned k : {1u, 3u, 10u, 64u}) {
      const unsigned queries = 20;
      const auto first = gpu::split_doc_ranges(1000, ranges);
      std::vector<std::vector<char>> rows(ranges,
                                          std::vector<char>(gpu::range_rows_bytes(queries, k)));
      std::vector<std::vector<std::pair<double, std::uint32_t>>> expected(queries);
      std::vector<std::uint64_t> expected_and(queries);
      for (unsigned r = 0; r < ranges; ++r) {
        auto* hits = reinterpret_cast<RangeHit*>(rows[r].data());
        auto* meta = reinterpret_cast<RowMeta*>(rows[r].data() +
                                                std::uint64_t(queries) * k * sizeof(RangeHit));
        for (unsigned q = 0; q < queries; ++q) {
          // Scores from a small set: many ties, across and within ranges. Some rows are empty
          // or shorter than k.
          const unsigned span = first[r + 1] - first[r];
          const unsigned n = std::min<unsigned>({unsigned(rng() % (k + 2)), k, span});
          std::vector<std::pair<double, std::uint32_t>> row;
          std::vector<std::uint32_t> docs(span);
          std::iota(docs.begin(), docs.end(), 0u);
          std::shuffle(docs.begin(), docs.end(), rng);
          for (unsigned i = 0; i < n; ++i) row.push_back({double(rng() % 4) * 0.5, docs[i]});
          std::sort(row.begin(), row.end(), [](auto& a, auto& b) {
            return gpu::range_hit_before(a.first, a.second, b.first, b.second);
          });
          for (unsigned i = 0; i < n; ++i) {
            hits[q * k + i] = RangeHit{row[i].first, row[i].second, 0};
            expected[q].push_back({row[i].first, row[i].second + first[r]});
          }
          meta[q] = RowMeta{n, 0, std::uint64_t(rng() % 7)};
          expected_and[q] += meta[q].and_matches;
        }
      }
      std::vector<const char*> ptrs;
      for (auto& r : rows) ptrs.push_back(r.data());
      for (unsigned q = 0; q < queries; ++q) {
        auto& e = expected[q];
        std::sort(e.begin(), e.end(), [](auto& a, auto& b) {
          return gpu::range_hit_before(a.first, a.second, b.first, b.second);
        });
        if (e.size() > k) e.resize(k);
        std::vector<RangeHit> out(k);
        RowMeta meta{};
        gpu::merge_range_rows(ptrs.data(), first.data(), ranges, queries, k, q, out.data(), &meta);
        ASSERT_EQ(meta.count, e.size()) << ranges << " ranges, k " << k;
        EXPECT_EQ(meta.and_matches, expected_and[q]);
        for (unsigned i = 0; i < meta.count; ++i) {
          EXPECT_EQ(out[i].score, e[i].first);
          EXPECT_EQ(out[i].doc, e[i].second);
        }
        // The merge kernel's form: every hit placed by its merged rank, the ranks distinct.
        std::vector<RangeHit> placed(k, RangeHit{-1.0, ~0u, 0});
        unsigned total = 0;
        for (unsigned r = 0; r < ranges; ++r) {
          const unsigned count = gpu::range_row_count(ptrs[r], queries, k, q);
          total += count;
          for (unsigned i = 0; i < count; ++i) {
            const unsigned rank =
                gpu::range_hit_merged_rank(ptrs.data(), first.data(), ranges, queries, k, q, r, i);
            if (rank >= k) continue;
            ASSERT_EQ(placed[rank].doc, ~0u) << "rank " << rank << " given twice";
            const RangeHit& h = reinterpret_cast<const RangeHit*>(ptrs[r])[q * k + i];
            placed[rank] = RangeHit{h.score, h.doc + first[r], 0};
          }
        }
        ASSERT_EQ(std::min(total, k), meta.count);
        for (unsigned i = 0; i < meta.count; ++i) {
          EXPECT_EQ(placed[i].score, out[i].score)
              << ranges << " ranges, k " << k << ", rank " << i;
          EXPECT_EQ(placed[i].doc, out[i].doc) << ranges << " ranges, k " << k << ", rank " << i;
        }
      }
    }
  }
}

TEST(RangeMerge, SplitRangesCoverTheShardOnce) {
  for (unsigned g = 1; g <= 8; ++g) {
    const auto f = gpu::split_doc_ranges(1001, g);
    ASSERT_EQ(f.size(), g + 1);
    EXPECT_EQ(f.front(), 0u);
    EXPECT_EQ(f.back(), 1001u);
    for (unsigned r = 0; r < g; ++r) EXPECT_LE(f[r], f[r + 1]);
  }
}

TEST(RangeMerge, ShardSplitIntoOneToEightRangesAnswersAsTheReference) {
  TempDir tmp;
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  build_index_synthetic(
      SyntheticParams::parse("docs=2500,seed=21,train_queries=2,test_queries=40,mean_length=120"),
      o);
  const Index index = Index::open(tmp / "idx");
  std::vector<Query> queries;
  for (const auto& qt : read_query_file(tmp / "idx" / "queries.test.tsv").queries) {
    Query q;
    QueryProblem p;
    if (resolve_query(index.shard(0), qt, {}, q, p, "test")) queries.push_back(std::move(q));
  }
  ASSERT_GT(queries.size(), 30u);
  for (unsigned g = 1; g <= 8; ++g) {
    RangeSplitEngine engine(index.shard(0), 0, g);
    for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
      for (unsigned k : {1u, 10u, 100u}) {
        const SearchParams p{mode, Scoring::kBm25, 0.3, k};
        std::vector<ShardResult> out(queries.size());
        engine.search(queries, p, out);
        for (std::size_t i = 0; i < queries.size(); ++i) {
          const auto ref = reference_answer(index, queries[i], p, k + 20);
          const ShardResult* one[] = {&out[i]};
          const QueryResult got = merge_shard_results(p, one);
          const auto diff = compare_top_k(ref.hits, ref.total_matches, k, got.hits);
          ASSERT_FALSE(diff) << g << " ranges, " << to_string(mode) << " k=" << k << ", query "
                             << queries[i].id << ": " << *diff;
          EXPECT_EQ(got.answered_by_or, ref.answered_by_or)
              << g << " ranges, query " << queries[i].id;
        }
      }
    }
  }
  EXPECT_THROW(RangeSplitEngine(index.shard(0), 0, 9), InputError);
  EXPECT_THROW(RangeSplitEngine(index.shard(0), 0, 0), InputError);
}
