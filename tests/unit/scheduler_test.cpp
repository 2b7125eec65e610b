// The ISN's CPU+GPU scheduler (isn/coprocessor_scheduler.hpp) driven with two CPU-side engines
// (the CPU engine as "cpu", the reference engine as "gpu"), with gates and delays injected so
// that stealing and deadline promotion happen when the test says: every policy's answers equal
// the reference's, an idle processor steals from a busy one, an urgent job goes first to the
// processor it prefers, and the cost predictor fits logged costs.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <random>
#include <set>

#include <fmt/format.h>

#include "scheduler_fixture.hpp"

using namespace gpusearch;
using namespace std::chrono_literals;
using namespace gpusearch::scheduler_testing;

TEST(SchedulerPolicy, UnknownNameIsAClearError) {
  EXPECT_EQ(parse_scheduler_policy("queues"), SchedulerPolicy::kQueues);
  EXPECT_EQ(parse_scheduler_policy("lbd"), SchedulerPolicy::kLbd);
  try {
    parse_scheduler_policy("fifo");
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--scheduler"), std::string::npos) << what;
    EXPECT_NE(what.find("fifo"), std::string::npos) << what;
    EXPECT_NE(what.find("queues"), std::string::npos) << what;
  }
  EXPECT_EQ(parse_queues_routing("capacity"), QueuesRouting::kCapacity);
  EXPECT_EQ(parse_queues_routing("lone-cost"), QueuesRouting::kLoneCost);
  EXPECT_EQ(parse_queues_routing("specialize"), QueuesRouting::kSpecialize);
  try {
    parse_queues_routing("fastest");
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--scheduler-routing"), std::string::npos) << what;
    EXPECT_NE(what.find("fastest"), std::string::npos) << what;
  }
}

TEST_F(SchedulerFixture, EveryPolicyAnswersAsTheReference) {
  ASSERT_GT(test_queries.size(), 40u);
  ASSERT_GT(train_queries.size(), 40u);
  // LBD's threshold and the estimator both split the log about in half, so both processors work.
  std::vector<std::uint64_t> blocks;
  for (const Query& q : test_queries) blocks.push_back(query_features(shard(), q).total_blocks);
  std::nth_element(blocks.begin(), blocks.begin() + blocks.size() / 2, blocks.end());
  const std::uint64_t median_blocks = blocks[blocks.size() / 2];
  auto alternate = [median_blocks](const QueryFeatures& f) {
    return f.total_blocks < median_blocks ? CostEstimate{{1.0, 3.0}} : CostEstimate{{3.0, 1.0}};
  };
  // queues under every routing: capacity, paper 001's lone costs, and specialization.
  for (const char* name :
       {"cpu", "gpu", "lbd", "queues", "queues-lone-cost", "queues-specialize", "best-serial"}) {
    SchedulerOptions o;
    const bool lone_cost = std::string(name) == "queues-lone-cost";
    const bool specialize = std::string(name) == "queues-specialize";
    o.policy = parse_scheduler_policy(lone_cost || specialize ? "queues" : name);
    o.routing = lone_cost    ? QueuesRouting::kLoneCost
                : specialize ? QueuesRouting::kSpecialize
                             : QueuesRouting::kCapacity;
    // Capacity routing by the predictions only (a prior no measurement outweighs): the real
    // engines' costs here would send every job to the faster one, and both must be exercised.
    o.capacity.prior_predicted_seconds = 1e12;
    // Specialization with theta held at 1 (no steps) and the predictions alone (no batch cost
    // model): the estimates' split, whatever the timing.
    o.specialize_step = 0;
    o.specialize_batch_cost_calls = std::uint64_t(1) << 60;
    o.lbd_threshold_blocks = median_blocks;
    o.estimate = alternate;
    auto cpu = cpu_engine(shard());
    auto gpu = run_batches_in_parallel(reference_engine(shard()));
    CoProcessorScheduler s(shard(), {cpu.get(), 2, 1}, {gpu.get(), 1, 16}, o);
    for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
      const SearchParams p{mode, Scoring::kBm25, 0.3, 10};
      std::vector<ShardResult> out(test_queries.size());
      std::vector<JobOutcome> outcomes;
      s.search_batch(test_queries, p, out, &outcomes);
      expect_exact(test_queries, p, out, std::string(name) + " " + std::string(to_string(mode)));
      std::array<int, 2> ran{};
      for (const JobOutcome& oc : outcomes) ++ran[std::size_t(oc.ran_on)];
      const std::string policy = name;
      if (policy == "cpu") {
        EXPECT_EQ(ran[1], 0) << policy;
      }
      if (policy == "gpu") {
        EXPECT_EQ(ran[0], 0) << policy;
      }
      if (policy == "lbd" || policy == "queues" || policy == "queues-lone-cost" ||
          policy == "queues-specialize" || policy == "best-serial") {
        EXPECT_GT(ran[0], 0) << policy << " " << s.stats().dump();
        EXPECT_GT(ran[1], 0) << policy << " " << s.stats().dump();
      }
      if (policy == "best-serial") {
        for (const JobOutcome& oc : outcomes) EXPECT_EQ(oc.batch_size, 1u);
      }
    }
  }
}

