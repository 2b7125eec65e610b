// The GPU engine against the reference engine: every kernel (AND, OR exhaustive and block-max
// pruned, AND-OR), both scorings, k from 1 to 1000, single- and multi-shard indexes, adversarial
// lists, synthetic and real collections. Skipped, loudly, on a machine without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "common/block_codec.hpp"
#include "common/reference_engine.hpp"
#include "common/scoring.hpp"
#include "common/result_compare.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/device_shard.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/query_kernels.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "gpu_engine_test_support.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using namespace gpusearch::gpu_test;
using gpusearch::testing::TempDir;
using gpusearch::testing::write_text;

// The warp decoder against the CPU decoder, value by value: every block of a small index and
// random blocks of a larger one, both codecs.
TEST_F(GpuTest, DecoderMatchesCpuDecoderOnEveryBlock) {
  std::mt19937_64 rng(29);
  for (const char* codec : {"pfor128", "bp128"}) {
    for (const char* spec : {"docs=3000,seed=5,test_queries=10", "docs=20000,seed=6,test_queries=10"}) {
      TempDir tmp;
      const Index index = build_synthetic_with_codec(tmp, spec, codec);
      const ShardIndex& shard = index.shard(0);
      gpu::DeviceShard image(shard);
      const std::uint64_t blocks = shard.block_offsets().size() - 1;  // offsets has blocks + 1
      ASSERT_EQ(blocks, shard.block_last_docid().size());
      // Every block of the small index; 2,000 random single blocks of the larger one.
      std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // first, count
      if (blocks < 5000) ranges.push_back({0, blocks});
      else
        for (int i = 0; i < 2000; ++i) ranges.push_back({rng() % blocks, 1});
      for (const auto& [first, count] : ranges)
      for (const gpu::DecodeScan scan : {gpu::DecodeScan::kShuffles, gpu::DecodeScan::kCub}) {
        gpu::DeviceBuffer<std::uint32_t> docs(count * 128), freqs(count * 128);
        gpu::launch_decode_blocks(image.view(), first, count, docs.data(), freqs.data(), nullptr,
                                  nullptr, scan);
        std::vector<std::uint32_t> got_docs(count * 128), got_freqs(count * 128);
        GPUSEARCH_CUDA_CHECK(cudaMemcpy(got_docs.data(), docs.data(), count * 128 * 4,
                                        cudaMemcpyDeviceToHost));
        GPUSEARCH_CUDA_CHECK(cudaMemcpy(got_freqs.data(), freqs.data(), count * 128 * 4,
                                        cudaMemcpyDeviceToHost));
        std::uint32_t want_docs[128], want_freqs[128];
        for (std::uint64_t i = 0; i < count; ++i) {
          const std::uint64_t b = first + i;
          const std::uint32_t* in = shard.block_data(b);
          const std::uint32_t* fp = codec::decode_docids(in, 0, want_docs);
          codec::decode_freqs(fp, want_freqs);
          const unsigned n = codec::read_header(in[0]).count;
          for (unsigned j = 0; j < 128; ++j) {
            ASSERT_EQ(got_docs[i * 128 + j], j < n ? want_docs[j] : 0u)
                << codec << " block " << b << " docID " << j << " of " << n
                << (scan == gpu::DecodeScan::kCub ? " (CUB scan)" : "");
            ASSERT_EQ(got_freqs[i * 128 + j], j < n ? want_freqs[j] : 0u)
                << codec << " block " << b << " frequency " << j << " of " << n;
          }
        }
      }
    }
  }
}

