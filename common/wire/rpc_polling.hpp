// Runs a kj event loop under an RpcPolling (common/wire/rpc_poll_mode.hpp: block, adaptive,
// spin).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <kj/async.h>

#include "common/wire/rpc_poll_mode.hpp"

namespace gpusearch {

// One thread's kj event loop under an RpcPolling. Not thread-safe: the loop's thread only.
class LoopPoller {
 public:
  using Clock = std::chrono::steady_clock;
  LoopPoller(kj::WaitScope& wait_scope, RpcPolling polling);

  // Something happened on the loop (a request arrived, an answer came): adaptive polling goes on
  // for `spin` or `grace` after it, and a loop asleep in run_until wakes up. Call from the
  // loop's callbacks.
  void note_activity();
  // Wakes a loop asleep in run_until (whatever the mode): done() may hold now.
  void wake();

  // Runs the loop until done() holds. busy(): requests are in flight (adaptive polls while it
  // holds). Asleep, it wakes on wake() (and, polling, on note_activity()): whatever makes done()
  // true must call wake().
  void run_until(const std::function<bool()>& done, const std::function<bool()>& busy);

  // Waits for `promise` under the policy (a client's wait for its next send or its answers);
  // busy() as above. Asleep, it wakes when `promise` resolves.
  template <typename T>
  T wait(kj::Promise<T>&& promise, const std::function<bool()>& busy) {
    if (polling_.mode != RpcPollMode::kBlock)
      while (!promise.poll(wait_scope_)) {
        if (!keep_polling(busy)) break;
        yield_core();
      }
    return promise.wait(wait_scope_);
  }

  const RpcPolling& polling() const { return polling_; }

 private:
  static void yield_core();  // sched_yield(): a runnable thread on this core goes first
  bool keep_polling(const std::function<bool()>& busy);

  kj::WaitScope& wait_scope_;
  RpcPolling polling_;
  Clock::time_point last_activity_;
  kj::Own<kj::PromiseFulfiller<void>> wake_;
};

// What a listener on `listen` (kj's address syntax: ADDR:PORT, or unix:PATH for a Unix-domain
// socket) can be reached at once bound: ADDR and the port it got (`port`, for port 0), or the
// unix: address itself (a Unix socket has no port).
std::string bound_address(const std::string& listen, unsigned port);


}  // namespace gpusearch