TEST_F(SchedulerFixture, IdleProcessorStealsFromABusyOne) {
  SchedulerOptions o;
  o.policy = SchedulerPolicy::kQueues;
  o.routing = QueuesRouting::kLoneCost;  // paper 001's queues: every job in the CPU's
  o.estimate = fixed_costs(10.0);        // every job prefers the CPU, strongly
  auto gated = std::make_unique<GatedEngine>(cpu_engine(shard()));
  GatedEngine& cpu = *gated;
  auto gpu = reference_engine(shard());
  CoProcessorScheduler s(shard(), {&cpu, 1, 1}, {gpu.get(), 1, 4}, o);
  ASSERT_EQ(s.classify(test_queries[0]).first, JobQueue::kCpuPreferred);
  const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
  std::vector<ShardResult> out(9);
  Completions done;
  const auto now = CoProcessorScheduler::Clock::now();
  s.submit(test_queries[0], p, out[0], now, done.done("first"));
  cpu.wait_entered();  // the CPU's only worker is busy now
  for (int i = 1; i < 9; ++i)
    s.submit(test_queries[i], p, out[i], now, done.done(std::to_string(i)));
  done.wait_for(8);  // answered while the CPU is still blocked: stolen by the other processor
  for (int i = 1; i < 9; ++i) {
    const JobOutcome oc = done.get(std::to_string(i));
    EXPECT_EQ(oc.ran_on, Processor::kGpu) << i;
    EXPECT_TRUE(oc.stolen) << i;
    EXPECT_EQ(oc.preferred, Processor::kCpu) << i;
    EXPECT_FALSE(oc.promoted) << i;
  }
  cpu.open();
  done.wait_for(9);
  EXPECT_EQ(done.get("first").ran_on, Processor::kCpu);
  EXPECT_FALSE(done.get("first").stolen);
  expect_exact(std::span(test_queries).first(9), p, out, "stolen");
  EXPECT_EQ(s.stats()["processors"]["gpu"]["stolen"], 8);
}

