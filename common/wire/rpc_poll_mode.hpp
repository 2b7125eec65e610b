// How a Cap'n Proto (kj) event loop waits for its next event (issue 14: the RPC front end's
// added latency). Between requests a kj loop sleeps in epoll; at 100-400 requests/s each request
// then pays a wake-up and finds the RPC code path cold, which is most of the loopback round trip
// (tests/benchmarks/NOTES-frontend.md). Polling the loop without sleeping removes the wake-up
// at the cost of a core:
// - block: sleep in epoll whenever there is nothing to run (kj's own behaviour);
// - spin: never sleep, poll the loop (epoll with a zero timeout) all the time: a core per loop;
// - adaptive: poll while requests are in flight, for at most `spin` after the loop's last
//   event, and for a short grace after any event; sleep otherwise (spin-then-block, as
//   Seastar- or DPDK-style servers do). An idle loop costs nothing.
// The aggregator's front end, bench_rpc_floor and `gpusearch query`/`gpusearch load` take
// `--rpc-poll block|adaptive|spin` and `--rpc-spin-us`. Apart from rpc_polling.hpp so that option
// structs need no kj header.
#pragma once

#include <chrono>
#include <string>

namespace gpusearch {

enum class RpcPollMode { kBlock, kAdaptive, kSpin };

// "block", "adaptive" or "spin"; anything else throws InputError naming `flag` and the choices.
RpcPollMode parse_rpc_poll_mode(const std::string& value, const std::string& flag = "--rpc-poll");
const char* rpc_poll_mode_name(RpcPollMode mode);

struct RpcPolling {
  // The default: on a host whose cores are all busy (the 2-core build VM) polling took CPU from
  // the ISNs and saved nothing (tests/benchmarks/NOTES-frontend.md).
  RpcPollMode mode = RpcPollMode::kBlock;
  // adaptive: while requests are in flight, poll up to this long after the loop's last event.
  std::chrono::microseconds spin{5000};
  // adaptive: with nothing in flight, poll this long after an event (a reply's write, the
  // next request of a burst) before sleeping.
  std::chrono::microseconds grace{50};
};

}  // namespace gpusearch
