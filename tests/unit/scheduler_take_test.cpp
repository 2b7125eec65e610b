// How the ISN's scheduler (isn/coprocessor_scheduler.hpp) takes jobs from its queues: a GPU
// batch in take_next's order whether or not a run of its own queue is taken straight from the
// queue, a one-query processor's takes of several jobs under load, and which jobs may share an
// engine call. Driven, as in scheduler_test.cpp, with two CPU-side engines and gates.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "scheduler_fixture.hpp"

using namespace gpusearch;
using namespace std::chrono_literals;
using namespace gpusearch::scheduler_testing;

// A batch's jobs in take_next's order, whether a run of the own queue's head is taken straight
// from the queue or not. Both processors held, a GPU of batches of 16 then finds, in order of
// submission (u: urgent; k5: other parameters than the others' k 10):
//   g1, g2 u, eC u (either, prefers the CPU), g3, [eGu u (either, prefers the GPU)], x1 u k5,
//   g4 u, g5, c1 (the CPU's queue), eG (either, prefers the GPU), x2 k5
// It takes, per batch: [eGu promoted,] g1 g2 g3 (its own queue's head, urgent or not), g4
// promoted (urgent behind x1, which does not fit), eC and eG (the either queue's oldest), c1
// stolen (the CPU has no idle worker); then x1; g5; x2 (each batch one parameter set).
TEST_F(SchedulerFixture, BatchTakesUrgentOwnEitherAndStolenJobsInOrder) {
  std::map<double, const Query*> by_total;  // the estimator tells queries apart by total
  for (const Query& q : test_queries) by_total.emplace(query_features(shard(), q).total, &q);
  if (by_total.size() < 13) GTEST_SKIP() << "too few test queries of distinct list lengths";
  std::vector<const Query*> distinct;
  for (const auto& [total, q] : by_total) distinct.push_back(q);
  const Query &held_gpu = *distinct[0], &held_cpu = *distinct[1], &g1 = *distinct[2],
              &g2 = *distinct[3], &e_cpu = *distinct[4], &g3 = *distinct[5],
              &e_gpu_urgent = *distinct[6], &x1 = *distinct[7], &g4 = *distinct[8],
              &g5 = *distinct[9], &c1 = *distinct[10], &e_gpu = *distinct[11], &x2 = *distinct[12];
  const CostEstimate on_gpu{{10, 1}}, on_cpu{{1, 10}}, either_gpu{{1.05, 1}}, either_cpu{{1, 1.05}};
  std::map<double, CostEstimate> costs;
  for (const Query* q : {&held_gpu, &g1, &g2, &g3, &x1, &g4, &g5, &x2})
    costs[query_features(shard(), *q).total] = on_gpu;
  for (const Query* q : {&held_cpu, &c1}) costs[query_features(shard(), *q).total] = on_cpu;
  costs[query_features(shard(), e_cpu).total] = either_cpu;
  for (const Query* q : {&e_gpu_urgent, &e_gpu})
    costs[query_features(shard(), *q).total] = either_gpu;
  const SearchParams k10{Mode::kOr, Scoring::kBm25, 0.3, 10}, k5{Mode::kOr, Scoring::kBm25, 0.3, 5};
  for (bool urgent_either_for_gpu : {false, true}) {
    SCOPED_TRACE(urgent_either_for_gpu ? "an urgent job of the either queue prefers the GPU"
                                       : "no urgent job of the either queue prefers the GPU");
    SchedulerOptions o;
    o.policy = SchedulerPolicy::kQueues;
    o.routing = QueuesRouting::kLoneCost;  // the either queue is paper 001's
    o.deadline = 10s;
    o.urgent_fraction = 0.5;
    o.estimate = [&costs](const QueryFeatures& f) { return costs.at(f.total); };
    auto cpu = std::make_unique<GatedEngine>(cpu_engine(shard()));
    auto gpu = std::make_unique<GatedEngine>(reference_engine(shard()));
    CoProcessorScheduler s(shard(), {cpu.get(), 1, 1}, {gpu.get(), 1, 16}, o);
    ASSERT_EQ(s.classify(e_cpu), std::make_pair(JobQueue::kEither, Processor::kCpu));
    ASSERT_EQ(s.classify(e_gpu), std::make_pair(JobQueue::kEither, Processor::kGpu));
    ASSERT_EQ(s.classify(c1).first, JobQueue::kCpuPreferred);
    ASSERT_EQ(s.classify(g1).first, JobQueue::kGpuPreferred);
    std::map<std::string, ShardResult> out;
    std::vector<std::pair<const Query*, SearchParams>> submitted;
    Completions done;
    const auto now = CoProcessorScheduler::Clock::now(), long_ago = now - 9s;
    auto submit = [&](const Query& q, const SearchParams& p, bool urgent) {
      submitted.emplace_back(&q, p);
      s.submit(q, p, out[q.id], urgent ? long_ago : now, done.done(q.id));
    };
    submit(held_gpu, k10, false);
    gpu->wait_entered();
    submit(held_cpu, k10, false);
    cpu->wait_entered();
    submit(g1, k10, false);
    submit(g2, k10, true);
    submit(e_cpu, k10, true);
    submit(g3, k10, false);
    if (urgent_either_for_gpu) submit(e_gpu_urgent, k10, true);
    submit(x1, k5, true);
    submit(g4, k10, true);
    submit(g5, k10, false);
    submit(c1, k10, false);
    submit(e_gpu, k10, false);
    submit(x2, k5, false);
    gpu->open();
    const std::size_t jobs = urgent_either_for_gpu ? 13 : 12;
    done.wait_for(jobs - 1);  // all but the CPU's held job, on the GPU
    std::vector<const Query*> first_batch{&g1, &g2, &g3, &g4, &e_cpu, &e_gpu, &c1};
    if (urgent_either_for_gpu) first_batch.insert(first_batch.begin(), &e_gpu_urgent);
    std::vector<std::string> expected{held_gpu.id};
    for (const Query* q : first_batch) expected.push_back(q->id);
    for (const Query* q : {&x1, &g5, &x2}) expected.push_back(q->id);
    EXPECT_EQ(gpu->order(), expected);
    for (const Query* q : first_batch) {
      const JobOutcome oc = done.get(q->id);
      EXPECT_EQ(oc.ran_on, Processor::kGpu) << q->id;
      EXPECT_EQ(oc.batch_size, first_batch.size()) << q->id;
      EXPECT_EQ(oc.promoted, q == &g4 || q == &e_gpu_urgent) << q->id;
      EXPECT_EQ(oc.stolen, q == &c1) << q->id;
    }
    for (const Query* q : {&x1, &g5, &x2}) {
      const JobOutcome oc = done.get(q->id);
      EXPECT_EQ(oc.batch_size, 1u) << q->id;
      EXPECT_FALSE(oc.promoted) << q->id;
    }
    EXPECT_EQ(done.get(e_cpu.id).queued_in, JobQueue::kEither);
    cpu->open();
    done.wait_for(jobs);
    EXPECT_EQ(cpu->order(), std::vector<std::string>{held_cpu.id});
    std::vector<Query> asked_k10, asked_k5;
    std::vector<ShardResult> got_k10, got_k5;
    for (const auto& [q, p] : submitted) {
      (p.k == 5 ? asked_k5 : asked_k10).push_back(*q);
      (p.k == 5 ? got_k5 : got_k10).push_back(out.at(q->id));
    }
    expect_exact(asked_k10, k10, got_k10, "batch order, k 10");
    expect_exact(asked_k5, k5, got_k5, "batch order, k 5");
  }
}