// Specialization's theta: a GPU call that steals from the CPU's queue moves it down (the CPU was
// given more than it answers); a GPU call after a CPU worker found nothing to do moves it up.
TEST_F(SchedulerFixture, SpecializeThetaFollowsStealingAndIdleCpus) {
  const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
  {
    // Every query predicted 10x cheaper on the CPU: all routed to it; its one worker held.
    SchedulerOptions o;
    o.policy = SchedulerPolicy::kQueues;
    o.routing = QueuesRouting::kSpecialize;
    o.estimate = fixed_costs(10.0);
    auto gated = std::make_unique<GatedEngine>(cpu_engine(shard()));
    GatedEngine& cpu = *gated;
    auto gpu = reference_engine(shard());
    CoProcessorScheduler s(shard(), {&cpu, 1, 1}, {gpu.get(), 1, 4}, o);
    EXPECT_EQ(s.classify(test_queries[0]).first, JobQueue::kCpuPreferred);
    std::vector<ShardResult> out(5);
    Completions done;
    const auto now = CoProcessorScheduler::Clock::now();
    s.submit(test_queries[0], p, out[0], now, done.done("held"));
    cpu.wait_entered();
    for (int i = 1; i < 5; ++i)
      s.submit(test_queries[i], p, out[i], now, done.done(std::to_string(i)));
    done.wait_for(4);  // stolen by the GPU
    const auto st = s.stats()["specialize"];
    EXPECT_GE(st["moves_down"].get<int>(), 1) << st.dump();
    EXPECT_LT(st["theta"].get<double>(), 1.0) << st.dump();
    cpu.open();
    done.wait_for(5);
    expect_exact(std::span(test_queries).first(5), p, out, "specialize, stolen");
  }
  {
    // Every query predicted 10x cheaper on the GPU: the CPU finds nothing, so each GPU call
    // raises theta (up to the point where the CPU would take them: 10).
    SchedulerOptions o;
    o.policy = SchedulerPolicy::kQueues;
    o.routing = QueuesRouting::kSpecialize;
    o.specialize_step = 0.5;
    o.estimate = fixed_costs(0.1);
    auto cpu = cpu_engine(shard());
    auto gpu = reference_engine(shard());
    CoProcessorScheduler s(shard(), {cpu.get(), 1, 1}, {gpu.get(), 1, 4}, o);
    std::vector<ShardResult> out(1);
    for (int i = 0; i < 3; ++i) {
      std::vector<JobOutcome> oc;
      s.search_batch(std::span(test_queries).subspan(i, 1), p, out, &oc);
      EXPECT_EQ(oc[0].ran_on, Processor::kGpu) << i;
    }
    const auto st = s.stats()["specialize"];
    EXPECT_GE(st["moves_up"].get<int>(), 2) << st.dump();
    EXPECT_GT(st["theta"].get<double>(), 2.0) << st.dump();
    EXPECT_EQ(st["moves_down"], 0) << st.dump();
  }
}

TEST_F(SchedulerFixture, NoStealingWhileTheOwnerHasAnIdleWorker) {
  SchedulerOptions o;
  o.policy = SchedulerPolicy::kQueues;
  o.estimate = fixed_costs(10.0);
  auto cpu = cpu_engine(shard());
  auto gpu = reference_engine(shard());
  CoProcessorScheduler s(shard(), {cpu.get(), 1, 1}, {gpu.get(), 1, 4}, o);
  const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
  // One at a time: the CPU is idle at each arrival, so it takes each job itself.
  std::vector<ShardResult> out(5);
  for (int i = 0; i < 5; ++i) {
    std::vector<JobOutcome> oc;
    s.search_batch(std::span(test_queries).subspan(i, 1), p, std::span(out).subspan(i, 1), &oc);
    EXPECT_EQ(oc[0].ran_on, Processor::kCpu);
    EXPECT_FALSE(oc[0].stolen);
  }
}

