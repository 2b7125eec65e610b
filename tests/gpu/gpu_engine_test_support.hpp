// Shared by the GPU engine tests (gpu_engine_test.cpp, gpu_engine_call_test.cpp): the fixture
// that skips loudly without a device, the settings, the comparison with the reference engine,
// the work decompositions and the synthetic indexes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/block_codec.hpp"
#include "common/query.hpp"
#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/query_kernels.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

namespace gpusearch::gpu_test {

using gpusearch::testing::TempDir;

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu::gpu_available())
      GTEST_SKIP() << "NO CUDA DEVICE: GPU test skipped (run launch/gpu-host.sh on a GPU host)";
  }
};

struct Setting {
  Mode mode;
  Scoring scoring;
  unsigned k;
};

inline std::vector<Setting> all_settings(const std::vector<unsigned>& ks) {
  std::vector<Setting> v;
  for (Mode m : {Mode::kAnd, Mode::kOr, Mode::kAndOr})
    for (Scoring s : {Scoring::kBm25, Scoring::kBm25Pr})
      for (unsigned k : ks) v.push_back({m, s, k});
  return v;
}

struct CheckCount {
  std::size_t checks = 0, failures = 0;
};

// Runs `queries` through one GPU engine per shard and compares every merged answer with the
// reference; for and-or, each shard's AND match count must be exact below k. Counts checks and
// failures; with `expect_exact`, every failure is also a test failure with its description.
inline CheckCount compare_gpu_with_reference(const Index& index, const std::vector<Query>& queries,
                                      const std::vector<Setting>& settings,
                                      const gpu::GpuEngineOptions& options, bool expect_exact) {
  std::vector<std::unique_ptr<gpu::GpuEngine>> engines;
  for (std::size_t s = 0; s < index.num_open_shards(); ++s)
    engines.push_back(
        std::make_unique<gpu::GpuEngine>(index.shard(s), index.shard_id(s), options));
  CheckCount count;
  for (const Setting& st : settings) {
    const SearchParams params{st.mode, st.scoring, 0.3, st.k};
    std::vector<std::vector<ShardResult>> results(engines.size());
    for (std::size_t s = 0; s < engines.size(); ++s) {
      results[s].assign(queries.size(), ShardResult{});
      engines[s]->search(queries, params, results[s]);
    }
    for (std::size_t qi = 0; qi < queries.size(); ++qi) {
      const Query& q = queries[qi];
      std::vector<const ShardResult*> per_shard;
      for (std::size_t s = 0; s < engines.size(); ++s) {
        per_shard.push_back(&results[s][qi]);
        if (st.mode == Mode::kAndOr) {
          const auto ref = reference_search_shard(index.shard(s), index.shard_id(s), q, params, 1);
          const std::uint64_t got = results[s][qi].and_matches;
          const bool ok = ref.and_matches < st.k ? got == ref.and_matches : got >= st.k;
          if (!ok) ++count.failures;
          if (expect_exact) {
            EXPECT_TRUE(ok) << "query " << q.id << ": " << got << " AND matches, reference "
                            << ref.and_matches;
          }
        }
      }
      const QueryResult merged = merge_shard_results(params, per_shard);
      const std::size_t depth = 2 * std::size_t(st.k) + 20;
      const ReferenceAnswer ref = reference_answer(index, q, params, depth);
      const auto diff = compare_top_k(ref.hits, ref.total_matches, st.k, merged.hits);
      if (diff) ++count.failures;
      if (expect_exact) {
        EXPECT_FALSE(diff.has_value())
            << "query " << q.id << " (" << q.terms.size() << " terms) mode " << to_string(st.mode)
            << " " << to_string(st.scoring) << " k=" << st.k << " algorithm " << options.algorithm
            << " batch " << options.batch_size << " segments <= " << options.max_segments_per_query
            << ": " << diff.value_or("");
      }
      ++count.checks;
    }
  }
  return count;
}

inline std::size_t check_gpu_against_reference(const Index& index, const std::vector<Query>& queries,
                                        const std::vector<Setting>& settings,
                                        const gpu::GpuEngineOptions& options) {
  return compare_gpu_with_reference(index, queries, settings, options, true).checks;
}

// The work decompositions every kernel is checked under: one thread block per query, the
// default cut, and as many segments as the engine allows (small segments, many boundaries).
inline std::vector<gpu::GpuEngineOptions> decompositions(gpu::GpuEngineOptions base) {
  std::vector<gpu::GpuEngineOptions> v;
  base.max_segments_per_query = 1;
  v.push_back(base);
  base.max_segments_per_query = gpu::GpuEngineOptions{}.max_segments_per_query;
  v.push_back(base);
  base.blocks_per_sm = 64;
  base.min_segment_postings = 64;
  base.max_segments_per_query = gpu::kMaxSegmentsPerQuery;
  v.push_back(base);
  return v;
}

inline std::vector<Query> resolve_all(const Index& index, const std::filesystem::path& file,
                               std::size_t limit) {
  const QueryFile qf = read_query_file(file);
  std::vector<Query> out;
  for (const QueryText& qt : qf.queries) {
    if (out.size() >= limit) break;
    Query q;
    QueryProblem p;
    if (resolve_query(index.shard(0), qt, QueryLimits{}, q, p, file.string())) out.push_back(q);
  }
  return out;
}

inline Index build_synthetic(const TempDir& tmp, const std::string& spec, std::uint32_t shards,
                      SplitMode split = SplitMode::kInputRanges) {
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  o.num_shards = shards;
  o.split = split;
  build_index_synthetic(SyntheticParams::parse(spec), o);
  return Index::open(tmp / "idx");
}

// One shard, the given codec (pfor128 or bp128).
inline Index build_synthetic_with_codec(const TempDir& tmp, const std::string& spec, const char* codec) {
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  o.codec = codec::parse_codec(codec);
  build_index_synthetic(SyntheticParams::parse(spec), o);
  return Index::open(tmp / "idx");
}


}  // namespace gpusearch::gpu_test
