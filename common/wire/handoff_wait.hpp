// A worker thread's wait for work that another thread of its rank hands over: the aggregator's
// merge thread for batches the MPI thread completed, the ISN's engine thread for batches the MPI
// thread received. A condition variable's wake-up is on every query's latency: on the H200
// host (a virtual machine: an idle core halts, and a wake-up is an interrupt through the
// hypervisor) it measured 20-30 us at each of the two hand-offs, beside a GPU batch of 64 that
// computes in ~0.7 ms (issue 16, tests/benchmarks/NOTES-cluster.md, "Hot hand-offs").
//
// So around the moments work is due the worker polls instead of sleeping (--handoff hot, the
// default; --handoff sleep or --progress backoff: always the condition variable):
//   - within `linger` of its last job (the ISN's next batch comes tens of microseconds after
//     its answer when the aggregator admits just in time);
//   - from an expected time until the work comes or the expectation lapses (expect(): the
//     aggregator's MPI thread predicts each batch's answers, the ISN's its next batch).
// Polling is a yield between loads of a counter that notify() bumps: no lock, no syscall but
// the yield. Outside those windows the worker sleeps on the condition variable until the next
// expected time, so an idle rank costs nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include <nlohmann/json_fwd.hpp>

namespace gpusearch::wire {

class HandoffWait {
 public:
  using Clock = std::chrono::steady_clock;

  // `mutex` and `cv` are the producer's and the worker's, guarding the work queue; `hot` false:
  // always sleep. `linger`: how long the worker stays hot after each job.
  HandoffWait(std::mutex& mutex, std::condition_variable& cv, bool hot,
              std::chrono::microseconds linger)
      : mutex_(mutex), cv_(cv), hot_(hot), linger_(linger) {}

  // Producer: after queuing work (or changing what the worker's ready() reads) under the mutex,
  // or after releasing it.
  void notify_one() {
    posted_.fetch_add(1, std::memory_order_release);
    cv_.notify_one();
  }
  void notify_all() {
    posted_.fetch_add(1, std::memory_order_release);
    cv_.notify_all();
  }

  // Anyone: work is due from `from` on, hot polling worth it until `until` (replaces the last
  // expectation). Wakes a worker asleep past `from`. Cheap when unchanged (called every polling
  // round of an MPI thread).
  void expect(Clock::time_point from, Clock::time_point until);

  // Worker: returns with `lock` (on the mutex) held once ready() (called with it held) is true.
  template <class Ready>
  void wait(std::unique_lock<std::mutex>& lock, Ready ready) {
    while (!ready()) {
      const auto now = Clock::now();
      if (hot_) {
        const auto hot_end = hot_until(now);
        if (now < hot_end) {
          const std::uint64_t seen = posted_.load(std::memory_order_acquire);
          lock.unlock();
          hot_waits_.fetch_add(1, std::memory_order_relaxed);
          const std::int64_t expectation = from_ns_.load(std::memory_order_relaxed);
          auto t = now;
          while (posted_.load(std::memory_order_acquire) == seen && t < hot_end &&
                 from_ns_.load(std::memory_order_relaxed) == expectation) {
            std::this_thread::yield();
            t = Clock::now();
          }
          hot_ns_.fetch_add(std::uint64_t((t - now).count()), std::memory_order_relaxed);
          lock.lock();
          continue;
        }
      }
      // Asleep until the next expected time. expect() wakes it if that moves earlier: each
      // side stores, then reads the other's word (sequentially consistent), so either this
      // sees the new expectation or expect() sees this asleep.
      const std::int64_t expected = from_ns_.load();
      const Clock::time_point wake = hot_ ? next_from(now, expected) : Clock::time_point::max();
      asleep_until_ns_.store(ns(wake));
      if (hot_ && from_ns_.load() != expected) {
        asleep_until_ns_.store(kNotAsleep);
        continue;
      }
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      if (wake == Clock::time_point::max())
        cv_.wait(lock);
      else
        cv_.wait_until(lock, wake);
      asleep_until_ns_.store(kNotAsleep);
    }
  }
  // Worker: a job is done (the linger starts now).
  void worked(Clock::time_point now) { last_job_ = now; }

  // For the metrics: hot waits, their time, sleeps.
  nlohmann::json stats() const;

 private:
  static constexpr std::int64_t kNotAsleep = INT64_MIN;
  static std::int64_t ns(Clock::time_point t) {
    return t == Clock::time_point::max() ? INT64_MAX : std::int64_t(t.time_since_epoch().count());
  }
  static Clock::time_point at(std::int64_t n) {
    return n == INT64_MAX ? Clock::time_point::max() : Clock::time_point(Clock::duration(n));
  }
  Clock::time_point hot_until(Clock::time_point now) const;
  static Clock::time_point next_from(Clock::time_point now, std::int64_t from_ns);

  std::mutex& mutex_;
  std::condition_variable& cv_;
  const bool hot_;
  const std::chrono::microseconds linger_;
  std::atomic<std::uint64_t> posted_{0};
  std::atomic<std::int64_t> from_ns_{INT64_MAX}, until_ns_{INT64_MIN};
  std::atomic<std::int64_t> asleep_until_ns_{kNotAsleep};
  Clock::time_point last_job_{};  // the worker's
  // Written by the worker, read by stats() from any thread.
  std::atomic<std::uint64_t> hot_waits_{0}, hot_ns_{0}, sleeps_{0};
};

}  // namespace gpusearch::wire
