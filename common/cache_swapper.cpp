#include "common/cache_swapper.hpp"

#include <chrono>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/online_cache_policy.hpp"

namespace gpusearch {

const char* to_string(CacheSwapTiming t) {
  return t == CacheSwapTiming::kGaps ? "gaps" : "calls";
}

CacheSwapTiming parse_cache_swap_timing(const std::string& s) {
  if (s == "gaps") return CacheSwapTiming::kGaps;
  if (s == "calls") return CacheSwapTiming::kCalls;
  throw InputError("--cache-swap", 0, "must be gaps or calls, not '" + s + "'");
}

CacheSwapper::CacheSwapper(OnlineCachePolicy& policy, std::mutex& engine_mutex, Apply apply)
    : policy_(policy), engine_mutex_(engine_mutex), apply_(std::move(apply)) {
  thread_ = std::thread([this] { run(); });
}

CacheSwapper::~CacheSwapper() {
  stop_.store(true, std::memory_order_release);
  policy_.serving_gaps()->wake_waiters();
  thread_.join();  // wait_plan returns within its timeout
}

void CacheSwapper::run() {
  using Clock = std::chrono::steady_clock;
  ServingGaps& gaps = *policy_.serving_gaps();
  while (!stop_.load(std::memory_order_acquire)) {
    // holding_ is set under the policy's lock as the plan is taken: settle() never misses it.
    auto plan = policy_.wait_plan(std::chrono::milliseconds(20), &holding_);
    if (!plan) continue;
    const auto t0 = Clock::now();
    while (true) {
      if (!gaps.wait_for_gap(stop_)) {
        holding_.store(false, std::memory_order_release);
        return;
      }
      std::unique_lock lock(engine_mutex_);
      // A call marked itself between the gap and the lock: it goes first.
      if (gaps.in_call()) {
        lock.unlock();
        std::lock_guard s(stats_mutex_);
        ++gave_way_;
        continue;
      }
      const auto t1 = Clock::now();
      apply_(std::move(*plan));
      const auto t2 = Clock::now();
      lock.unlock();
      std::lock_guard s(stats_mutex_);
      ++swaps_;
      gap_wait_seconds_ += std::chrono::duration<double>(t1 - t0).count();
      apply_seconds_ += std::chrono::duration<double>(t2 - t1).count();
      break;
    }
    holding_.store(false, std::memory_order_release);
  }
}

void CacheSwapper::settle() const {
  // Polls: a plan may be made at any time by the policy's thread; settling is for tests and
  // benchmarks between calls, not the serving path. has_plan() first: see wait_plan's `taken`.
  while (policy_.has_plan() || holding_.load(std::memory_order_acquire)) {
    if (stop_.load(std::memory_order_acquire)) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

nlohmann::json CacheSwapper::stats() const {
  std::lock_guard s(stats_mutex_);
  return {{"swap", "gaps"},
          {"swaps", swaps_},
          {"gave_way", gave_way_},
          {"apply_seconds", apply_seconds_},
          {"gap_wait_seconds", gap_wait_seconds_}};
}

}  // namespace gpusearch