// lone_jobs_per_take: under load a worker of a one-query processor takes several jobs at once
// and answers them one engine call each. Every answer is the reference's; the takes are fewer
// than the jobs, never more than the limit each (no more than its fair share of the queue), and a
// job taken is not dropped. With a limit of 1, a job a take.
TEST_F(SchedulerFixture, LoneProcessorTakesSeveralJobsAtOnceUnderLoad) {
  for (unsigned limit : {1u, 4u}) {
    SCOPED_TRACE(fmt::format("up to {} jobs a take", limit));
    SchedulerOptions o;
    o.policy = SchedulerPolicy::kCpu;
    o.lone_jobs_per_take = limit;
    auto gated = std::make_unique<GatedEngine>(cpu_engine(shard()));
    GatedEngine& cpu = *gated;
    auto gpu = reference_engine(shard());
    CoProcessorScheduler s(shard(), {&cpu, 2, 1}, {gpu.get(), 1, 1}, o);
    const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
    const std::size_t n = std::min<std::size_t>(test_queries.size(), 40);
    std::vector<ShardResult> out(n);
    Completions done;
    // Both workers held in their first call, so that the rest queue up behind them.
    const auto now = CoProcessorScheduler::Clock::now();
    s.submit(test_queries[0], p, out[0], now, done.done("0"));
    s.submit(test_queries[1], p, out[1], now, done.done("1"));
    cpu.wait_entered();
    std::vector<CoProcessorScheduler::Submission> rest;
    for (std::size_t i = 2; i < n; ++i)
      rest.push_back({&test_queries[i], &out[i], now, done.done(std::to_string(i))});
    s.submit_many(rest, p);
    cpu.open();
    done.wait_for(n);
    const std::vector<Query> asked(test_queries.begin(), test_queries.begin() + std::ptrdiff_t(n));
    expect_exact(asked, p, out, "lone takes");
    const auto st = s.stats()["processors"]["cpu"];
    EXPECT_EQ(st["jobs"].get<std::size_t>(), n) << st.dump();
    EXPECT_EQ(st["calls"].get<std::size_t>(), n) << st.dump();  // one engine call a job
    const auto takes = st["takes"].get<std::size_t>();
    if (limit == 1) {
      EXPECT_EQ(takes, n) << st.dump();
    } else {
      EXPECT_LT(takes, n) << st.dump();
      EXPECT_GE(takes * limit, n) << st.dump();
    }
    for (std::size_t i = 0; i < n; ++i) {
      const JobOutcome& outcome = done.get(std::to_string(i));
      EXPECT_FALSE(outcome.dropped);
      EXPECT_EQ(outcome.batch_size, 1u);
      EXPECT_EQ(outcome.ran_on, Processor::kCpu);
    }
  }
}

