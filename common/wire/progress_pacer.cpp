#include "common/wire/progress_pacer.hpp"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace gpusearch::wire {

ProgressMode parse_progress_mode(std::string_view name) {
  if (name == "adaptive") return ProgressMode::kAdaptive;
  if (name == "spin") return ProgressMode::kSpin;
  if (name == "backoff") return ProgressMode::kBackoff;
  throw Error("unknown progress mode '" + std::string(name) + "' (adaptive, spin or backoff)");
}

std::string_view to_string(ProgressMode m) {
  switch (m) {
    case ProgressMode::kAdaptive:
      return "adaptive";
    case ProgressMode::kSpin:
      return "spin";
    case ProgressMode::kBackoff:
      return "backoff";
  }
  return "?";
}

ProgressPacer::ProgressPacer(ProgressOptions options) : options_(options) {
  // Linux rounds a sleeping thread's wake-up up by its timer slack (50 us by default): a 20 us
  // poll would last 70 us. 1 us costs nothing measurable at these rates.
  if (options_.mode == ProgressMode::kAdaptive) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

BusyPoll parse_busy_poll(std::string_view name) {
  if (name == "off") return BusyPoll::kOff;
  if (name == "sending") return BusyPoll::kSending;
  if (name == "hot") return BusyPoll::kHot;
  throw Error("--busy-poll: unknown value '" + std::string(name) + "' (off, sending or hot)");
}

std::string_view to_string(BusyPoll b) {
  switch (b) {
    case BusyPoll::kOff:
      return "off";
    case BusyPoll::kSending:
      return "sending";
    case BusyPoll::kHot:
      return "hot";
  }
  return "?";
}

void ProgressPacer::idle(Clock::time_point now, Clock::time_point due_at, bool hot,
                         bool sending) {
  if (!nice_applied_) apply_thread_nice();
  note_round(now);
  struct MarkReturn {  // the caller's next round starts when this call returns
    Clock::time_point& returned;
    ~MarkReturn() { returned = Clock::now(); }
  } mark_return{returned_};
  ++idle_rounds_;
  if (options_.mode != ProgressMode::kBackoff && options_.busy_poll != BusyPoll::kOff) {
    const auto spin = std::chrono::microseconds(options_.spin_us);
    const bool hot_round = options_.mode == ProgressMode::kSpin || hot ||
                           now - last_activity_ < spin || due_at <= now + spin;
    if (sending || (options_.busy_poll == BusyPoll::kHot && hot_round)) {
      ++busy_rounds_;
      return;
    }
  }
  switch (options_.mode) {
    case ProgressMode::kSpin:
      ++hot_rounds_;
      hot_yield();
      return;
    case ProgressMode::kBackoff: {
      const std::uint64_t us = std::min<std::uint64_t>(
          options_.max_sleep_us, std::uint64_t(options_.backoff_first_us)
                                     << std::min(backoff_round_, 4u));
      ++backoff_round_;
      sleep_until(now + std::chrono::microseconds(us));
      return;
    }
    case ProgressMode::kAdaptive:
      break;
  }
  const auto spin = std::chrono::microseconds(options_.spin_us);
  if (hot || now - last_activity_ < spin || due_at <= now + spin) {
    ++hot_rounds_;
    if (options_.hot_poll_us == 0)
      hot_yield();
    else
      sleep_until(now + std::chrono::microseconds(options_.hot_poll_us));
    return;
  }
  // Sleep until spin_us before the next due time, so the rank is polling when it comes.
  sleep_until(std::min(due_at - spin, now + std::chrono::microseconds(options_.max_sleep_us)));
}

void ProgressPacer::apply_thread_nice() {
  nice_applied_ = true;
  if (options_.thread_nice == 0) return;
  // Linux: a nice value per thread (PRIO_PROCESS with the thread's id).
  if (::setpriority(PRIO_PROCESS, ::gettid(), options_.thread_nice) != 0) {
    nice_problem_ = std::string(std::strerror(errno)) +
                    (errno == EACCES || errno == EPERM ? " (below 0 needs CAP_SYS_NICE)" : "");
    std::cerr << "gpusearch: --mpi-thread-nice " << options_.thread_nice << ": " << nice_problem_
              << "; the MPI thread keeps its priority\n";
  }
}

void ProgressPacer::hot_yield() {
  const auto t0 = Clock::now();
  std::this_thread::yield();
  const auto us = std::uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count());
  if (us < kLongUs) return;
  ++long_yields_;
  long_yield_us_ += us;
  max_yield_us_ = std::max(max_yield_us_, us);
}

void ProgressPacer::sleep_until(Clock::time_point until) {
  const auto t0 = Clock::now();
  if (until <= t0) return;
  std::unique_lock lock(mutex_);
  ++sleeps_;
  if (cv_.wait_until(lock, until, [&] { return notified_; })) ++woken_early_;
  notified_ = false;
  slept_us_ += std::uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count());
}

void ProgressPacer::notify() {
  {
    std::lock_guard lock(mutex_);
    notified_ = true;
  }
  cv_.notify_one();
}

nlohmann::json ProgressPacer::stats() const {
  return {{"mode", std::string(to_string(options_.mode))},
          {"spin_us", options_.spin_us},
          {"max_sleep_us", options_.max_sleep_us},
          {"idle_rounds", idle_rounds_},
          {"hot_poll_us", options_.hot_poll_us},
          {"hot_rounds", hot_rounds_},
          {"sleeps", sleeps_},
          {"slept_seconds", double(slept_us_) / 1e6},
          {"woken_early", woken_early_},
          {"busy_poll", std::string(to_string(options_.busy_poll))},
          {"busy_rounds", busy_rounds_},
          {"thread_nice", options_.thread_nice},
          {"thread_nice_error", nice_problem_},
          // Spells without a poll (ProgressPacer::kLongUs or more): the caller's own work
          // between polls, and yields that came back late (the thread off a core).
          {"long_rounds", long_rounds_},
          {"long_round_seconds", double(long_round_us_) / 1e6},
          {"max_round_us", max_round_us_},
          {"long_yields", long_yields_},
          {"long_yield_seconds", double(long_yield_us_) / 1e6},
          {"max_yield_us", max_yield_us_}};
}

}  // namespace gpusearch::wire