// Both processors are held busy; then the CPU's own queue gets two new jobs, and the either
// queue one job that prefers the CPU. Urgent (arrived long ago), that job runs first on the
// CPU, ahead of the CPU's own queue; not urgent, it waits until the CPU's own queue is empty.
TEST_F(SchedulerFixture, UrgentJobGoesFirstToItsPreferredProcessor) {
  for (bool urgent : {true, false}) {
    SCOPED_TRACE(urgent ? "urgent" : "not urgent");
    // Costs by query: q0, q1, q2 prefer the CPU strongly, q3 prefers the GPU strongly, q4 is
    // nearly even but prefers the CPU (the either queue).
    std::map<double, CostEstimate> costs;
    const std::vector<Query> q(test_queries.begin(), test_queries.begin() + 5);
    const std::array<CostEstimate, 5> c{CostEstimate{{1, 10}}, CostEstimate{{1, 10}},
                                        CostEstimate{{1, 10}}, CostEstimate{{10, 1}},
                                        CostEstimate{{1.0, 1.1}}};
    for (int i = 0; i < 5; ++i) {
      const double key = query_features(shard(), q[i]).total + 1e-3 * i;
      costs[key] = c[i];
    }
    // Distinct totals are needed to tell the queries apart by their features.
    std::set<double> totals;
    for (int i = 0; i < 5; ++i) totals.insert(query_features(shard(), q[i]).total);
    if (totals.size() < 5) GTEST_SKIP() << "test queries with equal list lengths";
    SchedulerOptions o;
    o.policy = SchedulerPolicy::kQueues;
    o.routing = QueuesRouting::kLoneCost;  // the either queue is paper 001's
    o.deadline = 1000ms;
    o.urgent_fraction = 0.5;
    o.estimate = [&costs](const QueryFeatures& f) { return costs.lower_bound(f.total)->second; };
    auto cpu = std::make_unique<GatedEngine>(cpu_engine(shard()));
    auto gpu = std::make_unique<GatedEngine>(reference_engine(shard()));
    CoProcessorScheduler s(shard(), {cpu.get(), 1, 1}, {gpu.get(), 1, 4}, o);
    ASSERT_EQ(s.classify(q[4]), std::make_pair(JobQueue::kEither, Processor::kCpu));
    ASSERT_EQ(s.classify(q[3]).first, JobQueue::kGpuPreferred);
    const SearchParams p{Mode::kAnd, Scoring::kBm25, 0.3, 10};
    std::vector<ShardResult> out(5);
    Completions done;
    const auto now = CoProcessorScheduler::Clock::now();
    s.submit(q[3], p, out[3], now, done.done(q[3].id));
    gpu->wait_entered();
    s.submit(q[0], p, out[0], now, done.done(q[0].id));
    cpu->wait_entered();
    s.submit(q[1], p, out[1], now, done.done(q[1].id));
    s.submit(q[2], p, out[2], now, done.done(q[2].id));
    s.submit(q[4], p, out[4], urgent ? now - 700ms : now, done.done(q[4].id));
    cpu->open();
    done.wait_for(4);  // q0, then q1, q2, q4 in some order, all on the CPU (the GPU is held)
    const std::vector<std::string> order = cpu->order();
    ASSERT_EQ(order.size(), 4u);
    EXPECT_EQ(order[0], q[0].id);
    if (urgent) {
      EXPECT_EQ(order[1], q[4].id);
      EXPECT_TRUE(done.get(q[4].id).promoted);
    } else {
      EXPECT_EQ(order[3], q[4].id);
      EXPECT_FALSE(done.get(q[4].id).promoted);
    }
    EXPECT_EQ(done.get(q[4].id).ran_on, Processor::kCpu);
    EXPECT_EQ(done.get(q[4].id).queued_in, JobQueue::kEither);
    gpu->open();
    done.wait_for(5);
    EXPECT_EQ(done.get(q[3].id).ran_on, Processor::kGpu);
    expect_exact(q, p, out, "promotion");
  }
}

