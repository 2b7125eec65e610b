// bench_scheduler's open-loop run: Poisson arrivals at a rate, every arrival already due submitted
// at once (CoProcessorScheduler::submit_many), each answer checked against the expected one; the
// run fails at its first missed deadline. Reports delays, where the jobs ran, the submitting
// threads' lag, the scheduler's stats and, on request, the run's timeline.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/metrics.hpp"
#include "common/shard_index.hpp"
#include "isn/coprocessor_scheduler.hpp"
#include "sched_timeline.hpp"

namespace gpusearch::bench {

using Clock = std::chrono::steady_clock;

inline bool same_hits(const ShardResult& a, const ShardResult& b) {
  auto same = [](const std::vector<RankedDoc>& x, const std::vector<RankedDoc>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i].doc != y[i].doc &&
          std::abs(x[i].score - y[i].score) > 1e-5 * std::max(1.0, std::abs(double(y[i].score))))
        return false;
    return true;
  };
  return same(a.hits, b.hits) && same(a.or_hits, b.or_hits);
}

struct RunResult {
  double rate = 0;
  bool passed = false;
  nlohmann::json json;
};

// One open-loop run: Poisson arrivals at `rate` for `seconds`, through a fresh scheduler.
struct OpenLoopSettings {
  double seconds = 1.5;           // of arrivals
  double timeline_bin_ms = 0;     // > 0: the run's timeline (sched_timeline.hpp) in its JSON
  bool submit_one_at_a_time = false;  // else every arrival already due in one submission
  unsigned submit_threads = 1;        // threads submitting the arrivals, round robin
};