// The decoded posting layout (built on the device from the compressed blocks) against the CPU
// decoder and the host's impact(), posting by posting: docIDs equal, impacts equal to the
// double impact rounded to float; every block of two small indexes, both codecs.
TEST_F(GpuTest, DecodedPostingLayoutMatchesTheCpuDecoder) {
  for (const char* codec : {"pfor128", "bp128"}) {
    for (const char* spec : {"docs=3000,seed=5,test_queries=10", "docs=20000,seed=6,test_queries=10"}) {
      TempDir tmp;
      const Index index = build_synthetic_with_codec(tmp, spec, codec);
      const ShardIndex& shard = index.shard(0);
      gpu::DeviceShard image(shard, gpu::PostingLayout::kDecoded);
      ASSERT_EQ(image.layout(), gpu::PostingLayout::kDecoded);
      const gpu::ShardView& v = image.view();
      ASSERT_NE(v.decoded_docs, nullptr);
      const std::uint64_t blocks = shard.block_last_docid().size();
      std::vector<std::uint64_t> begin(blocks + 1);
      GPUSEARCH_CUDA_CHECK(cudaMemcpy(begin.data(), v.block_posting_begin, begin.size() * 8,
                                      cudaMemcpyDeviceToHost));
      const std::uint64_t postings = begin.back();
      std::vector<std::uint32_t> docs(postings);
      std::vector<float> impacts(postings);
      GPUSEARCH_CUDA_CHECK(cudaMemcpy(docs.data(), v.decoded_docs, postings * 4,
                                      cudaMemcpyDeviceToHost));
      GPUSEARCH_CUDA_CHECK(cudaMemcpy(impacts.data(), v.decoded_impacts, postings * 4,
                                      cudaMemcpyDeviceToHost));
      const IndexParams& p = shard.params();
      const auto lengths = shard.doc_lengths();
      std::uint64_t seen = 0;
      std::uint32_t want_docs[128], want_freqs[128];
      for (TermId t = 0; t < shard.num_terms(); ++t) {
        const TermInfo& ti = shard.term(t);
        for (std::uint32_t i = 0; i < ti.num_blocks; ++i) {
          const std::uint64_t b = ti.first_block + i;
          const std::uint32_t* fp =
              codec::decode_docids(shard.block_data(b), shard.block_floor(ti, b), want_docs);
          codec::decode_freqs(fp, want_freqs);
          const unsigned n = std::min<std::uint32_t>(128, ti.df_shard - 128 * i);
          ASSERT_EQ(begin[b + 1] - begin[b], n) << codec << " block " << b;
          for (unsigned j = 0; j < n; ++j) {
            const double norm =
                length_norm(p.bm25, lengths[want_docs[j]], p.collection.avg_doc_length);
            ASSERT_EQ(docs[begin[b] + j], want_docs[j]) << codec << " block " << b << " posting " << j;
            ASSERT_EQ(impacts[begin[b] + j], static_cast<float>(impact(want_freqs[j], norm)))
                << codec << " block " << b << " posting " << j;
          }
          seen += n;
        }
      }
      EXPECT_EQ(seen, postings);
    }
  }
}

// Both posting layouts, every OR algorithm and decomposition, every mode, k = 1 to 1000: exact.
TEST_F(GpuTest, CompressedAndDecodedPostingLayoutsAreExact) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=20000,seed=31,test_queries=150,mean_length=250", 2);
  const auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 150);
  ASSERT_GE(queries.size(), 100u);
  for (const char* layout : {"compressed", "decoded"}) {
    for (const char* algorithm : {"window", "exhaustive", "bmw", "warp"}) {
      gpu::GpuEngineOptions o;
      o.posting_layout = layout;
      o.algorithm = algorithm;
      for (const auto& d : decompositions(o)) {
        SCOPED_TRACE(std::string(layout) + " " + algorithm);
        EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({1, 10, 1000}), d),
                  1000u);
      }
    }
  }
}

TEST_F(GpuTest, SyntheticThreeShardsAllModesScoringsAndK) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=6000,seed=11,test_queries=150,mean_length=200", 3);
  const auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 150);
  ASSERT_GE(queries.size(), 100u);
  for (const char* algorithm : {"window", "bmw", "exhaustive", "warp"}) {
    gpu::GpuEngineOptions o;
    o.algorithm = algorithm;
    o.batch_size = 64;  // several launches, both streams
    for (const auto& d : decompositions(o))
      EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({1, 10, 100, 1000}), d),
                3000u);
  }
}