// Many jobs arriving at random over slow processors, with a short deadline: jobs are stolen,
// promoted and late, and every answer is still the reference's.
TEST_F(SchedulerFixture, ExactUnderLoadWithStealingAndPromotion) {
  for (QueuesRouting routing : {QueuesRouting::kLoneCost, QueuesRouting::kCapacity})
  for (bool chain : {false, true}) {
    SCOPED_TRACE(fmt::format("{}{}", to_string(routing), chain ? ", chained batches" : ""));
    SchedulerOptions o;
    o.routing = routing;
    o.chain_next_batch = chain;
    o.policy = SchedulerPolicy::kQueues;
    o.deadline = 20ms;
    o.urgent_fraction = 0.25;
    o.estimate = [](const QueryFeatures& f) {
      const double x = std::fmod(f.total, 3.0);  // a third each: CPU, GPU, either
      return CostEstimate{{1.0, x < 1 ? 2.0 : x < 2 ? 0.5 : 1.05}};
    };
    // The CPU (one worker, 4 ms a job) cannot keep up with a third of the jobs: under lone-cost
    // routing the other processor steals, and jobs grow urgent.
    auto cpu = std::make_unique<DelayEngine>(cpu_engine(shard()), 4000us);
    auto gpu =
        std::make_unique<DelayEngine>(run_batches_in_parallel(reference_engine(shard())), 3000us);
    CoProcessorScheduler s(shard(), {cpu.get(), 1, 1}, {gpu.get(), 1, 8}, o);
    const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
    std::vector<ShardResult> out(test_queries.size());
    Completions done;
    std::mt19937 rng(5);
    std::exponential_distribution<double> gap(2000.0);  // 2,000 arrivals/s: overload
    for (std::size_t i = 0; i < test_queries.size(); ++i) {
      s.submit(test_queries[i], p, out[i], CoProcessorScheduler::Clock::now(),
               done.done(std::to_string(i)));
      std::this_thread::sleep_for(std::chrono::duration<double>(gap(rng)));
    }
    done.wait_for(test_queries.size());
    expect_exact(test_queries, p, out, "under load");
    const auto st = s.stats();
    EXPECT_GT(st["processors"]["cpu"]["jobs"].get<int>(), 0);
    EXPECT_GT(st["processors"]["gpu"]["jobs"].get<int>(), 0);
    const int moved = st["processors"]["cpu"]["stolen"].get<int>() +
                      st["processors"]["gpu"]["stolen"].get<int>() +
                      st["processors"]["cpu"]["promoted"].get<int>() +
                      st["processors"]["gpu"]["promoted"].get<int>();
    // Paper 001's routing leaves the CPU a third of the jobs, more than it can run: stolen and
    // promoted jobs. Capacity routing sends the CPU only what it can run, so there may be none.
    if (routing == QueuesRouting::kLoneCost) {
      EXPECT_GT(moved, 0) << st.dump();
    }
  }
}

// specialize_balance_waits: while the GPU's own queue fills its batch it cannot steal, so only
// the waits say that the CPU is behind. The CPU's one worker is held with its queue's oldest job
// older than the GPU's: with the option theta falls at the GPU's calls; without it, it stays.
TEST_F(SchedulerFixture, SpecializeBalanceWaitsLowersThetaWhenTheCpuQueueIsOlder) {
  const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
  // Four queries predicted cheap on the CPU, four others (of other total lengths) on the GPU.
  std::set<std::uint64_t> cpu_cheap;
  std::vector<Query> queries(test_queries.begin(), test_queries.begin() + 4);
  for (const Query& q : queries) cpu_cheap.insert(query_features(shard(), q).total);
  for (std::size_t i = 4; i < test_queries.size() && queries.size() < 8; ++i)
    if (!cpu_cheap.count(query_features(shard(), test_queries[i]).total))
      queries.push_back(test_queries[i]);
  ASSERT_EQ(queries.size(), 8u);
  for (bool balance : {false, true}) {
    SCOPED_TRACE(balance ? "balance waits" : "steals only");
    SchedulerOptions o;
    o.policy = SchedulerPolicy::kQueues;
    o.routing = QueuesRouting::kSpecialize;
    o.specialize_balance_waits = balance;
    // The GPU stands for one whose own queue fills every call: one job a take, not several.
    o.lone_jobs_per_take = 1;
    o.estimate = [cpu_cheap](const QueryFeatures& f) {
      return cpu_cheap.count(f.total) ? CostEstimate{{1.0, 10.0}} : CostEstimate{{10.0, 1.0}};
    };
    auto gated = std::make_unique<GatedEngine>(cpu_engine(shard()));
    GatedEngine& cpu = *gated;
    auto gpu = reference_engine(shard());
    // The GPU answers one query a call: its own queue always fills its batch.
    CoProcessorScheduler s(shard(), {&cpu, 1, 1}, {gpu.get(), 1, 1}, o);
    std::vector<ShardResult> out(8);
    Completions done;
    const auto then = CoProcessorScheduler::Clock::now() - std::chrono::milliseconds(50);
    s.submit(queries[0], p, out[0], then, done.done("0"));
    cpu.wait_entered();  // the CPU's worker is held from here on
    // The rest at once, so that all are routed before the GPU's first call: three for the CPU,
    // waiting since `then`, and four for the GPU, arriving now.
    std::vector<CoProcessorScheduler::Submission> rest;
    for (int i = 1; i < 8; ++i)
      rest.push_back({&queries[i], &out[i], i < 4 ? then : CoProcessorScheduler::Clock::now(),
                      done.done(std::to_string(i))});
    s.submit_many(rest, p);
    // The GPU answers its four, and then steals the CPU's waiting jobs (its queue is empty).
    done.wait_for(7);
    const auto st = s.stats()["specialize"];
    // Every call moved theta down with the option: four with the CPU's queue older, three that
    // stole. Without it, only the three that stole.
    EXPECT_EQ(st["moves_down"].get<int>(), balance ? 7 : 3) << st.dump();
    // The CPU's worker was in a call throughout: with the option nothing raised theta.
    if (balance) {
      EXPECT_EQ(st["moves_up"].get<int>(), 0) << st.dump();
    }
    cpu.open();
    done.wait_for(8);
    expect_exact(queries, p, out, "specialize, balance waits");
  }
}

