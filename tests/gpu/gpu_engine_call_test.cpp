// The GPU engine as its callers see it: options refused with a clear error, how a call is cut
// into launches, every algorithm under compute-sanitizer, and the engine without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu_engine_test_support.hpp"

using namespace gpusearch;
using namespace gpusearch::gpu_test;

TEST_F(GpuTest, BadOptionsAreRejected) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=500,seed=2,test_queries=5", 1);
  gpu::GpuEngineOptions g;
  g.algorithm = "nonsense";
  EXPECT_THROW(gpu::GpuEngine(index.shard(0), 0, g), InputError);
  g = {};
  g.or_window = 100;
  EXPECT_THROW(gpu::GpuEngine(index.shard(0), 0, g), InputError);
  g = {};
  g.bmw_threads = 48;
  EXPECT_THROW(gpu::GpuEngine(index.shard(0), 0, g), InputError);
  g = {};
  g.topk_memory = "texture";
  EXPECT_THROW(gpu::GpuEngine(index.shard(0), 0, g), InputError);
  g = {};
  g.posting_layout = "sparse";
  EXPECT_THROW(gpu::GpuEngine(index.shard(0), 0, g), InputError);
  g = {};
  g.device = 1000;
  EXPECT_THROW(gpu::GpuEngine(index.shard(0), 0, g), InputError);
}

// A call of more than a batch is cut into launches of batch_size, the remainder first (the
// costliest queries, whose launch ends last, in the smallest launch), or last; both exact, as
// are and-or's two cost orders.
TEST_F(GpuTest, CallLaunchesTakeTheRemainderFirst) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=8000,seed=5,test_queries=150,mean_length=200", 1);
  const auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 150);
  ASSERT_GE(queries.size(), 129u);
  const std::uint32_t n = std::uint32_t(queries.size()), rest = n % 64;
  ASSERT_NE(rest, 0u);
  std::vector<std::uint32_t> last(n / 64, 64), first = {rest};
  last.push_back(rest);
  first.insert(first.end(), n / 64, 64);
  for (const bool remainder_first : {true, false}) {
    gpu::GpuEngineOptions o;
    o.batch_size = 64;
    o.remainder_first = remainder_first;
    o.and_or_cost_estimate = remainder_first;  // and-or's order by either cost: exact both ways
    gpu::GpuEngine engine(index.shard(0), index.shard_id(0), o);
    std::vector<ShardResult> out(queries.size());
    engine.search(queries, SearchParams{Mode::kAnd, Scoring::kBm25, 0.3, 1000}, out);
    auto launches = engine.batch_stats();  // in the order they finished
    std::sort(launches.begin(), launches.end(), [](const auto& a, const auto& b) {
      return a.timeline.host_pack_begin < b.timeline.host_pack_begin;
    });
    std::vector<std::uint32_t> sizes;
    for (const auto& b : launches) sizes.push_back(b.queries);
    EXPECT_EQ(sizes, remainder_first ? first : last);
    EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({10, 1000}), o), 1000u);
  }
}

// Each algorithm on both posting layouts, k small and large, on an index small enough to run
// under compute-sanitizer (`launch/gpu-host.sh sanitize` runs these with memcheck and racecheck;
// one algorithm each, so that a slow tool can be pointed at one kernel): each answer exact.
class GpuKernelUnderSanitizer : public GpuTest,
                                public ::testing::WithParamInterface<std::string> {};

TEST_P(GpuKernelUnderSanitizer, SmallIndexBothLayoutsExact) {
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=3000,seed=9,test_queries=40,mean_length=150", 1);
  const auto queries = resolve_all(index, tmp / "idx" / "queries.test.tsv", 40);
  ASSERT_GE(queries.size(), 30u);
  for (const char* layout : {"compressed", "decoded"}) {
    SCOPED_TRACE(GetParam() + " " + layout);
    gpu::GpuEngineOptions o;
    o.algorithm = GetParam();
    o.posting_layout = layout;
    o.batch_size = 16;
    EXPECT_GT(check_gpu_against_reference(index, queries, all_settings({10, 1000}), o), 300u);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, GpuKernelUnderSanitizer,
                         ::testing::ValuesIn(gpu::gpu_algorithms()),
                         [](const auto& info) { return info.param; });

// Without a device the engine refuses clearly (runs only where no device exists).
TEST(GpuEngineWithoutDevice, RefusesWithAClearError) {
  if (gpu::gpu_available()) GTEST_SKIP() << "a CUDA device is present";
  TempDir tmp;
  const Index index = build_synthetic(tmp, "docs=300,seed=2,test_queries=5", 1);
  try {
    gpu::GpuEngine engine(index.shard(0), 0);
    FAIL() << "expected CudaError";
  } catch (const gpu::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}
