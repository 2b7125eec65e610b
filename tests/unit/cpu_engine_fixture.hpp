// The CPU engine tests' shared fixture (tests/unit/cpu_engine_test.cpp,
// cpu_engine_bounds_test.cpp, cpu_engine_interface_test.cpp): synthetic indexes of one and
// several shards and a GS-tiered one, and the checks of every algorithm, mode, scoring, k and
// thread count against the reference engine (compare_top_k).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "partition/index_builder.hpp"
#include "test_support.hpp"

namespace gpusearch::cpu_engine_testing {

using namespace gpusearch;
using gpusearch::testing::TempDir;

inline constexpr Mode kModes[] = {Mode::kAnd, Mode::kOr, Mode::kAndOr};
inline constexpr Scoring kScorings[] = {Scoring::kBm25, Scoring::kBm25Pr};
inline constexpr cpu::Algorithm kAlgorithms[] = {cpu::Algorithm::kExhaustive, cpu::Algorithm::kWand,
                                                 cpu::Algorithm::kBmw, cpu::Algorithm::kMaxScore,
                                                 cpu::Algorithm::kMaxScoreDaat};

inline std::string describe(const Query& q, const SearchParams& p, cpu::Algorithm a,
                            unsigned threads) {
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
inline QueryResult merged(const SearchParams& p, const std::vector<ShardResult>& shards) {
  std::vector<const ShardResult*> ptrs;
  for (const auto& s : shards) ptrs.push_back(&s);
  return merge_shard_results(p, ptrs);
}

// The and-or contract per shard: and_matches exact whenever below k, or_hits present exactly
// when and_matches < k.
inline void expect_and_or_contract(const ReferenceShardAnswer& ref, const ShardResult& got,
                                   unsigned k, const std::string& what) {
  if (ref.and_matches < k)
    EXPECT_EQ(got.and_matches, ref.and_matches) << what;
  else
    EXPECT_GE(got.and_matches, k) << what;
  EXPECT_EQ(got.or_hits.empty(), got.and_matches >= k || ref.or_matches == 0) << what;
}

// Checks every setting for `queries` on `index`; returns the number of checks.
inline std::size_t check_index(const Index& index, const std::vector<Query>& queries,
                               const std::vector<unsigned>& ks,
                               const std::vector<unsigned>& threads,
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
inline std::size_t check_resume(const Index& index, const std::vector<Query>& queries,
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

inline std::vector<Query> resolve_all(const ShardIndex& vocabulary,
                                      const std::filesystem::path& file, std::size_t limit) {
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
  static inline TempDir* dir_ = nullptr;
};

}  // namespace gpusearch::cpu_engine_testing
