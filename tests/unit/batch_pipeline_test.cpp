// The ISN's batches pipelined through its scheduler (isn/batch_pipeline.hpp): several batches'
// jobs queued at once, every batch answered exactly and in the order it was started, a failed
// job reported with its batch.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "isn/batch_pipeline.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/parallel_batch_engine.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

namespace {

// Slows every call down, so that batches overlap.
class SlowEngine final : public QueryEngine {
 public:
  SlowEngine(std::unique_ptr<QueryEngine> inner, std::chrono::microseconds delay, bool fail = false)
      : inner_(std::move(inner)), delay_(delay), fail_(fail) {}
  std::string_view name() const override { return inner_->name(); }
  void search(std::span<const Query> q, const SearchParams& p,
              std::span<ShardResult> out) override {
    std::this_thread::sleep_for(delay_);
    if (fail_) throw Error("the CPU engine failed (test)");
    inner_->search(q, p, out);
  }

 private:
  std::unique_ptr<QueryEngine> inner_;
  std::chrono::microseconds delay_;
  bool fail_;
};

struct PipelineFixture : ::testing::Test {
  void SetUp() override {
    BuildOptions o;
    o.out_dir = tmp / "idx";
    o.progress = false;
    build_index_synthetic(SyntheticParams::parse(
                              "docs=2000,seed=31,train_queries=2,test_queries=120,mean_length=120"),
                          o);
    index = std::make_unique<Index>(Index::open(tmp / "idx"));
    for (const auto& qt : read_query_file(tmp / "idx" / "queries.test.tsv").queries) {
      Query q;
      QueryProblem p;
      if (resolve_query(index->shard(0), qt, {}, q, p, "test") && !q.terms.empty())
        queries.push_back(std::move(q));
    }
    ASSERT_GE(queries.size(), 100u);
  }
  // The scheduler's two processors: the CPU engine and the reference engine, each slowed down.
  std::unique_ptr<SchedulerEngine> scheduler(SchedulerPolicy policy, bool cpu_fails = false) {
    const ShardIndex& shard = index->shard(0);
    SchedulerOptions o;
    o.policy = policy;
    o.lbd_threshold_blocks = 6;
    return std::make_unique<SchedulerEngine>(
        shard,
        std::make_unique<SlowEngine>(std::make_unique<cpu::CpuEngine>(shard, 0),
                                     std::chrono::microseconds(300), cpu_fails),
        std::make_unique<SlowEngine>(
            run_batches_in_parallel(std::make_unique<ReferenceEngine>(shard, 0)),
            std::chrono::microseconds(2000)),
        ProcessorSlot{nullptr, 2, 1}, ProcessorSlot{nullptr, 1, 16}, o);
  }
  TempDir tmp;
  std::unique_ptr<Index> index;
  std::vector<Query> queries;
};

}  // namespace

TEST_F(PipelineFixture, BatchesInFlightAreAnsweredExactlyAndInOrder) {
  auto engine = scheduler(SchedulerPolicy::kLbd);
  std::mutex m;
  std::condition_variable cv;
  std::size_t completions = 0;
  BatchPipeline pipeline(*engine, 4, [&] {
    std::lock_guard lock(m);
    ++completions;
    cv.notify_all();
  });
  const SearchParams params{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
  const std::size_t batches = 24, per_batch = 10;
  std::size_t started = 0, answered = 0;
  while (answered < batches) {
    // As the ISN's engine thread: start while there is room, answer what completed, in order.
    if (started < batches && pipeline.has_room()) {
      auto b = std::make_unique<PipelinedBatch>();
      b->header.batch_id = started;
      b->params = params;
      for (std::size_t i = 0; i < per_batch; ++i)
        b->queries.push_back(queries[(started * per_batch + i) % queries.size()]);
      pipeline.start(b);
      ASSERT_EQ(b, nullptr);
      ++started;
      continue;
    }
    if (auto done = pipeline.take_completed()) {
      ASSERT_EQ(done->header.batch_id, answered) << "batches answered out of order";
      EXPECT_TRUE(done->error.empty()) << done->error;
      ASSERT_EQ(done->results.size(), per_batch);
      for (std::size_t i = 0; i < per_batch; ++i) {
        const Query& q = done->queries[i];
        const auto ref = reference_answer(*index, q, params, params.k + 20);
        const ShardResult* one[] = {&done->results[i]};
        const QueryResult got = merge_shard_results(params, one);
        const auto diff = compare_top_k(ref.hits, ref.total_matches, params.k, got.hits);
        EXPECT_FALSE(diff) << "batch " << answered << ", query " << q.id << ": " << *diff;
      }
      ++answered;
      continue;
    }
    std::unique_lock lock(m);
    cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return pipeline.front_complete(); });
  }
  EXPECT_TRUE(pipeline.empty());
  EXPECT_GT(pipeline.peak_in_flight(), 1u) << "the batches never overlapped";
  EXPECT_LE(pipeline.peak_in_flight(), 4u);
  EXPECT_GT(pipeline.busy_seconds(), 0.0);
  const nlohmann::json stats = engine->stats();
  EXPECT_GT(stats["processors"]["cpu"]["jobs"].get<std::uint64_t>(), 0u);
  EXPECT_GT(stats["processors"]["gpu"]["jobs"].get<std::uint64_t>(), 0u);
}

TEST_F(PipelineFixture, AFailedJobIsReportedWithItsBatch) {
  auto engine = scheduler(SchedulerPolicy::kCpu, /*cpu_fails=*/true);
  BatchPipeline pipeline(*engine, 2, {});
  auto b = std::make_unique<PipelinedBatch>();
  b->params = SearchParams{Mode::kAnd, Scoring::kBm25, 0.3, 10};
  b->queries.assign(queries.begin(), queries.begin() + 5);
  pipeline.start(b);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!pipeline.front_complete() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto done = pipeline.take_completed();
  ASSERT_NE(done, nullptr);
  EXPECT_NE(done->error.find("the CPU engine failed"), std::string::npos) << done->error;
}

TEST_F(PipelineFixture, DestroyedWithBatchesInFlightWaitsForThem) {
  auto engine = scheduler(SchedulerPolicy::kLbd);
  {
    BatchPipeline pipeline(*engine, 3, {});
    for (int i = 0; i < 3; ++i) {
      auto b = std::make_unique<PipelinedBatch>();
      b->params = SearchParams{Mode::kOr, Scoring::kBm25, 0.3, 10};
      b->queries.assign(queries.begin(), queries.begin() + 20);
      pipeline.start(b);
    }
    EXPECT_FALSE(pipeline.has_room());
  }  // the scheduler's workers must not write into freed batches (ASan/TSan builds check)
  SUCCEED();
}
