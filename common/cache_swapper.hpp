// Applies the online list-cache policy's plans to the engine's cache in the gaps between serving
// calls, on a thread of its own (issue 10, session 30). Before, the engine took the newest plan
// at the start of its next call (GpuEngine::Impl::start_call), so every swap (the packing from
// the mapped shard, the copies, the move kernel: 7-104 MB a change on the H100's 2.5M index)
// was served inside a call: the H100 drift runs lost about 10% of the busy rate to it even where
// the online cache hit more than the offline plan (0.898x; tests/benchmarks/NOTES-list-cache.md).
// A serving engine idles between calls for most of a live stream, so the swap goes there:
//   - the swapper waits for a plan (OnlineCachePolicy::wait_plan), then for a gap (no call
//     marked in flight: ServingGaps), then takes the engine's call mutex and applies it;
//   - a call that marked itself in the meantime goes first (the swapper lets go of the mutex
//     and waits for the next gap);
//   - a call that arrives while a swap is being applied waits for it on the mutex: the one cost
//     left, counted (calls_waited, call_wait_seconds) by the engine, which times its lock.
// The engine's answers do not depend on when a plan goes in: a call sees the cache before or
// after a change, never a change in progress (the mutex), and every cache state is exact.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/cache_plan.hpp"

namespace gpusearch {

class OnlineCachePolicy;

// Where an online plan is applied: in the gaps between calls (a thread of its own, the default)
// or at the start of the next call (the earlier behaviour).
enum class CacheSwapTiming { kGaps, kCalls };
const char* to_string(CacheSwapTiming t);
CacheSwapTiming parse_cache_swap_timing(const std::string& s);  // "gaps" | "calls"

class CacheSwapper {
 public:
  // `apply` moves the cache toward the plan (called on the swapper's thread, with
  // `engine_mutex` held); the engine holds `engine_mutex` for each call, after marking the call
  // in the policy's serving gaps.
  using Apply = std::function<void(std::vector<CachedList>&&)>;
  CacheSwapper(OnlineCachePolicy& policy, std::mutex& engine_mutex, Apply apply);
  ~CacheSwapper();  // stops (a plan held and not applied is dropped) and joins
  CacheSwapper(const CacheSwapper&) = delete;
  CacheSwapper& operator=(const CacheSwapper&) = delete;

  // Blocks until no plan waits in the policy and none is held here (tests, benchmarks: the
  // next call then sees every plan made so far applied). A call in flight delays it.
  void settle() const;
  nlohmann::json stats() const;  // swaps, gave_way, apply_seconds, gap_wait_seconds

 private:
  void run();
  OnlineCachePolicy& policy_;
  std::mutex& engine_mutex_;
  Apply apply_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> holding_{false};  // a plan taken and not yet applied
  mutable std::mutex stats_mutex_;
  std::uint64_t swaps_ = 0, gave_way_ = 0;
  double apply_seconds_ = 0, gap_wait_seconds_ = 0;
  std::thread thread_;
};

}  // namespace gpusearch
