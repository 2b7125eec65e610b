#include "common/wire/handoff_wait.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace gpusearch::wire {

void HandoffWait::expect(Clock::time_point from, Clock::time_point until) {
  const std::int64_t f = ns(from), u = ns(until);
  if (from_ns_.load(std::memory_order_relaxed) == f &&
      until_ns_.load(std::memory_order_relaxed) == u)
    return;
  until_ns_.store(u, std::memory_order_relaxed);
  from_ns_.store(f);
  if (!hot_) return;
  // A worker asleep past the new start must wake for it (see wait()). Taking the mutex first:
  // a worker that has announced its sleep holds it until the condition variable's wait.
  const std::int64_t asleep = asleep_until_ns_.load();
  if (asleep != kNotAsleep && asleep > f) {
    { std::lock_guard lock(mutex_); }
    cv_.notify_all();
  }
}

HandoffWait::Clock::time_point HandoffWait::hot_until(Clock::time_point now) const {
  Clock::time_point end = last_job_ + linger_;
  const auto from = at(from_ns_.load(std::memory_order_relaxed));
  const auto until = at(until_ns_.load(std::memory_order_relaxed));
  if (from <= now && now < until) end = std::max(end, until);
  return end;
}

HandoffWait::Clock::time_point HandoffWait::next_from(Clock::time_point now, std::int64_t from_ns) {
  const auto from = at(from_ns);
  return from > now ? from : Clock::time_point::max();
}

nlohmann::json HandoffWait::stats() const {
  return {{"hot", hot_},
          {"linger_us", linger_.count()},
          {"hot_waits", hot_waits_.load(std::memory_order_relaxed)},
          {"hot_seconds", double(hot_ns_.load(std::memory_order_relaxed)) / 1e9},
          {"sleeps", sleeps_.load(std::memory_order_relaxed)}};
}

}  // namespace gpusearch::wire