TEST_F(GpuTest, SingleShardLongListsGsTiersSmallWindow) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=20000,seed=3,test_queries=200,mean_length=300", 1,
                                      SplitMode::kGsTiers);
  const auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 200);
  gpu::GpuEngineOptions o;
  o.or_window = 256;  // many windows and straddling blocks
  o.batch_size = 4096;
  EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({10, 1000}), o), 2000u);
  o.algorithm = "window";
  EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({10, 1000}), o), 2000u);
  for (unsigned p : {32u, 256u}) {  // block-max WAND with few and many threads per query
    o.algorithm = "bmw";
    o.bmw_threads = p;
    EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({1, 10, 64}), o), 3000u);
  }
  o.algorithm = "exhaustive";
  o.cost_order = false;
  o.or_window = 8192;
  EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({10}), o), 1000u);
}

// Adversarial lists: every term of a small index alone (one-posting lists, the largest docID,
// terms absent from some shards), long equal-score lists longer than a block, 16-term queries.
TEST_F(GpuTest, AdversarialQueries) {
  TempDir tmp;
  std::ostringstream corpus;
  int id = 0;
  for (int i = 0; i < 300; ++i)  // identical documents: all-equal scores, lists of 300
    corpus << R"({"id":"same)" << id++ << R"(","contents":"alpha beta gamma"})" << '\n';
  std::mt19937 rng(17);
  const char* words[] = {"delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda",
                         "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon",
                         "phi", "chi", "psi", "omega", "alpha", "beta", "gamma"};
  for (int i = 0; i < 900; ++i) {
    std::string text;
    const int len = 1 + int(rng() % 40);
    for (int j = 0; j < len; ++j) text += std::string(words[rng() % 24]) + " ";
    if (i % 97 == 0) text += "unique" + std::to_string(i) + " ";  // one-posting lists
    corpus << R"({"id":"d)" << id++ << R"(","contents":")" << text << "\"}\n";
  }
  corpus << R"({"id":"last","contents":"zzzlonely"})" << '\n';
  write_text(tmp / "corpus.jsonl", corpus.str());
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  o.num_shards = 3;
  build_index_from_corpus({tmp / "corpus.jsonl"}, {}, o);
  const Index index = Index::open(tmp / "idx");
  std::vector<Query> queries;
  for (TermId t = 0; t < index.shard(0).num_terms(); ++t)
    queries.push_back(Query{"t" + std::to_string(t), {t}, 0, {}});
  std::vector<TermId> all;
  for (TermId t = 0; t < index.shard(0).num_terms(); ++t) all.push_back(t);
  for (int i = 0; i < 40; ++i) {
    std::shuffle(all.begin(), all.end(), rng);
    const std::size_t n = i < 20 ? 16 : 2 + i % 5;
    queries.push_back(Query{"m" + std::to_string(i), {all.begin(), all.begin() + n}, 0, {}});
  }
  queries.push_back(Query{"empty", {}, 0, {}});
  for (const char* algorithm : {"window", "bmw", "exhaustive", "warp"}) {
    gpu::GpuEngineOptions g;
    g.algorithm = algorithm;
    for (const auto& d : decompositions(g))
      EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({1, 10, 1000}), d), 500u);
  }
}

TEST_F(GpuTest, RealCollectionCranfieldWithItsAndMsMarcoQueries) {
  const auto dir = gpusearch::testing::shared_data("cranfield");
  if (!std::filesystem::exists(dir / "corpus.jsonl"))
    GTEST_SKIP() << "REAL DATA MISSING: " << dir << " not found; test skipped";
  TempDir tmp;
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  o.num_shards = 2;
  build_index_from_corpus({dir / "corpus.jsonl"}, {}, o);
  const Index index = Index::open(tmp / "idx");
  auto queries = resolve_all(index, dir / "queries.tsv", 1000);
  const auto ms = resolve_all(index, gpusearch::testing::shared_data("msmarco-queries-sample/queries.tsv"), 300);
  queries.insert(queries.end(), ms.begin(), ms.end());
  ASSERT_GT(queries.size(), 200u);
  for (const auto& d : decompositions(gpu::GpuEngineOptions{}))
    EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({10, 100}), d), 2000u);
}

