// Several GPUs per ISN on the GPU: the GPU engine restricted to a docID range answers as the
// CPU engine over that range (the range split the multi-GPU engine rests on, checked on one
// GPU), and the multi-GPU engine (per-range engines, rows left on the devices, NCCL gather and
// merge on the lead GPU) answers every mode as the reference: G = 1 on every GPU host, and every
// G up to the host's GPUs (at most 8). Skipped, loudly, without a CUDA device.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <numeric>

#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/multi_gpu_engine.hpp"
#include "gpu/topk_rows.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

namespace {

class MultiGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu::gpu_available())
      GTEST_SKIP() << "NO CUDA DEVICE: GPU test skipped (run launch/gpu-host.sh on a GPU host)";
    BuildOptions o;
    o.out_dir = tmp_ / "idx";
    o.progress = false;
    build_index_synthetic(SyntheticParams::parse(
                              "docs=6000,seed=23,train_queries=2,test_queries=120,mean_length=160"),
                          o);
    index_ = std::make_unique<Index>(Index::open(tmp_ / "idx"));
    for (const auto& qt : read_query_file(tmp_ / "idx" / "queries.test.tsv").queries) {
      Query q;
      QueryProblem p;
      if (resolve_query(index_->shard(0), qt, {}, q, p, "test")) queries_.push_back(std::move(q));
    }
    ASSERT_GT(queries_.size(), 100u);
  }
  TempDir tmp_;
  std::unique_ptr<Index> index_;
  std::vector<Query> queries_;
};

bool same_docs(const std::vector<RankedDoc>& a, const std::vector<RankedDoc>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].doc != b[i].doc &&
        std::abs(a[i].score - b[i].score) > 1e-5 * std::max(1.0, std::abs(double(b[i].score))))
      return false;
  return true;
}

}  // namespace

TEST_F(MultiGpuTest, EngineOverADocRangeAnswersAsTheCpuEngineOverIt) {
  const ShardIndex& shard = index_->shard(0);
  const cpu::CpuEngine cpu_engine(shard, 0);
  const auto first = gpu::split_doc_ranges(shard.num_docs(), 3);
  std::size_t checks = 0;
  for (unsigned r = 0; r < 3; ++r) {
    gpu::GpuEngineOptions o;
    o.doc_begin = first[r];
    o.doc_end = first[r + 1];
    o.batch_size = 50;
    gpu::GpuEngine engine(shard, 0, o);
    for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
      for (unsigned k : {1u, 10u, 100u}) {
        const SearchParams p{mode, Scoring::kBm25, 0.3, k};
        std::vector<ShardResult> got(queries_.size());
        engine.search(queries_, p, got);
        for (std::size_t i = 0; i < queries_.size(); ++i) {
          const ShardResult want = cpu_engine.search_range(queries_[i], p, first[r], first[r + 1]);
          ASSERT_TRUE(same_docs(got[i].hits, want.hits))
              << "range " << r << " " << to_string(mode) << " k=" << k << " query "
              << queries_[i].id;
          if (mode == Mode::kAndOr) {
            const bool ok = want.and_matches < k ? got[i].and_matches == want.and_matches
                                                 : got[i].and_matches >= k;
            ASSERT_TRUE(ok) << "range " << r << " query " << queries_[i].id << ": "
                            << got[i].and_matches << " AND matches, CPU " << want.and_matches;
            if (want.and_matches < k) {
              ASSERT_TRUE(same_docs(got[i].or_hits, want.or_hits));
            }
          }
          for (const RankedDoc& d : got[i].hits) {
            ASSERT_GE(d.doc, first[r]);
            ASSERT_LT(d.doc, first[r + 1]);
          }
          ++checks;
        }
      }
    }
  }
  EXPECT_GT(checks, 3000u);
  gpu::GpuEngineOptions bad;
  bad.doc_begin = 10;
  bad.doc_end = 10;
  EXPECT_THROW(gpu::GpuEngine(shard, 0, bad), InputError);
}

