// The scheduler tests' shared fixture (tests/unit/scheduler_test.cpp,
// tests/unit/scheduler_capacity_test.cpp): a small synthetic index with its test and training
// queries, an exactness check against the reference, and engines with gates and delays.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "isn/coprocessor_scheduler.hpp"
#include "isn/cost_predictor.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/parallel_batch_engine.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

namespace gpusearch::scheduler_testing {

using namespace gpusearch;

using gpusearch::testing::TempDir;
using namespace std::chrono_literals;

struct SchedulerFixture : ::testing::Test {
  static void SetUpTestSuite() {
    tmp = new TempDir;
    BuildOptions o;
    o.out_dir = *tmp / "idx";
    o.progress = false;
    build_index_synthetic(SyntheticParams::parse(
                              "docs=2000,seed=11,train_queries=80,test_queries=80,mean_length=120"),
                          o);
    index = new Index(Index::open(*tmp / "idx"));
    for (const char* log : {"queries.test.tsv", "queries.train.tsv"}) {
      auto& into = std::string(log) == "queries.test.tsv" ? test_queries : train_queries;
      for (const auto& qt : read_query_file(*tmp / "idx" / log).queries) {
        Query q;
        QueryProblem p;
        if (resolve_query(index->shard(0), qt, {}, q, p, "test") && !q.terms.empty())
          into.push_back(std::move(q));
      }
    }
  }
  static void TearDownTestSuite() {
    delete index;
    delete tmp;
  }
  static const ShardIndex& shard() { return index->shard(0); }

  // Every answer of `got` is the reference's top-k for its query.
  static void expect_exact(std::span<const Query> queries, const SearchParams& p,
                           std::span<const ShardResult> got, const std::string& what) {
    ASSERT_EQ(queries.size(), got.size());
    for (std::size_t i = 0; i < queries.size(); ++i) {
      const auto ref = reference_answer(*index, queries[i], p, p.k + 20);
      const ShardResult* one[] = {&got[i]};
      const QueryResult merged = merge_shard_results(p, one);
      const auto diff = compare_top_k(ref.hits, ref.total_matches, p.k, merged.hits);
      EXPECT_FALSE(diff) << what << ", query " << queries[i].id << ": " << diff.value_or("");
    }
  }

  static inline TempDir* tmp = nullptr;
  static inline Index* index = nullptr;
  static inline std::vector<Query> test_queries, train_queries;
};

// Blocks its first call until opened; records the order in which it answers queries.
class GatedEngine final : public QueryEngine {
 public:
  explicit GatedEngine(std::unique_ptr<QueryEngine> inner) : inner_(std::move(inner)) {
    gate_ = open_.get_future().share();
  }
  std::string_view name() const override { return inner_->name(); }
  void search(std::span<const Query> q, const SearchParams& p,
              std::span<ShardResult> out) override {
    if (!entered_once_.exchange(true)) {
      entered_.set_value();
      gate_.wait();
    }
    {
      std::lock_guard lock(m_);
      for (const Query& x : q) order_.push_back(x.id);
    }
    inner_->search(q, p, out);
  }
  void wait_entered() { entered_.get_future().wait(); }
  void open() { open_.set_value(); }
  std::vector<std::string> order() const {
    std::lock_guard lock(m_);
    return order_;
  }

 private:
  std::unique_ptr<QueryEngine> inner_;
  std::promise<void> open_, entered_;
  std::shared_future<void> gate_;
  std::atomic<bool> entered_once_{false};
  mutable std::mutex m_;
  std::vector<std::string> order_;
};

// Sleeps before every call: a slow processor.
class DelayEngine final : public QueryEngine {
 public:
  DelayEngine(std::unique_ptr<QueryEngine> inner, std::chrono::microseconds per_call)
      : inner_(std::move(inner)), per_call_(per_call) {}
  std::string_view name() const override { return inner_->name(); }
  void search(std::span<const Query> q, const SearchParams& p,
              std::span<ShardResult> out) override {
    std::this_thread::sleep_for(per_call_);
    inner_->search(q, p, out);
  }

 private:
  std::unique_ptr<QueryEngine> inner_;
  std::chrono::microseconds per_call_;
};

inline std::unique_ptr<QueryEngine> cpu_engine(const ShardIndex& s) {
  return std::make_unique<cpu::CpuEngine>(s, 0);
}
inline std::unique_ptr<QueryEngine> reference_engine(const ShardIndex& s) {
  return std::make_unique<ReferenceEngine>(s, 0);
}

// An estimator with fixed preferences: the CPU costs 1, the GPU `gpu_cost`.
inline CostEstimator fixed_costs(double gpu_cost) {
  return [gpu_cost](const QueryFeatures&) { return CostEstimate{{1.0, gpu_cost}}; };
}

// Waits for jobs submitted one by one.
struct Completions {
  std::mutex m;
  std::condition_variable cv;
  std::map<std::string, JobOutcome> outcomes;
  CoProcessorScheduler::Done done(const std::string& id) {
    return [this, id](const JobOutcome& o) {
      std::lock_guard lock(m);
      outcomes[id] = o;
      cv.notify_all();
    };
  }
  void wait_for(std::size_t n) {
    std::unique_lock lock(m);
    ASSERT_TRUE(cv.wait_for(lock, 30s, [&] { return outcomes.size() >= n; }))
        << outcomes.size() << " of " << n << " jobs done";
  }
  JobOutcome get(const std::string& id) {
    std::lock_guard lock(m);
    return outcomes.at(id);
  }
};

}  // namespace gpusearch::scheduler_testing