// The tests can fail: every pruning bound weakened by x0.97 (GS early termination, block-max
// window skipping, BMW's bounds) must produce wrong answers on this collection, while the same
// run with safe bounds is exact.
TEST_F(GpuTest, WeakenedPruningBoundGivesWrongAnswers) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=20000,seed=3,test_queries=200,mean_length=300", 1);
  const auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 200);
  for (const char* algorithm : {"window", "window/compressed", "bmw", "warp"}) {
    gpu::GpuEngineOptions o;
    const std::string name = algorithm;
    o.algorithm = name.substr(0, name.find('/'));
    if (name.find('/') != std::string::npos) o.posting_layout = name.substr(name.find('/') + 1);
    o.or_window = 256;
    const auto settings = all_settings({1, 10});
    const CheckCount safe = compare_gpu_with_reference(index, queries, settings, o, true);
    EXPECT_EQ(safe.failures, 0u) << algorithm;
    o.bound_scale = 0.97f;
    const CheckCount weak = compare_gpu_with_reference(index, queries, settings, o, false);
    EXPECT_GT(weak.failures, 0u) << algorithm << ": " << weak.checks
                                 << " answers with bounds weakened by x0.97, none wrong";
    std::cerr << algorithm << ": bounds x0.97 give " << weak.failures << " wrong answers of "
              << weak.checks << "\n";
  }
}

// The OR kernels' threshold seed (common/kth_impact_table.hpp): exact with and without it for
// both pruned OR algorithms, every mode, k = 1 to 1000 and several segments per query; and it is
// really used: a seed inflated by x1.5 (no longer a lower bound) gives wrong answers.
TEST_F(GpuTest, ThresholdSeedIsExactAndAnInflatedSeedIsCaught) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=20000,seed=3,test_queries=200,mean_length=300", 1);
  const auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 200);
  ASSERT_GE(queries.size(), 150u);
  for (const char* algorithm : {"window", "bmw", "warp"}) {
    for (const bool seeded : {true, false}) {
      gpu::GpuEngineOptions o;
      o.algorithm = algorithm;
      o.threshold_seed = seeded;
      o.batch_size = 64;
      o.max_segments_per_query = 4;
      SCOPED_TRACE(std::string(algorithm) + (seeded ? " seeded" : " unseeded"));
      EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({1, 10, 100, 1000}), o),
                2000u);
    }
    gpu::GpuEngineOptions o;
    o.algorithm = algorithm;
    o.threshold_seed_scale = 1.5;
    const auto settings = all_settings({1, 10});
    const CheckCount inflated = compare_gpu_with_reference(index, queries, settings, o, false);
    EXPECT_GT(inflated.failures, 0u) << algorithm << ": " << inflated.checks
                                     << " answers with the seed x1.5, none wrong";
    std::cerr << algorithm << ": seed x1.5 gives " << inflated.failures << " wrong answers of "
              << inflated.checks << "\n";
  }
}

// The default algorithm, auto: block-max WAND for small batches, the window kernel for large
// ones, both exact against the reference (batches of 64 and of 4,096 in one call).
TEST_F(GpuTest, AutoAlgorithmIsExactAtSmallAndLargeBatches) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=20000,seed=29,test_queries=300,mean_length=250", 2);
  const auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 300);
  ASSERT_GE(queries.size(), 200u);
  for (unsigned batch : {64u, 4096u}) {
    gpu::GpuEngineOptions o;
    EXPECT_EQ(o.algorithm, "auto");
    o.batch_size = batch;
    SCOPED_TRACE("auto, batch " + std::to_string(batch));
    EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({1, 10, 100, 1000}), o),
              4000u);
  }
}

// The AND and OR kernels' top-k in shared memory and in a global-memory row (auto picks the
// latter where it lets more blocks reside, e.g. k = 1000): both against the reference, every
// mode and k, window and exhaustive, small windows (many flushes per segment) and several
// segments per query.
TEST_F(GpuTest, TopKInSharedOrGlobalMemoryIsExact) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=20000,seed=23,test_queries=120,mean_length=250", 2);
  const auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 120);
  ASSERT_GE(queries.size(), 100u);
  for (const char* memory : {"shared", "global"})
    for (const char* algorithm : {"window", "exhaustive"})
      for (unsigned window : {1024u, 8192u}) {
        gpu::GpuEngineOptions o;
        o.algorithm = algorithm;
        o.topk_memory = memory;
        o.or_window = window;
        o.batch_size = 64;
        o.max_segments_per_query = 4;
        SCOPED_TRACE(std::string(memory) + " " + algorithm + " window " + std::to_string(window));
        EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({1, 10, 100, 1000}), o),
                  1000u);
      }
}