// Jobs share an engine call only with parameters equal in every field: a batch runs with its
// first job's (the scheduler once ignored the candidates).
TEST(SearchParamsBatching, SameParamsComparesEveryField) {
  const SearchParams base{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
  EXPECT_TRUE(same_params(base, base));
  SearchParams other = base;
  other.candidates = 100;
  EXPECT_FALSE(same_params(base, other));
  other = base;
  other.k = 11;
  EXPECT_FALSE(same_params(base, other));
  other = base;
  other.mode = Mode::kOr;
  EXPECT_FALSE(same_params(base, other));
  other = base;
  other.scoring = Scoring::kBm25Pr;
  EXPECT_FALSE(same_params(base, other));
  other = base;
  other.alpha = 0.4;
  EXPECT_FALSE(same_params(base, other));
  SearchParams nan_alpha = base, nan_alpha_too = base;
  nan_alpha.alpha = nan_alpha_too.alpha = std::nan("");
  EXPECT_TRUE(same_params(nan_alpha, nan_alpha_too));  // both the index's default
  EXPECT_FALSE(same_params(nan_alpha, base));
}

// With and-or's probe on, a batch's features are computed in parallel: every job carries the
// features the serial path computes (the probe's answer included), and every answer is exact.
TEST_F(SchedulerFixture, ABatchWithTheAndOrProbeCarriesEveryQuerysFeatures) {
  const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
  ASSERT_GE(test_queries.size(), SchedulerOptions::kParallelFeatureJobs);
  std::map<double, std::size_t> want, seen;  // jobs by and_reaches_k
  for (const Query& q : test_queries) ++want[query_features(shard(), q, p, ~0u).and_reaches_k];
  ASSERT_GT(want[1.0], 0u);
  ASSERT_GT(want[0.0], 0u);
  std::mutex m;
  SchedulerOptions o;
  o.policy = SchedulerPolicy::kCpu;  // every job on the CPU, each one observed
  o.and_probe_blocks = ~0u;
  o.observe = [&](Processor, const QueryFeatures& f, double) {
    std::lock_guard lock(m);
    ++seen[f.and_reaches_k];
  };
  auto cpu = cpu_engine(shard());
  auto gpu = reference_engine(shard());
  std::vector<ShardResult> out(test_queries.size());
  {
    CoProcessorScheduler s(shard(), {cpu.get(), 2, 1}, {gpu.get(), 1, 8}, o);
    std::promise<std::string> finished;
    s.submit_batch(test_queries, p, out, [&](const std::string& error) { finished.set_value(error); });
    auto result = finished.get_future();
    ASSERT_EQ(result.wait_for(30s), std::future_status::ready);
    EXPECT_EQ(result.get(), "");
  }
  expect_exact(test_queries, p, out, "submit_batch with the probe");
  EXPECT_EQ(seen, want);
}
