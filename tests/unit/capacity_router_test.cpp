// Capacity routing (isn/capacity_router.hpp) driven directly: it learns each processor's seconds
// per predicted second from the calls it is told about, sends most load to a processor with 10x
// the other's capacity, spills a saturated processor's queries to the other, and, where the
// expected completions are close, gives the CPU the queries whose CPU/GPU cost ratio is lowest.
#include <gtest/gtest.h>

#include <array>

#include "isn/capacity_router.hpp"

using namespace gpusearch;

namespace {

constexpr Processor kCpu = Processor::kCpu, kGpu = Processor::kGpu;

CostEstimate costs(double cpu, double gpu) {
  return CostEstimate{{cpu, gpu}};
}

// Teaches the router that p runs `factor` real seconds per predicted second (calls of `call`
// predicted seconds, enough of them to outweigh the prior).
void teach(CapacityRouter& r, Processor p, double factor, double call = 0.01, int calls = 50) {
  for (int i = 0; i < calls; ++i) {
    r.call_started(p, call);
    r.call_finished(p, call, factor * call, true);
  }
}

// Routes n jobs arriving at once (nothing runs meanwhile); returns the jobs per processor.
std::array<int, kProcessors> route_at_once(CapacityRouter& r, const CostEstimate& e, int n) {
  std::array<int, kProcessors> on{};
  for (int i = 0; i < n; ++i) {
    const Processor p = r.route(e).to;
    r.queued(p, e);
    ++on[std::size_t(p)];
  }
  return on;
}

}  // namespace

TEST(CapacityRouter, LearnsEachProcessorsSecondsPerPredictedSecond) {
  CapacityRouter r({4, 1});
  EXPECT_DOUBLE_EQ(r.seconds_per_predicted(kCpu), 1.0);  // the prior: predictions as they are
  EXPECT_DOUBLE_EQ(r.seconds_per_predicted(kGpu), 1.0);
  teach(r, kGpu, 0.05);  // a batch costs 5% of its queries' lone costs
  teach(r, kCpu, 2.0);   // a loaded CPU worker: twice its lone costs
  EXPECT_NEAR(r.seconds_per_predicted(kGpu), 0.05, 0.01);
  EXPECT_NEAR(r.seconds_per_predicted(kCpu), 2.0, 0.1);
  // Decayed: new calls at another factor take over; failed calls are not measured.
  teach(r, kGpu, 0.5, 0.01, 200);
  EXPECT_NEAR(r.seconds_per_predicted(kGpu), 0.5, 0.02);
  r.call_started(kGpu, 0.01);
  r.call_finished(kGpu, 0.01, 100.0, false);
  EXPECT_NEAR(r.seconds_per_predicted(kGpu), 0.5, 0.02);
  const auto st = r.stats();
  EXPECT_EQ(st["gpu"]["calls_measured"].get<int>(), 250);
}

TEST(CapacityRouter, WaitIsZeroWithAnIdleWorkerAndTheQueuedWorkOverTheWorkersOtherwise) {
  CapacityRouter r({2, 1});
  r.call_started(kCpu, 1.0);
  EXPECT_EQ(r.wait_seconds(kCpu), 0.0);  // one of two workers idle, nothing queued
  r.call_started(kCpu, 1.0);
  EXPECT_DOUBLE_EQ(r.wait_seconds(kCpu), 1.0);  // (2 running) / 2 workers
  r.queued(kCpu, costs(2.0, 9.0));
  EXPECT_DOUBLE_EQ(r.wait_seconds(kCpu), 2.0);
  r.dequeued(kCpu, costs(2.0, 9.0), true);
  r.call_finished(kCpu, 1.0, 1.0, true);
  EXPECT_EQ(r.wait_seconds(kCpu), 0.0);
}

