// The aggregator's live front end (issue 14): a Cap'n Proto RPC server (common/wire/
// frontend.capnp) on its own kj event-loop thread, and the query source it feeds. A search
// request becomes a query of the MPI loop as a line of a query file does, with its own mode, k,
// scoring and deadline; the merge thread's answer goes back to the event loop through post(). A
// request's deadline is enforced: when it passes first, the client gets a deadline-exceeded
// answer (no hits) at once.
// Bounded: at most max_requests requests admitted and unanswered over all clients and
// max_per_client per connection; past that a request fails at once with an OVERLOADED error that
// names the limit, never queued. Each message is read under a traversal and a nesting limit.
// Shutdown needs the operator token the aggregator writes to its token file (mode 0600: only its
// own user, on its own host, can read it).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "aggregator/front_end_options.hpp"
#include "aggregator/query_source.hpp"

namespace gpusearch {

class RpcQuerySource final : public QuerySource {
 public:
  // `defaults`: the cluster's mode, k, scoring and alpha for what a request leaves unset.
  // `on_request` wakes the MPI thread. Listening when it returns; throws Error naming the
  // address when it cannot listen.
  RpcQuerySource(FrontEndOptions options, SearchParams defaults, std::function<void()> on_request);
  ~RpcQuerySource() override;  // lets replies go out, then stops the event loop

  const std::string& name() const override { return name_; }
  void poll(AggregatorClock::time_point start, AggregatorClock::time_point now, std::size_t room,
            std::vector<ArrivedQuery>& out) override;
  bool exhausted() const override;
  std::vector<QueryProblem> take_problems() override { return {}; }
  void answered(std::uint64_t ticket, const CachedAnswer& answer, bool partial,
                AggregatorClock::time_point arrival) override;
  void rejected(std::uint64_t ticket, const QueryProblem& problem) override;
  nlohmann::json stats() const override;

  // Ends the run as an operator's shutdown request does (SIGTERM): no new request is admitted,
  // those admitted are answered.
  void request_stop();
  const std::string& bound_address() const { return bound_; }

  struct Impl;  // the kj side (rpc_front_end.cpp)

 private:
  std::string name_ = "rpc";
  std::unique_ptr<Impl> impl_;
  std::string bound_;
};

// Set by the aggregator's SIGTERM handler; an RPC source stops when it sees it.
extern std::atomic<bool> g_stop_requested;

}  // namespace gpusearch