// The OR kernel's block shapes (window documents : threads): auto takes 4,096:128 for large
// OR-mode launches of long queries (gpu_engine.cpp, kAutoNarrowOrMinBatch); every shape answers
// as the reference does.
TEST_F(GpuTest, OrKernelShapesAreExact) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=20000,seed=29,test_queries=120,mean_length=250", 1);
  const auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 120);
  ASSERT_GE(queries.size(), 100u);
  for (const char* algorithm : {"window", "exhaustive"})
    for (const auto& [window, threads] : {std::pair{4096u, 128u}, std::pair{2048u, 64u},
                                         std::pair{16384u, 512u}}) {
      gpu::GpuEngineOptions o;
      o.algorithm = algorithm;
      o.or_window = window;
      o.or_threads = threads;
      o.batch_size = 64;
      o.max_segments_per_query = 4;
      SCOPED_TRACE(std::string(algorithm) + " " + std::to_string(window) + ":" +
                   std::to_string(threads));
      EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({1, 10, 1000}), o), 500u);
    }
}

// The warp kernel (gpu/or_warp_kernel.cu): several windows per warp, warp shares and segments
// of every size, both scorings, every mode; k up to 32 (a top-k per warp) and above (the
// block's shared top-k, its buffer flushed by one warp under a lock, k = 1000 with many flushes);
// pruned (warp) and unpruned (exhaustive, k <= 32). The launches really ran it (their stats name
// its window); k = 1025 or a 40-term query falls back to the window kernel, exactly.
TEST_F(GpuTest, WarpOrKernelIsExactAndRuns) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=30000,seed=41,test_queries=200,mean_length=300", 1);
  auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 200);
  ASSERT_GE(queries.size(), 150u);
  auto ran_warp = [&](const gpu::GpuEngineOptions& o, const std::vector<Query>& batch, unsigned k) {
    gpu::GpuEngine engine(index.shard(0), index.shard_id(0), o);
    std::vector<ShardResult> out(batch.size());
    engine.search(batch, SearchParams{Mode::kOr, Scoring::kBm25, 0.3, k}, out);
    EXPECT_FALSE(engine.batch_stats().empty());
    bool all = true;
    for (const auto& b : engine.batch_stats()) all = all && b.or_warp_window == o.or_warp_window;
    return all;
  };
  for (const char* algorithm : {"warp", "exhaustive"})
    for (const unsigned window : {128u, 1536u}) {
      gpu::GpuEngineOptions o;
      o.algorithm = algorithm;
      o.posting_layout = "decoded";
      o.or_warp_window = window;
      o.batch_size = 64;
      for (const auto& d : decompositions(o)) {
        SCOPED_TRACE(std::string(algorithm) + " window " + std::to_string(window) +
                     ", segments <= " + std::to_string(d.max_segments_per_query));
        EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({1, 10, 32, 33, 1000}), d),
                  4500u);
        // Above k = 32 the warp kernel runs when asked for by name only (slower there).
        for (unsigned k : {10u, 1000u})
          EXPECT_EQ(ran_warp(d, queries, k), k <= 32 || d.algorithm == "warp") << "k = " << k;
      }
    }
  // Outside its limits the launch takes the window kernel.
  gpu::GpuEngineOptions o;
  o.algorithm = "warp";
  o.posting_layout = "decoded";
  std::vector<Query> long_query = {queries[0]};
  for (std::size_t i = 1; i < queries.size() && long_query[0].terms.size() < 40; ++i)
    for (TermId t : queries[i].terms)
      if (long_query[0].terms.size() < 40 &&
          std::find(long_query[0].terms.begin(), long_query[0].terms.end(), t) ==
              long_query[0].terms.end())
        long_query[0].terms.push_back(t);
  ASSERT_EQ(long_query[0].terms.size(), 40u);
  for (const auto& [batch, k] : {std::pair{queries, 1025u}, std::pair{long_query, 10u}}) {
    EXPECT_FALSE(ran_warp(o, batch, k)) << "k = " << k;
    EXPECT_GT(check_gpu_against_reference(index, batch, all_settings({k}), o), 0u);
  }
}