// submit_many: arrivals queued in groups (one lock, one wake-up per processor) reach every
// processor, under each routing, with and without chained batches: every job is answered once,
// as the reference answers it.
TEST_F(SchedulerFixture, GroupsOfArrivalsAreAllAnsweredExactly) {
  for (QueuesRouting routing :
       {QueuesRouting::kLoneCost, QueuesRouting::kCapacity, QueuesRouting::kSpecialize})
  for (bool chain : {false, true}) {
    SCOPED_TRACE(fmt::format("{}{}", to_string(routing), chain ? ", chained batches" : ""));
    SchedulerOptions o;
    o.routing = routing;
    o.chain_next_batch = chain;
    o.policy = SchedulerPolicy::kQueues;
    o.estimate = [](const QueryFeatures& f) {
      const double x = std::fmod(f.total, 3.0);
      return CostEstimate{{1.0, x < 1 ? 2.0 : x < 2 ? 0.5 : 1.05}};
    };
    auto cpu = std::make_unique<DelayEngine>(cpu_engine(shard()), 1000us);
    auto gpu =
        std::make_unique<DelayEngine>(run_batches_in_parallel(reference_engine(shard())), 2000us);
    // Three CPU workers: a group of arrivals must wake more than one of them.
    CoProcessorScheduler s(shard(), {cpu.get(), 3, 1}, {gpu.get(), 1, 16}, o);
    const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
    std::vector<ShardResult> out(test_queries.size());
    Completions done;
    std::vector<CoProcessorScheduler::Submission> group;
    for (std::size_t i = 0; i < test_queries.size(); ++i) {
      group.push_back({&test_queries[i], &out[i], CoProcessorScheduler::Clock::now(),
                       done.done(std::to_string(i))});
      if (group.size() == 7 || i + 1 == test_queries.size()) {
        s.submit_many(group, p);
        group.clear();
        std::this_thread::sleep_for(2ms);
      }
    }
    done.wait_for(test_queries.size());
    expect_exact(test_queries, p, out, "submitted in groups");
    const auto st = s.stats();
    EXPECT_GT(st["processors"]["cpu"]["jobs"].get<int>(), 0) << st.dump();
    EXPECT_GT(st["processors"]["gpu"]["jobs"].get<int>(), 0) << st.dump();
    EXPECT_EQ(st["processors"]["cpu"]["jobs"].get<std::size_t>() +
                  st["processors"]["gpu"]["jobs"].get<std::size_t>(),
              test_queries.size());
  }
}

