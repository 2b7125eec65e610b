// Background work that runs only in the gaps between serving calls (the online list-cache
// policy's replay and planning). The H100 drift runs showed why a lower scheduling class is not
// enough: the planner's threads at SCHED_IDLE still ran beside the calls' CPU post-processing
// (on the other hardware thread of a core, or between its wake-ups) and cost 3-5% of the busy
// rate for plans the gate then withheld. So the engine marks its calls (call_begins/call_ends,
// never blocking) and the background work calls pause_point() often: it returns at once between
// calls and blocks while a call is in flight. A call never waits for the background work; the
// work stops at its next pause point (one replayed query, or a few thousand steps of a plan).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace gpusearch {

class ServingGaps {
 public:
  // The serving side: a call starts / ends. Never waits for the background work. Calls may
  // overlap (several engine threads): the gap starts when the last one ends.
  void call_begins() noexcept;
  void call_ends() noexcept;
  // The background side, called often: returns true at once while no call is in flight; while
  // one is, blocks until none is. Returns false once stop() was called (the caller should cut
  // its work short; it never blocks again).
  bool pause_point() {
    if (in_flight_.load(std::memory_order_acquire) == 0)
      return !stopped_.load(std::memory_order_relaxed);
    return wait_for_gap_impl(nullptr);
  }
  void stop() noexcept;  // wakes every paused thread; pause_point() no longer blocks

  // For a waiter with a stop of its own (the cache swapper): blocks while a call is in flight,
  // until `cancelled` is set and wake_waiters() called. false: cancelled or stopped.
  bool wait_for_gap(const std::atomic<bool>& cancelled);
  void wake_waiters() noexcept;

  bool in_call() const { return in_flight_.load(std::memory_order_acquire) > 0; }
  std::uint64_t calls() const;    // calls begun
  std::uint64_t pauses() const;   // times a pause point found a call in flight and waited
  double paused_seconds() const;  // summed over the waiting threads
  unsigned waiting() const;       // threads waiting at a pause point now (tests)
  // Seconds the calling thread has waited at pause points (of any ServingGaps): lets a worker
  // time its own work without its pauses.
  static double this_thread_paused_seconds();

  // Marks one call in flight for its scope (nullptr: nothing).
  class Call {
   public:
    explicit Call(ServingGaps* gaps) noexcept : gaps_(gaps) {
      if (gaps_) gaps_->call_begins();
    }
    ~Call() {
      if (gaps_) gaps_->call_ends();
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    ServingGaps* gaps_;
  };

 private:
  bool wait_for_gap_impl(const std::atomic<bool>* cancelled);
  std::atomic<int> in_flight_{0};
  std::atomic<bool> stopped_{false};
  mutable std::mutex mutex_;
  std::condition_variable gap_;
  std::atomic<std::uint64_t> calls_{0};
  std::uint64_t pauses_ = 0;
  double paused_seconds_ = 0;
  unsigned waiting_ = 0;
};

}  // namespace gpusearch
