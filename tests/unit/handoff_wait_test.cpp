// HandoffWait (common/wire/handoff_wait.hpp): no hand-over is lost whatever the mode and the
// expectations, a worker asleep past a new expectation wakes for it, and it polls (not sleeps)
// inside its windows.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/wire/handoff_wait.hpp"

namespace gpusearch::wire {
namespace {

using Clock = HandoffWait::Clock;
using namespace std::chrono_literals;

struct Queue {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<int> items;
  bool stop = false;
};

// A producer hands over `n` items at random gaps and moves the expectation around at random;
// the worker must take every item, in order, and stop.
void hand_over_everything(bool hot, std::chrono::microseconds linger, unsigned seed) {
  Queue q;
  HandoffWait wait(q.mutex, q.cv, hot, linger);
  constexpr int n = 3000;
  int taken = 0;
  bool in_order = true;
  std::thread worker([&] {
    for (;;) {
      std::unique_lock lock(q.mutex);
      wait.wait(lock, [&] { return q.stop || !q.items.empty(); });
      if (q.items.empty()) return;
      while (!q.items.empty()) {
        in_order = in_order && q.items.front() == taken;
        q.items.pop_front();
        ++taken;
      }
      lock.unlock();
      wait.worked(Clock::now());
    }
  });
  std::mt19937 rng(seed);
  for (int i = 0; i < n; ++i) {
    const auto now = Clock::now();
    switch (rng() % 4) {
      case 0:
        wait.expect(Clock::time_point::max(), Clock::time_point::min());
        break;
      case 1:
        wait.expect(now + std::chrono::microseconds(rng() % 300), now + 500us);
        break;
      case 2:
        wait.expect(now - 100us, now + std::chrono::microseconds(rng() % 200));
        break;
      default:
        break;
    }
    if (rng() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
    {
      std::lock_guard lock(q.mutex);
      q.items.push_back(i);
    }
    wait.notify_one();
  }
  {
    std::lock_guard lock(q.mutex);
    q.stop = true;
  }
  wait.notify_all();
  worker.join();
  EXPECT_EQ(taken, n);
  EXPECT_TRUE(in_order);
}

TEST(HandoffWait, LosesNoHandOverAsleepOrHot) {
  hand_over_everything(false, 0us, 1);
  hand_over_everything(true, 0us, 2);
  hand_over_everything(true, 200us, 3);
}

TEST(HandoffWait, WakesForAnExpectationSetWhileAsleepAndPollsThrough) {
  Queue q;
  HandoffWait wait(q.mutex, q.cv, true, 0us);
  std::atomic<bool> done{false};
  std::thread worker([&] {
    std::unique_lock lock(q.mutex);
    wait.wait(lock, [&] { return q.stop; });
    done = true;
  });
  // Nothing expected: the worker sleeps without a deadline and never polls.
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(wait.stats()["hot_waits"].get<std::uint64_t>(), 0u);
  EXPECT_GE(wait.stats()["sleeps"].get<std::uint64_t>(), 1u);
  // Expected from 10 ms on, worth polling for 200 ms: it must wake by itself and poll.
  const auto from = Clock::now() + 10ms;
  wait.expect(from, from + 200ms);
  std::this_thread::sleep_for(60ms);
  const nlohmann::json hot = wait.stats();
  EXPECT_GE(hot["hot_waits"].get<std::uint64_t>(), 1u) << hot.dump();
  std::this_thread::sleep_for(20ms);  // still polling, not asleep again
  EXPECT_EQ(wait.stats()["sleeps"], hot["sleeps"]) << wait.stats().dump();
  EXPECT_FALSE(done);
  // A stop handed over while it polls ends the wait.
  {
    std::lock_guard lock(q.mutex);
    q.stop = true;
  }
  wait.notify_one();
  worker.join();
  EXPECT_TRUE(done);
  // It polled from the expectation (10 ms) to the stop (80 ms).
  EXPECT_GT(wait.stats()["hot_seconds"].get<double>(), 0.04) << wait.stats().dump();
}

TEST(HandoffWait, SleepModeNeverPolls) {
  Queue q;
  HandoffWait wait(q.mutex, q.cv, false, 1000us);
  std::thread worker([&] {
    std::unique_lock lock(q.mutex);
    wait.wait(lock, [&] { return q.stop; });
  });
  const auto now = Clock::now();
  wait.expect(now, now + 100ms);
  std::this_thread::sleep_for(20ms);
  {
    std::lock_guard lock(q.mutex);
    q.stop = true;
  }
  wait.notify_one();
  worker.join();
  EXPECT_EQ(wait.stats()["hot_waits"].get<std::uint64_t>(), 0u);
}

}  // namespace
}  // namespace gpusearch::wire
