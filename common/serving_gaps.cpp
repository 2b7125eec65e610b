#include "common/serving_gaps.hpp"

#include <chrono>

namespace gpusearch {

namespace {
thread_local double this_thread_paused = 0;
}  // namespace

double ServingGaps::this_thread_paused_seconds() {
  return this_thread_paused;
}

void ServingGaps::call_begins() noexcept {
  // The counter first: background work sees the call at its next pause point without the lock.
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  calls_.fetch_add(1, std::memory_order_relaxed);
}

void ServingGaps::call_ends() noexcept {
  {
    // Under the lock, so that a thread between its check and its wait cannot miss the wake-up.
    std::lock_guard lock(mutex_);
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  }
  gap_.notify_all();
}

void ServingGaps::stop() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopped_.store(true, std::memory_order_relaxed);
  }
  gap_.notify_all();
}

void ServingGaps::wake_waiters() noexcept {
  { std::lock_guard lock(mutex_); }  // a waiter between its check and its wait sees the flag
  gap_.notify_all();
}

bool ServingGaps::wait_for_gap(const std::atomic<bool>& cancelled) {
  return wait_for_gap_impl(&cancelled);
}

bool ServingGaps::wait_for_gap_impl(const std::atomic<bool>* cancelled) {
  const auto is_cancelled = [&] {
    return stopped_.load(std::memory_order_relaxed) ||
           (cancelled && cancelled->load(std::memory_order_acquire));
  };
  std::unique_lock lock(mutex_);
  if (is_cancelled()) return false;
  if (in_flight_.load(std::memory_order_acquire) == 0) return true;
  const auto t0 = std::chrono::steady_clock::now();
  ++pauses_;
  ++waiting_;
  gap_.wait(lock, [&] { return in_flight_.load(std::memory_order_acquire) == 0 || is_cancelled(); });
  --waiting_;
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  paused_seconds_ += waited;
  this_thread_paused += waited;
  return !is_cancelled();
}

std::uint64_t ServingGaps::calls() const {
  return calls_.load(std::memory_order_relaxed);
}

std::uint64_t ServingGaps::pauses() const {
  std::lock_guard lock(mutex_);
  return pauses_;
}

double ServingGaps::paused_seconds() const {
  std::lock_guard lock(mutex_);
  return paused_seconds_;
}

unsigned ServingGaps::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_;
}

}  // namespace gpusearch