TEST(CapacityRouter, MostLoadGoesToAProcessorWithTenTimesTheCapacity) {
  // Equal lone-query costs, but the GPU's batches run at a tenth of them: balanced waits give
  // the GPU about 10/11 of the jobs. By lone costs alone the split would be even.
  CapacityRouter r({1, 1});
  teach(r, kGpu, 0.1);
  teach(r, kCpu, 1.0);
  const auto on = route_at_once(r, costs(1e-3, 1e-3), 1100);
  EXPECT_GT(on[1], 950) << "cpu " << on[0] << " gpu " << on[1];
  EXPECT_GT(on[0], 50) << "the CPU takes its share too";
  EXPECT_NEAR(r.wait_seconds(kCpu), r.wait_seconds(kGpu), 0.2 * r.wait_seconds(kCpu));

  // Unmeasured (both at the prior), the same jobs split about evenly.
  CapacityRouter fresh({1, 1});
  const auto even = route_at_once(fresh, costs(1e-3, 1e-3), 1100);
  EXPECT_NEAR(even[0], 550, 60);
}

TEST(CapacityRouter, ASaturatedQueueSpillsToTheOtherProcessor) {
  // Every job is predicted 3x cheaper on the CPU: the first ones go there, and once the CPU's
  // queue makes them finish later than on the GPU, they go to the GPU.
  CapacityRouter r({1, 1});
  std::vector<Processor> to;
  for (int i = 0; i < 40; ++i) {
    const CostEstimate e = costs(1e-3, 3e-3);
    to.push_back(r.route(e).to);
    r.queued(to.back(), e);
  }
  EXPECT_EQ(to[0], kCpu);
  EXPECT_EQ(to[1], kCpu);
  int gpu = 0;
  for (Processor p : to) gpu += p == kGpu;
  EXPECT_GE(gpu, 5);   // spilled
  EXPECT_LE(gpu, 15);  // the GPU's share of equal waits is a quarter (1 ms vs 3 ms a job)
  // A processor with every worker busy and a long queue is not chosen even for a job predicted
  // far cheaper there.
  CapacityRouter busy({2, 1});
  busy.call_started(kCpu, 0.5);
  busy.call_started(kCpu, 0.5);
  busy.queued(kCpu, costs(10.0, 10.0));
  EXPECT_EQ(busy.route(costs(1e-3, 1e-2)).to, kGpu);
}

TEST(CapacityRouter, WhereCloseTheCpuTakesTheQueriesWhoseCpuGpuRatioIsLowest) {
  // Two kinds of query, both predicted cheaper on the CPU alone; the GPU's batches run at a
  // tenth of the lone costs, so kind A costs the GPU 0.2 ms (ratio CPU/GPU 5) and kind B 0.8 ms
  // (ratio 1.25). The CPU should take B (it is relatively best at them) and leave A to the GPU.
  CapacityRouter r({1, 1});
  teach(r, kGpu, 0.1);
  teach(r, kCpu, 1.0);
  const CostEstimate a = costs(1e-3, 2e-3), b = costs(1e-3, 8e-3);
  std::array<std::array<int, kProcessors>, 2> on{};  // [kind][processor]
  for (int i = 0; i < 4000; ++i) {
    const CostEstimate& e = i % 2 ? b : a;
    const Processor p = r.route(e).to;
    r.queued(p, e);
    ++on[i % 2][std::size_t(p)];
  }
  const double a_on_cpu = double(on[0][0]) / 2000, b_on_cpu = double(on[1][0]) / 2000;
  // Optimal split: all A and 44% of B on the GPU (equal work: 0.2 + 0.8 x = 1 - x).
  EXPECT_LT(a_on_cpu, 0.05) << "A on cpu " << on[0][0] << ", B on cpu " << on[1][0];
  EXPECT_GT(b_on_cpu, 0.4) << "A on cpu " << on[0][0] << ", B on cpu " << on[1][0];
  EXPECT_LT(b_on_cpu, 0.75);
  EXPECT_GT(r.theta(), 1.0);  // moved from 1 toward B's ratio
  const auto st = r.stats();
  EXPECT_GT(st["cpu"]["routed_by_advantage"].get<int>(), 0);
}
