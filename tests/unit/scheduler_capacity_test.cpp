// The `queues` scheduler's capacity routing (isn/capacity_router.hpp) with real engines: the CPU
// engine as the CPU (slowed to a known cost per query) and a simulated GPU processor (exact
// answers, slept batch time: tests/support/simulated_engine.hpp). Most load goes to a GPU
// with many times the CPU's capacity although a lone query costs the GPU more; a saturated CPU
// queue spills to the GPU by routing (not stealing); every answer is the reference's.
#include <gtest/gtest.h>

#include <random>

#include "scheduler_fixture.hpp"
#include "simulated_engine.hpp"

using namespace gpusearch;
using namespace std::chrono_literals;
using namespace gpusearch::scheduler_testing;

TEST_F(SchedulerFixture, CapacityRoutingSendsMostLoadToAGpuWithManyTimesTheCapacity) {
  // The CPU: 2 ms a query. The GPU: 3 ms a call plus 20 us a query, so a lone query costs it
  // more than the CPU (as on the H100 host for short queries), but a batch of 64 costs 70 us a
  // query: about 25x the CPU's capacity. Predicted lone costs say the CPU is cheaper.
  for (QueuesRouting routing : {QueuesRouting::kCapacity, QueuesRouting::kLoneCost}) {
    SCOPED_TRACE(to_string(routing));
    SchedulerOptions o;
    o.policy = SchedulerPolicy::kQueues;
    o.routing = routing;
    o.deadline = 5s;  // not under test here
    o.estimate = [](const QueryFeatures&) { return CostEstimate{{2e-3, 3.02e-3}}; };
    auto cpu = std::make_unique<DelayEngine>(cpu_engine(shard()), 2000us);
    gpusearch::testing::SimulatedEngine gpu(shard(), reference_engine(shard()), {3000, 20000, 0});
    CoProcessorScheduler s(shard(), {cpu.get(), 1, 1}, {&gpu, 1, 64}, o);
    const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
    // 3,000 arrivals/s for 0.3 s: six times the CPU's capacity, a fraction of the GPU's.
    const std::size_t n = 900;
    std::vector<Query> queries;
    for (std::size_t i = 0; i < n; ++i) queries.push_back(test_queries[i % test_queries.size()]);
    std::vector<ShardResult> out(n);
    Completions done;
    std::mt19937 rng(7);
    std::exponential_distribution<double> gap(3000.0);
    for (std::size_t i = 0; i < n; ++i) {
      s.submit(queries[i], p, out[i], CoProcessorScheduler::Clock::now(),
               done.done(std::to_string(i)));
      std::this_thread::sleep_for(std::chrono::duration<double>(gap(rng)));
    }
    done.wait_for(n);
    expect_exact(queries, p, out, "capacity routing");
    const auto st = s.stats();
    const int on_cpu = st["processors"]["cpu"]["jobs"].get<int>();
    const int on_gpu = st["processors"]["gpu"]["jobs"].get<int>();
    EXPECT_EQ(on_cpu + on_gpu, int(n));
    const double gpu_rate = st["capacity"]["gpu"]["seconds_per_predicted_second"].get<double>();
    if (routing == QueuesRouting::kCapacity) {
      // Measured from the GPU's batches: well under its lone cost per query.
      EXPECT_LT(gpu_rate, 0.6) << st.dump();
      // The CPU runs a job whenever that finishes it first (when it is idle), about 150 of the
      // 900; lone costs queue every job for it (paper 001's rule: 1.5x cheaper there).
      EXPECT_GT(on_gpu, 3 * on_cpu) << st.dump();
      EXPECT_GT(st["queued_in"]["gpu_preferred"].get<int>(), int(n) / 2) << st.dump();
    } else {
      EXPECT_EQ(st["queued_in"]["cpu_preferred"].get<int>(), int(n)) << st.dump();
    }
  }
}

TEST_F(SchedulerFixture, ASaturatedCpuQueueSpillsToTheGpuByRouting) {
  // Both processors held busy by a first job each, so nothing can be stolen; every later job is
  // predicted 5x cheaper on the CPU. The first go to the CPU's queue; once the CPU's queue makes
  // them finish later than on the GPU, they are routed to the GPU's queue.
  std::atomic<bool> gpu_cheaper{true};
  SchedulerOptions o;
  o.policy = SchedulerPolicy::kQueues;
  o.routing = QueuesRouting::kCapacity;
  o.deadline = 60s;
  o.estimate = [&](const QueryFeatures&) {
    return gpu_cheaper ? CostEstimate{{5e-3, 1e-3}} : CostEstimate{{1e-3, 5e-3}};
  };
  auto cpu = std::make_unique<GatedEngine>(cpu_engine(shard()));
  auto gpu = std::make_unique<GatedEngine>(run_batches_in_parallel(reference_engine(shard())));
  CoProcessorScheduler s(shard(), {cpu.get(), 1, 1}, {gpu.get(), 1, 8}, o);
  const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
  const std::size_t n = 24;
  std::vector<Query> q(test_queries.begin(), test_queries.begin() + n);
  std::vector<ShardResult> out(n);
  Completions done;
  const auto now = CoProcessorScheduler::Clock::now();
  s.submit(q[0], p, out[0], now, done.done("0"));  // GPU-cheaper: the GPU
  gpu->wait_entered();
  gpu_cheaper = false;
  s.submit(q[1], p, out[1], now, done.done("1"));  // CPU-cheaper, CPU idle: the CPU
  cpu->wait_entered();
  std::vector<Processor> routed;
  for (std::size_t i = 2; i < n; ++i) {
    routed.push_back(s.classify(q[i]).second);
    s.submit(q[i], p, out[i], now, done.done(std::to_string(i)));
  }
  // The CPU's wait grows 1 ms a job, the GPU's 5 ms: the first ones go to the CPU.
  EXPECT_EQ(routed[0], Processor::kCpu);
  EXPECT_EQ(routed[1], Processor::kCpu);
  EXPECT_EQ(routed[2], Processor::kCpu);
  cpu->open();
  gpu->open();
  done.wait_for(n);
  int spilled = 0;
  for (std::size_t i = 2; i < n; ++i) {
    const JobOutcome oc = done.get(std::to_string(i));
    if (oc.queued_in == JobQueue::kGpuPreferred) {
      ++spilled;
      // Once the gates open the CPU may steal it back (the real engines are fast).
      EXPECT_TRUE(oc.ran_on == Processor::kGpu || oc.stolen) << i;
    }
    EXPECT_NE(oc.queued_in, JobQueue::kEither) << i;
  }
  // Equal waits: the GPU gets about a sixth of the 22 (1 ms vs 5 ms a job), at least 2.
  EXPECT_GE(spilled, 2);
  EXPECT_LE(spilled, 8);
  EXPECT_EQ(done.get("1").ran_on, Processor::kCpu);
  expect_exact(q, p, out, "spilled");
}
