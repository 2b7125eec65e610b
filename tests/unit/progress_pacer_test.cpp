// ProgressPacer (common/wire/progress_pacer.hpp): how an MPI thread waits between polling rounds.
#include <gtest/gtest.h>

#include <chrono>

#include <nlohmann/json.hpp>

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
  EXPECT_EQ(s["busy_send_rounds"], 0);
  EXPECT_EQ(s["send_polling"], "yield");
}

// Its own sends unfinished: hot (a yield, no sleep) by default; with --send-polling busy the
// round returns at once and is counted as a busy send round, not a hot one. Backoff ignores it.
TEST(ProgressPacer, BusySendPollingSkipsTheYieldOnlyWhileSending) {
  for (const bool busy : {false, true}) {
    ProgressOptions o;
    o.busy_while_sending = busy;
    ProgressPacer pacer(o);
    pacer.activity(Clock::now() - std::chrono::seconds(1));
    for (int i = 0; i < 100; ++i)
      pacer.idle(Clock::now(), Clock::time_point::max(), /*hot*/ true, /*sending*/ true);
    const nlohmann::json s = pacer.stats();
    EXPECT_EQ(s["sleeps"], 0) << busy;
    EXPECT_EQ(s["busy_send_rounds"], busy ? 100 : 0);
    EXPECT_EQ(s["hot_rounds"], busy ? 0 : 100);
    EXPECT_EQ(s["send_polling"], busy ? "busy" : "yield");
    // Not sending: the same as without the option (hot here: a yield).
    pacer.idle(Clock::now(), Clock::time_point::max(), /*hot*/ true, /*sending*/ false);
    EXPECT_EQ(pacer.stats()["hot_rounds"], busy ? 1 : 101);
  }
  ProgressOptions o;
  o.mode = ProgressMode::kBackoff;
  o.busy_while_sending = true;
  o.backoff_first_us = 10;
  ProgressPacer pacer(o);
  pacer.idle(Clock::now(), Clock::time_point::max(), true, true);
  EXPECT_EQ(pacer.stats()["busy_send_rounds"], 0);
  EXPECT_EQ(pacer.stats()["sleeps"], 1);
}

}  // namespace
}  // namespace gpusearch::wire
