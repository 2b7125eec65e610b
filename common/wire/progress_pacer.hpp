// How a rank's MPI thread waits when a polling round (MPI_Iprobe, MPI_Test) found nothing to do.
// Open MPI's shared-memory and TCP transports make progress only while some thread polls, and a
// blocking call (MPI_Probe, MPI_Wait) polls inside the library: it spins a core. Issue 16
// measured the old answer, a sleep that doubles from 50 us to 1 ms, at ~4.5 ms of broadcast and
// ~4.5 ms of gather per batch. The modes, chosen per run (--progress) and compared by
// launch/bench-cluster-overhead.sh:
//   spin      poll without sleeping (a yield between rounds, as Open MPI's own blocking calls do
//             when a node is oversubscribed): reacts in microseconds, costs a core.
//   backoff   the old sleep that doubles from 50 us to 1 ms: costs nothing idle, reacts late.
//   adaptive  (default) poll while the rank is hot: within spin_us of its last activity, or
//             while the caller says a message is due (its own sends unfinished, a result
//             predicted from measured service times). Hot, it yields and polls (hot_poll_us 0,
//             the default) or polls every hot_poll_us, sleeping in between with the thread's
//             timer slack cut to 1 us. Otherwise it sleeps until the caller's next due time, at
//             most max_sleep_us, and leaves the cores to the engines, which a spinning thread
//             does not (on the 2-core machine spin polled 12x as often per batch and slowed the
//             engine most in most runs). Yielding only while hot reacts as spin does where the
//             callers predict their messages well (just-in-time admission): the aggregator's
//             overhead per batch of 64 fell from 0.28 to 0.12 ms (one ISN, H100 host) and from
//             0.19 to 0.15 ms (2-core machine) against 20 us sleeps, with throughput equal or
//             better on the 2-core machine (tests/benchmarks/NOTES-cluster.md, issue 16). Either
//             sleep is a condition variable that local events (a finished batch, a new query
//             line) end at once through notify().
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace gpusearch::wire {

enum class ProgressMode { kAdaptive, kSpin, kBackoff };
enum class BusyPoll { kOff, kSending, kHot };
BusyPoll parse_busy_poll(std::string_view name);  // throws Error on an unknown name
std::string_view to_string(BusyPoll b);
ProgressMode parse_progress_mode(std::string_view name);  // throws Error on an unknown name
std::string_view to_string(ProgressMode m);

struct ProgressOptions {
  ProgressMode mode = ProgressMode::kAdaptive;
  unsigned spin_us = 200;          // adaptive: stay hot this long after any activity
  unsigned hot_poll_us = 0;        // adaptive: the polling period while hot; 0: yield and poll
  unsigned max_sleep_us = 1000;    // adaptive: longest sleep when nothing is due
  unsigned backoff_first_us = 50;  // backoff: first sleep (doubles to max_sleep_us)
  // --handoff: whether the worker threads (the aggregator's merge thread, the ISN's engine
  // thread) poll around the moments work is due (common/wire/handoff_wait.hpp); never in
  // backoff mode.
  bool hot_handoff = true;
  // --busy-poll: which polling rounds skip the yield (not in backoff mode). A yield on a node
  // whose cores the engines take can leave the MPI thread off a core for a scheduler slice: four
  // ISNs' answers took about 1 ms from encoded to received on the H200 host, one ISN's 0.13 ms
  // (session 45), where the aggregator's loop managed 5x fewer rounds a hot second. kSending:
  // while the rank's own sends are unfinished (above Open MPI's shared-memory eager limit and
  // without its single-copy transport, a message moves only while its sender polls); kHot: every
  // hot round (the aggregator expecting answers, an ISN its next batch, and kSending's).
  BusyPoll busy_poll = BusyPoll::kOff;
  // --mpi-thread-nice: the polling thread's nice value, set at its first idle round (after the
  // rank's other threads have started, so that they keep theirs). Session 46 measured the
  // aggregator's main thread runnable without a core for 5-6 ms of every 12-15 ms batch at batch
  // 1,024 on the H200 host (its run delay), and the answers waiting for it: a negative value
  // weighs it above the engines' threads. Below 0 needs CAP_SYS_NICE. 0: unchanged.
  int thread_nice = 0;
  bool handoff_hot() const { return hot_handoff && mode != ProgressMode::kBackoff; }
};

class ProgressPacer {
 public:
  using Clock = std::chrono::steady_clock;
  // Construct on the thread that polls: it lowers that thread's timer slack (adaptive).
  explicit ProgressPacer(ProgressOptions options);

  // The last polling round did something: stay hot for spin_us.
  void activity(Clock::time_point now) {
    note_round(now);
    returned_ = now;
    last_activity_ = now;
    backoff_round_ = 0;
  }
  // Nothing to do this round. `due_at`: when the caller next expects something (a message, a
  // batch cut, a scheduled arrival); Clock::time_point::max() if nothing. `hot`: the caller
  // needs polling now (its own sends unfinished, a message overdue). `sending`: its own sends
  // are unfinished (with --busy-poll sending or hot the round returns at once, without a yield).
  void idle(Clock::time_point now, Clock::time_point due_at, bool hot, bool sending = false);
  // From another thread: local work is ready; a sleeping idle() returns at once.
  void notify();

  // Work counted, for the metrics: polling rounds that found nothing, sleeps and their time.
  nlohmann::json stats() const;
  const ProgressOptions& options() const { return options_; }

 private:
  void sleep_until(Clock::time_point until);
  // A caller's round (from the pacer's last return to its next call) or a yield that lasted
  // kLongUs or more: the rank did not poll for that long, busy with its own work (a round) or
  // off a core (a yield). Counted for the metrics.
  static constexpr std::uint64_t kLongUs = 200;
  void note_round(Clock::time_point now) {
    if (returned_ == Clock::time_point{}) return;
    const auto us = std::uint64_t(
        std::chrono::duration_cast<std::chrono::microseconds>(now - returned_).count());
    if (us < kLongUs) return;
    ++long_rounds_;
    long_round_us_ += us;
    max_round_us_ = std::max(max_round_us_, us);
  }
  void hot_yield();
  void apply_thread_nice();  // once, from the first idle()

  ProgressOptions options_;
  Clock::time_point last_activity_{};
  unsigned backoff_round_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool notified_ = false;
  std::uint64_t idle_rounds_ = 0, hot_rounds_ = 0, sleeps_ = 0, slept_us_ = 0, woken_early_ = 0,
                busy_rounds_ = 0;
  bool nice_applied_ = false;
  std::string nice_problem_;
  Clock::time_point returned_{};  // when control last went back to the caller
  std::uint64_t long_rounds_ = 0, long_round_us_ = 0, max_round_us_ = 0;
  std::uint64_t long_yields_ = 0, long_yield_us_ = 0, max_yield_us_ = 0;
};

}  // namespace gpusearch::wire