TEST_F(SchedulerFixture, DroppedJobsAreCompletedWithoutRunning) {
  SchedulerOptions o;
  o.policy = SchedulerPolicy::kCpu;
  o.lone_jobs_per_take = 1;  // jobs 1-3 wait in the queue, not in the held worker's take
  auto cpu = std::make_unique<GatedEngine>(cpu_engine(shard()));
  auto gpu = reference_engine(shard());
  CoProcessorScheduler s(shard(), {cpu.get(), 1, 1}, {gpu.get(), 1, 1}, o);
  const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
  std::vector<ShardResult> out(4);
  Completions done;
  const auto now = CoProcessorScheduler::Clock::now();
  for (int i = 0; i < 4; ++i)
    s.submit(test_queries[i], p, out[i], now, done.done(std::to_string(i)));
  cpu->wait_entered();
  s.drop_waiting();
  done.wait_for(3);
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(done.get(std::to_string(i)).dropped);
  cpu->open();
  done.wait_for(4);
  EXPECT_FALSE(done.get("0").dropped);
}

// submit_batch (the ISN's pipelined batches): its done is called once, after every answer is
// written, with no error; an engine that throws gives its error, once. A CPU engine that throws
// for any query stands in for a failing processor.
TEST_F(SchedulerFixture, SubmitBatchCompletesOnceWithTheFirstError) {
  class ThrowingEngine final : public QueryEngine {
   public:
    std::string_view name() const override { return "throwing"; }
    void search(std::span<const Query>, const SearchParams&, std::span<ShardResult>) override {
      throw Error("injected failure");
    }
  };
  const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
  for (bool failing : {false, true}) {
    SCOPED_TRACE(failing ? "a failing engine" : "exact engines");
    SchedulerOptions o;
    o.policy = SchedulerPolicy::kCpu;
    std::unique_ptr<QueryEngine> cpu =
        failing ? std::unique_ptr<QueryEngine>(std::make_unique<ThrowingEngine>())
                : cpu_engine(shard());
    auto gpu = reference_engine(shard());
    CoProcessorScheduler s(shard(), {cpu.get(), 3, 1}, {gpu.get(), 1, 8}, o);
    std::vector<ShardResult> out(test_queries.size());
    std::promise<std::string> finished;
    std::atomic<int> calls{0};
    s.submit_batch(test_queries, p, out, [&](const std::string& error) {
      if (calls.fetch_add(1) == 0) finished.set_value(error);
    });
    auto result = finished.get_future();
    ASSERT_EQ(result.wait_for(30s), std::future_status::ready);
    const std::string error = result.get();
    if (failing) {
      EXPECT_NE(error.find("injected failure"), std::string::npos) << error;
    } else {
      EXPECT_EQ(error, "");
      expect_exact(test_queries, p, out, "submit_batch");
    }
    std::this_thread::sleep_for(20ms);  // a second call of done would come by now
    EXPECT_EQ(calls.load(), 1);
  }
}

TEST(CostModel, RecoversAPowerLawFromNoisyCosts) {
  std::mt19937 rng(3);
  std::lognormal_distribution<double> len(8.0, 2.0);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  std::vector<CostSample> samples;
  for (int i = 0; i < 400; ++i) {
    QueryFeatures f;
    f.terms = 1 + i % 4;
    f.shortest = len(rng);
    f.second_shortest = f.terms > 1 ? f.shortest * (1 + len(rng) / 1000) : 0;
    f.total = f.shortest + f.second_shortest * (f.terms - 1);
    const double seconds =
        2e-6 * std::pow(f.total, 0.7) * std::pow(1 + f.shortest, 0.1) * noise(rng);
    samples.push_back({f, seconds});
  }
  nlohmann::json report;
  const CostPredictor p = CostPredictor::train(samples, samples, &report);
  EXPECT_LT(report["cpu"]["mean_relative_error_held_out"].get<double>(), 0.08) << report.dump();
  QueryFeatures big;
  big.terms = 2, big.shortest = 1e5, big.second_shortest = 2e5, big.total = 3e5;
  QueryFeatures small = big;
  small.shortest = 10, small.second_shortest = 20, small.total = 30;
  EXPECT_GT(p.predict(big).on(Processor::kCpu), 50 * p.predict(small).on(Processor::kCpu));
  EXPECT_THROW(CostModel::fit(std::span(samples).first(5)), Error);
}