inline RunResult run_at_rate(const ShardIndex& shard, const OpenLoopSettings& s,
                             const SearchParams& params, SchedulerOptions options,
                             ProcessorSlot cpu, ProcessorSlot gpu,
                             const std::vector<Query>& queries,
                             const std::vector<ShardResult>& expected, double rate,
                             std::mt19937_64& rng) {
  CoProcessorScheduler scheduler(shard, cpu, gpu, options);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> arrival_s;
  for (double t = gap(rng); t < s.seconds; t += gap(rng)) arrival_s.push_back(t);
  const std::size_t n = arrival_s.size();
  std::vector<ShardResult> out(n);
  std::vector<JobOutcome> outcomes(n);
  // Completions: each job writes its own outcome and counts itself, without a lock; only the
  // last one wakes the waiting thread. (A lock and a notify per job put the harness on the CPU
  // workers' path between their calls: with 8 workers at 130K jobs/s they queued on it.)
  std::mutex m;
  std::condition_variable cv;
  std::atomic<std::size_t> done{0};
  std::atomic<std::size_t> last{std::numeric_limits<std::size_t>::max()};  // set when known
  std::atomic<bool> failed{false};
  const auto t0 = Clock::now() + std::chrono::milliseconds(5);
  auto arrival_at = [&](std::size_t i) {
    return t0 + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(arrival_s[i]));
  };
  // The submitting threads' lag: from a query's arrival to its submission's return. A lag that
  // grows is the harness (or the scheduler's submission path), not the processors, falling
  // behind.
  std::vector<double> submit_s(n, 0.0);  // each arrival's submission's return, after t0
  std::vector<char> was_submitted(n, 0);
  const auto complete = [&](std::size_t i, const JobOutcome& o) {
    if (o.missed_deadline) failed = true;
    outcomes[i] = o;
    if (done.fetch_add(1) + 1 == last.load()) {  // seq_cst: no lost wake-up
      std::lock_guard lock(m);
      cv.notify_all();
    }
  };
  // Submitting thread t takes arrivals t, t + T, t + 2T, ... (T = submit_threads): one thread
  // fed at most about 0.9M jobs/s on the H200 host, below the GPU's rate on the real queries.
  struct SubmitterTally {
    std::size_t submitted = 0;
    double lag_sum = 0, lag_max = 0;
  };
  const std::size_t threads = std::max(1u, s.submit_threads);
  std::vector<SubmitterTally> tallies(threads);
  auto submit_arrivals = [&](std::size_t t) {
    SubmitterTally& tally = tallies[t];
    std::vector<CoProcessorScheduler::Submission> due;
    std::vector<std::size_t> due_index;
    std::size_t next = t;
    while (next < n && !failed.load()) {
      std::this_thread::sleep_until(arrival_at(next));
      // Every arrival already due goes in one submission (at most 256), as an ISN's batch does;
      // --configs NAME:single submits them one at a time.
      const auto now = Clock::now();
      due.clear();
      due_index.clear();
      while (next < n && due.size() < (s.submit_one_at_a_time ? 1u : 256u) &&
             arrival_at(next) <= now) {
        const std::size_t i = next;
        next += threads;
        // The callback holds one pointer and the index: std::function keeps that inline, so
        // an arrival allocates nothing that a worker thread must free.
        due.push_back({&queries[i % queries.size()], &out[i], arrival_at(i),
                       [complete = &complete, i](const JobOutcome& o) { (*complete)(i, o); }});
        due_index.push_back(i);
      }
      scheduler.submit_many(due, params);
      const auto after = Clock::now();
      for (const std::size_t i : due_index) {
        was_submitted[i] = 1;
        submit_s[i] = std::chrono::duration<double>(after - t0).count();
        const double lag = std::chrono::duration<double>(after - arrival_at(i)).count();
        tally.lag_sum += lag;
        tally.lag_max = std::max(tally.lag_max, lag);
      }
      tally.submitted += due_index.size();
    }
  };
  {
    std::vector<std::jthread> submitters;
    for (std::size_t t = 1; t < threads; ++t) submitters.emplace_back(submit_arrivals, t);
    submit_arrivals(0);
  }  // joined
  std::size_t submitted = 0;
  double lag_sum = 0, lag_max = 0;
  for (const SubmitterTally& tally : tallies) {
    submitted += tally.submitted;
    lag_sum += tally.lag_sum;
    lag_max = std::max(lag_max, tally.lag_max);
  }
  if (submitted < n) {
    // A deadline was missed: the run has failed; what waits is dropped, not run.
    scheduler.drop_waiting();
  }
  {
    // The run may end before n arrivals (a missed deadline): wait for what was submitted.
    std::unique_lock lock(m);
    last = submitted;
    cv.wait(lock, [&] { return done.load() == submitted; });
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> delays_ms;
  std::uint64_t missed = 0, dropped = 0, wrong = 0, stolen = 0, promoted = 0;
  std::array<std::uint64_t, 2> ran{};
  std::vector<double> batch_sizes;
  for (std::size_t i = 0; i < n; ++i) {
    if (!was_submitted[i]) continue;
    const JobOutcome& o = outcomes[i];
    if (o.dropped) {
      ++dropped;
      continue;
    }
    missed += o.missed_deadline;
    stolen += o.stolen;
    promoted += o.promoted;
    ++ran[std::size_t(o.ran_on)];
    if (o.ran_on == Processor::kGpu) batch_sizes.push_back(double(o.batch_size));
    delays_ms.push_back(1e3 * (o.wait_seconds + o.service_seconds));
    if (!same_hits(out[i], expected[i % queries.size()])) ++wrong;
  }
  RunResult r;
  r.rate = rate;
  r.passed = missed == 0 && dropped == 0 && submitted == n && wrong == 0;
  const nlohmann::json delay = metrics::summarize(delays_ms);
  r.json = {{"rate", rate},
            {"passed", r.passed},
            {"arrivals", n},
            {"submitted", submitted},
            {"answered", submitted - dropped},
            {"missed_deadline", missed},
            {"dropped", dropped},
            {"wrong", wrong},
            {"seconds", elapsed},
            {"delay_ms",
             {{"mean", delay.value("mean", NAN)},
              {"p50", delay.value("p50", NAN)},
              {"p99", delay.value("p99", NAN)},
              {"max", delay.value("max", NAN)}}},
            {"submit_lag_ms",
             {{"mean", submitted ? 1e3 * lag_sum / double(submitted) : 0.0},
              {"max", 1e3 * lag_max}}},
            {"jobs_on", {{"cpu", ran[0]}, {"gpu", ran[1]}}},
            {"gpu_batch_size_mean",
             batch_sizes.empty() ? 0.0
                                 : std::accumulate(batch_sizes.begin(), batch_sizes.end(), 0.0) /
                                       double(batch_sizes.size())},
            {"stolen", stolen},
            {"promoted", promoted},
            {"scheduler", scheduler.stats()}};
  if (s.timeline_bin_ms > 0) {
    // The timeline reads the arrivals submitted without a gap (all of them in a passing run).
    const std::size_t prefix = std::size_t(
        std::find(was_submitted.begin(), was_submitted.end(), char(0)) - was_submitted.begin());
    TimelineInput in{arrival_s, submit_s, outcomes, prefix, elapsed, s.timeline_bin_ms * 1e-3,
                     std::chrono::duration<double>(t0.time_since_epoch()).count()};
    r.json["timeline"] = run_timeline(in, r.json["scheduler"]);
    // The trace is in the timeline now (per bin); its raw points would dwarf the rest.
    if (r.json["scheduler"].contains("specialize"))
      r.json["scheduler"]["specialize"].erase("theta_trace");
  }
  return r;
}

}  // namespace gpusearch::bench
