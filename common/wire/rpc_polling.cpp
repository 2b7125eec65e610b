#include "common/wire/rpc_polling.hpp"

#include <sched.h>

#include "common/error.hpp"

namespace gpusearch {

RpcPollMode parse_rpc_poll_mode(const std::string& value, const std::string& flag) {
  if (value == "block") return RpcPollMode::kBlock;
  if (value == "adaptive") return RpcPollMode::kAdaptive;
  if (value == "spin") return RpcPollMode::kSpin;
  throw InputError(flag, 0,
                   "unknown polling mode '" + value + "': expected block, adaptive or spin");
}

const char* rpc_poll_mode_name(RpcPollMode mode) {
  switch (mode) {
    case RpcPollMode::kBlock:
      return "block";
    case RpcPollMode::kAdaptive:
      return "adaptive";
    case RpcPollMode::kSpin:
      return "spin";
  }
  return "?";
}

LoopPoller::LoopPoller(kj::WaitScope& wait_scope, RpcPolling polling)
    : wait_scope_(wait_scope), polling_(polling), last_activity_(Clock::now()) {}

void LoopPoller::note_activity() {
  if (polling_.mode == RpcPollMode::kBlock) return;  // sleeps until the next event anyway
  last_activity_ = Clock::now();
  wake();  // back to polling: its answer follows within the spin time
}

void LoopPoller::wake() {
  if (wake_) {
    wake_->fulfill();
    wake_ = nullptr;
  }
}

void LoopPoller::yield_core() {
  sched_yield();
}

bool LoopPoller::keep_polling(const std::function<bool()>& busy) {
  switch (polling_.mode) {
    case RpcPollMode::kBlock:
      return false;
    case RpcPollMode::kSpin:
      return true;
    case RpcPollMode::kAdaptive:
      break;
  }
  const auto idle = Clock::now() - last_activity_;
  return idle < polling_.grace || (idle < polling_.spin && busy());
}

void LoopPoller::run_until(const std::function<bool()>& done, const std::function<bool()>& busy) {
  for (;;) {
    if (polling_.mode != RpcPollMode::kBlock) {
      do {
        wait_scope_.poll();  // runs what is ready, reads the sockets without sleeping
        if (done()) return;
        yield_core();
      } while (keep_polling(busy));
    }
    if (done()) return;
    auto bell = kj::newPromiseAndFulfiller<void>();
    wake_ = kj::mv(bell.fulfiller);
    bell.promise.wait(wait_scope_);  // sleeps in epoll until a callback calls note_activity()
  }
}

std::string bound_address(const std::string& listen, unsigned port) {
  if (listen.rfind("unix:", 0) == 0) return listen;
  return listen.substr(0, listen.rfind(':')) + ":" + std::to_string(port);
}

}  // namespace gpusearch