TEST_F(SchedulerFixture, PredictorTrainedOnEngineCostsDrivesTheQueuesPolicy) {
  // The ISN's path: the predictor is trained at the first batch from per-query costs logged on
  // both engines (train queries), then schedules; answers stay exact.
  const std::vector<Query> train = train_queries;
  SchedulerEngine::Trainer trainer = [&](const SearchParams& p, QueryEngine& cpu, QueryEngine& gpu,
                                         nlohmann::json& report) {
    auto predictor =
        std::make_shared<CostPredictor>(train_cost_predictor(shard(), train, p, cpu, gpu, &report));
    return CostEstimator([predictor](const QueryFeatures& f) { return predictor->predict(f); });
  };
  SchedulerOptions o;
  o.policy = SchedulerPolicy::kQueues;
  SchedulerEngine engine(shard(), cpu_engine(shard()),
                         run_batches_in_parallel(reference_engine(shard())), {nullptr, 2, 1},
                         {nullptr, 1, 16}, o, trainer);
  const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
  std::vector<ShardResult> out(test_queries.size());
  engine.search(test_queries, p, out);
  expect_exact(test_queries, p, out, "trained queues");
  const auto st = engine.stats();
  ASSERT_TRUE(st.contains("predictor")) << st.dump();
  EXPECT_GT(st["predictor"]["cpu"]["samples"].get<int>(), 40);
  const double err = st["predictor"]["gpu"]["mean_relative_error_held_out"].get<double>();
  EXPECT_TRUE(std::isfinite(err)) << st.dump();
  EXPECT_EQ(st["processors"]["cpu"]["jobs"].get<int>() + st["processors"]["gpu"]["jobs"].get<int>(),
            int(test_queries.size()));
  EXPECT_NE(engine.name().find("queues"), std::string::npos);
  // Without a trainer, the queues policy is refused with a message that names the flag.
  EXPECT_THROW(SchedulerEngine(shard(), cpu_engine(shard()), reference_engine(shard()),
                               {nullptr, 1, 1}, {nullptr, 1, 1}, o),
               InputError);
}

TEST_F(SchedulerFixture, ObserverSeesTheCostOfEveryJobRunAlone) {
  // The online refit's input: each CPU job's cost with its features; the GPU's batched calls
  // are not single-query costs and are not reported.
  std::mutex m;
  std::size_t cpu_costs = 0, gpu_costs = 0, with_features = 0;
  SchedulerOptions o;
  o.policy = SchedulerPolicy::kQueues;
  o.routing = QueuesRouting::kLoneCost;
  o.estimate = fixed_costs(1.0);  // every job in the either queue
  o.observe = [&](Processor p, const QueryFeatures& f, double seconds) {
    std::lock_guard lock(m);
    EXPECT_GT(seconds, 0.0);
    (p == Processor::kCpu ? cpu_costs : gpu_costs) += 1;
    with_features += f.terms > 0;
  };
  auto cpu = cpu_engine(shard());
  auto gpu = std::make_unique<DelayEngine>(run_batches_in_parallel(reference_engine(shard())),
                                           std::chrono::milliseconds(5));
  std::vector<JobOutcome> outcomes;
  {
    CoProcessorScheduler s(shard(), {cpu.get(), 2, 1}, {gpu.get(), 1, 64}, o);
    const SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 10};
    std::vector<ShardResult> out(test_queries.size());
    s.search_batch(test_queries, p, out, &outcomes);
  }
  std::size_t cpu_jobs = 0, gpu_alone = 0;
  for (const JobOutcome& oc : outcomes) {
    cpu_jobs += oc.ran_on == Processor::kCpu;
    gpu_alone += oc.ran_on == Processor::kGpu && oc.batch_size == 1;
  }
  EXPECT_GT(cpu_jobs, 0u);
  EXPECT_EQ(cpu_costs, cpu_jobs);
  EXPECT_EQ(gpu_costs, gpu_alone);
  EXPECT_EQ(with_features, cpu_costs + gpu_costs);
}