TEST_F(MultiGpuTest, EveryGpuCountAnswersAsTheReference) {
  const int gpus = std::min<int>(gpu::gpu_device_count(), int(gpu::kMaxRangesPerIsn));
  std::cout << "multi-GPU engine: G = 1.." << gpus << " on this host, both splits\n";
  for (int g = 1; g <= gpus; ++g) {
    for (gpu::MultiGpuSplit split :
         {gpu::MultiGpuSplit::kDocRanges, gpu::MultiGpuSplit::kQueries}) {
      const std::string how = split == gpu::MultiGpuSplit::kQueries ? "queries" : "ranges";
      std::vector<int> devices(g);
      std::iota(devices.begin(), devices.end(), 0);
      gpu::GpuEngineOptions o;
      o.batch_size = 40;  // several batches per call
      gpu::MultiGpuEngine engine(index_->shard(0), 0, devices, o, split);
      EXPECT_EQ(engine.ranges(), unsigned(g));
      for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
        for (Scoring scoring : {Scoring::kBm25, Scoring::kBm25Pr}) {
          for (unsigned k : {1u, 10u, 100u}) {
            const SearchParams p{mode, scoring, 0.3, k};
            std::vector<ShardResult> out(queries_.size());
            engine.search(queries_, p, out);
            for (std::size_t i = 0; i < queries_.size(); ++i) {
              const auto ref = reference_answer(*index_, queries_[i], p, k + 20);
              const ShardResult* one[] = {&out[i]};
              const QueryResult got = merge_shard_results(p, one);
              const auto diff = compare_top_k(ref.hits, ref.total_matches, k, got.hits);
              ASSERT_FALSE(diff) << g << " GPUs, split " << how << ", " << to_string(mode) << " "
                                 << to_string(scoring) << " k=" << k << ", query " << queries_[i].id
                                 << ": " << *diff;
              EXPECT_EQ(got.answered_by_or, ref.answered_by_or)
                  << g << " GPUs, query " << queries_[i].id;
            }
          }
        }
      }
      const nlohmann::json stats = engine.stats();
      EXPECT_GT(stats["batches"].get<std::uint64_t>(), 2u);
      EXPECT_EQ(stats["ranges"].size(), std::size_t(g));
      EXPECT_EQ(stats["split"], how);
      // The query split: every GPU answered some of the queries (its engine ran batches).
      if (split == gpu::MultiGpuSplit::kQueries) {
        for (const auto& r : stats["ranges"])
          EXPECT_GT(r["batches"].get<std::uint64_t>(), 0u) << g << " GPUs, device " << r["device"];
      }
    }
  }
}

// An engine on a GPU other than the calling thread's current one, at serving batch sizes: as an
// ISN builds it (GPU 1 of an ISN, or the second range of one, built on a thread whose current
// device is 0). Its lanes' streams were created on the current device, and the first launch
// failed (cudaErrorInvalidValue in the lane's memset: H200 x2, session 44); the ISN then answered
// every batch on the CPU. Run alone (no NCCL communicator before it in the process).
TEST_F(MultiGpuTest, EngineOnAnotherGpuThanTheCurrentOneAnswersAsTheReference) {
  const int gpus = gpu::gpu_device_count();
  if (gpus < 2)
    GTEST_SKIP() << "ONE CUDA DEVICE: this test needs 2 GPUs (run it on an nvidia-h200-x2 host)";
  // Serving-sized calls: the test queries ten times over, in batches of 1,024.
  std::vector<Query> queries;
  for (int rep = 0; rep < 10; ++rep)
    queries.insert(queries.end(), queries_.begin(), queries_.end());
  const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
  auto check = [&](QueryEngine& engine, const std::string& what) {
    std::vector<ShardResult> out(queries.size());
    engine.search(queries, p, out);
    for (std::size_t i = 0; i < queries.size(); ++i) {
      const auto ref = reference_answer(*index_, queries[i], p, p.k + 20);
      const ShardResult* one[] = {&out[i]};
      const QueryResult got = merge_shard_results(p, one);
      const auto diff = compare_top_k(ref.hits, ref.total_matches, p.k, got.hits);
      ASSERT_FALSE(diff) << what << ", query " << queries[i].id << ": " << *diff;
    }
  };
  gpu::GpuEngineOptions o;
  o.batch_size = 1024;
  o.device = gpus - 1;
  GPUSEARCH_CUDA_CHECK(cudaSetDevice(0));
  {
    gpu::GpuEngine engine(index_->shard(0), 0, o);
    int current = -1;
    GPUSEARCH_CUDA_CHECK(cudaGetDevice(&current));
    EXPECT_EQ(current, 0) << "the engine's construction left its device current";
    check(engine, fmt::format("GPU engine on device {}", o.device));
    EXPECT_EQ(engine.stats()["device"].get<int>(), o.device);
  }
  std::vector<int> devices(std::min<int>(gpus, int(gpu::kMaxRangesPerIsn)));
  std::iota(devices.begin(), devices.end(), 0);
  gpu::MultiGpuEngine ranges(index_->shard(0), 0, devices, o);
  check(ranges, fmt::format("{} GPUs per ISN, batch 1,024", devices.size()));
}

TEST_F(MultiGpuTest, BadDeviceSetsNameTheFlag) {
  const int present = gpu::gpu_device_count();
  for (gpu::MultiGpuSplit split : {gpu::MultiGpuSplit::kDocRanges, gpu::MultiGpuSplit::kQueries}) {
    auto message = [&](std::vector<int> devices) {
      try {
        gpu::MultiGpuEngine engine(index_->shard(0), 0, std::move(devices), {}, split);
      } catch (const InputError& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    EXPECT_NE(message({present}).find("--gpus-per-isn"), std::string::npos);
    EXPECT_NE(message({0, 0}).find("--gpus-per-isn"), std::string::npos);
    EXPECT_NE(message({}).find("--gpus-per-isn"), std::string::npos);
  }
}
