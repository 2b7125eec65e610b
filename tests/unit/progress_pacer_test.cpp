// ProgressPacer (common/wire/progress_pacer.hpp): how an MPI thread waits between polling rounds.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/wire/progress_pacer.hpp"

namespace gpusearch::wire {
namespace {

using Clock = ProgressPacer::Clock;

// Idle and not due for long: an adaptive pacer sleeps (to the due time, at most max_sleep_us).
TEST(ProgressPacer, AdaptiveSleepsWhenNothingIsDue) {
  ProgressOptions o;
  o.max_sleep_us = 2000;
  ProgressPacer pacer(o);
  const auto t0 = Clock::now() - std::chrono::seconds(1);  // the last activity long ago
  pacer.activity(t0);
  const auto start = Clock::now();
  pacer.idle(start, Clock::time_point::max(), /*hot*/ false);
  EXPECT_GE(Clock::now() - start, std::chrono::microseconds(1500));
  const nlohmann::json s = pacer.stats();
  EXPECT_EQ(s["sleeps"], 1);
  EXPECT_EQ(s["hot_rounds"], 0);
  EXPECT_EQ(s["busy_rounds"], 0);
  EXPECT_EQ(s["busy_poll"], "off");
}

// Its own sends unfinished: hot (a yield, no sleep) by default; with --busy-poll sending the
// round returns at once and counts as a busy round, not a hot one; not sending, as before.
// Backoff ignores it.
TEST(ProgressPacer, BusyPollSendingSkipsTheYieldOnlyWhileSending) {
  for (const BusyPoll busy : {BusyPoll::kOff, BusyPoll::kSending}) {
    const bool on = busy == BusyPoll::kSending;
    ProgressOptions o;
    o.busy_poll = busy;
    ProgressPacer pacer(o);
    pacer.activity(Clock::now() - std::chrono::seconds(1));
    for (int i = 0; i < 100; ++i)
      pacer.idle(Clock::now(), Clock::time_point::max(), /*hot*/ true, /*sending*/ true);
    const nlohmann::json s = pacer.stats();
    EXPECT_EQ(s["sleeps"], 0) << on;
    EXPECT_EQ(s["busy_rounds"], on ? 100 : 0);
    EXPECT_EQ(s["hot_rounds"], on ? 0 : 100);
    EXPECT_EQ(s["busy_poll"], on ? "sending" : "off");
    // Hot but not sending: a yield, as without the option.
    pacer.idle(Clock::now(), Clock::time_point::max(), /*hot*/ true, /*sending*/ false);
    EXPECT_EQ(pacer.stats()["hot_rounds"], on ? 1 : 101);
  }
  ProgressOptions o;
  o.mode = ProgressMode::kBackoff;
  o.busy_poll = BusyPoll::kHot;
  o.backoff_first_us = 10;
  ProgressPacer pacer(o);
  pacer.idle(Clock::now(), Clock::time_point::max(), true, true);
  EXPECT_EQ(pacer.stats()["busy_rounds"], 0);
  EXPECT_EQ(pacer.stats()["sleeps"], 1);
}

// --busy-poll hot: every hot round (hot, recent activity, or something due within spin_us)
// skips the yield; a round that is not hot still sleeps.
TEST(ProgressPacer, BusyPollHotSkipsTheYieldInEveryHotRoundOnly) {
  ProgressOptions o;
  o.busy_poll = BusyPoll::kHot;
  o.max_sleep_us = 1000;
  ProgressPacer pacer(o);
  const auto now = Clock::now();
  pacer.activity(now - std::chrono::seconds(1));
  pacer.idle(now, Clock::time_point::max(), /*hot*/ true);                      // hot
  pacer.idle(now, now + std::chrono::microseconds(50), /*hot*/ false);          // due soon
  pacer.activity(Clock::now());
  pacer.idle(Clock::now(), Clock::time_point::max(), /*hot*/ false);            // just active
  EXPECT_EQ(pacer.stats()["busy_rounds"], 3);
  EXPECT_EQ(pacer.stats()["hot_rounds"], 0);
  pacer.activity(Clock::now() - std::chrono::seconds(1));
  pacer.idle(Clock::now(), Clock::time_point::max(), /*hot*/ false);            // cold: sleeps
  EXPECT_EQ(pacer.stats()["busy_rounds"], 3);
  EXPECT_EQ(pacer.stats()["sleeps"], 1);
  EXPECT_EQ(parse_busy_poll("hot"), BusyPoll::kHot);
  EXPECT_THROW(parse_busy_poll("always"), Error);
}

// The caller's work between two polls (from idle()'s return to its next call) counts as a long
// round from ProgressPacer::kLongUs on: the metrics tell a rank busy with its own work from one
// whose yields came back late.
TEST(ProgressPacer, CountsTheCallersLongRounds) {
  ProgressOptions o;
  o.spin_us = 10'000'000;  // hot throughout: every idle() is a yield, never a sleep
  ProgressPacer pacer(o);
  pacer.activity(Clock::now());
  pacer.idle(Clock::now(), Clock::time_point::max(), /*hot*/ true);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));  // the caller's own work
  pacer.idle(Clock::now(), Clock::time_point::max(), /*hot*/ true);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  pacer.activity(Clock::now());  // a round that did something counts the same
  const nlohmann::json s = pacer.stats();
  EXPECT_GE(s["long_rounds"].get<std::uint64_t>(), 2u);
  EXPECT_GE(s["long_round_seconds"].get<double>(), 0.006);
  EXPECT_GE(s["max_round_us"].get<std::uint64_t>(), 3000u);
  EXPECT_EQ(s["hot_rounds"], 2);
  EXPECT_GE(s["long_yields"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(s["sleeps"], 0);
}

// --mpi-thread-nice: set on the polling thread at its first idle round, and reported. (A
// positive value: raising one's nice value needs no privilege.)
TEST(ProgressPacer, SetsThePollingThreadsNiceValueAtItsFirstIdleRound) {
  int before = 0, after = 0;
  nlohmann::json s;
  std::thread polling([&] {
    ProgressOptions o;
    o.thread_nice = 7;
    ProgressPacer pacer(o);
    before = ::getpriority(PRIO_PROCESS, ::gettid());
    pacer.idle(Clock::now(), Clock::time_point::max(), /*hot*/ true);
    after = ::getpriority(PRIO_PROCESS, ::gettid());
    s = pacer.stats();
  });
  polling.join();
  EXPECT_EQ(after, 7) << "before: " << before;
  EXPECT_EQ(s["thread_nice"], 7);
  EXPECT_EQ(s["thread_nice_error"], "");
  EXPECT_NE(::getpriority(PRIO_PROCESS, ::gettid()), 7);  // this thread keeps its own
}

}  // namespace
}  // namespace gpusearch::wire
