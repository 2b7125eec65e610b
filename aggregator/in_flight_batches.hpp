// The batches the aggregator has broadcast and not yet completed: each is encoded once and sent
// to every ISN with nonblocking sends that share the message; results are received by polling
// and routed to their batch by their O(1) header (the merge thread decodes the rest); a batch is
// complete when every ISN answered or its deadline passed (then the ISNs that missed it are left
// out, its answers partial, and their late results dropped by batch id when they come).
// The MPI thread alone uses this class.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aggregator/batcher.hpp"
#include "aggregator/isn_roster.hpp"
#include "aggregator/ranker_cache_coordinator.hpp"
#include "common/metrics.hpp"
#include "common/wire/mpi_transport.hpp"

namespace gpusearch {

// A batch's life at one ISN, on the aggregator's clock.
struct IsnTimes {
  AggregatorClock::time_point received, start, end, encoded, arrived;
};

struct InFlightBatch {
  std::uint64_t id = 0;
  SearchParams params;  // every query's (Batcher cuts batches of one params)
  std::vector<PendingQuery> queries;
  AggregatorClock::time_point cut, encoded, sent, deadline, sends_done, complete;
  std::size_t bytes = 0;
  std::vector<wire::PendingSend> sends;
  bool all_sent = false;
  std::vector<std::optional<wire::Received>> messages;  // by ISN (rank - 1), decoded by the merger
  std::vector<wire::ResultHeader> headers;              // read on arrival (O(1))
  std::vector<IsnTimes> times;
  std::size_t received = 0;
  std::size_t expected = 0;  // ISNs it was sent to (those not declared dead)
};

// How far apart the ISNs' answers to `b` arrived: the first to the last, us (0 with fewer than
// two answers).
double answer_spread_us_of(const InFlightBatch& b);

class InFlightBatches {
 public:
  // `deadline_ms` 0: wait for every ISN. `dead_after` (0: never): an ISN that misses this many
  // batch deadlines in a row is declared dead: reported, sent nothing more, left out at once.
  InFlightBatches(MPI_Comm world, IsnRoster& isns, std::uint64_t deadline_ms, std::string me,
                  std::uint64_t dead_after = 0);

  std::size_t size() const { return batches_.size(); }
  bool empty() const { return batches_.empty(); }
  std::size_t queries() const { return queries_; }  // in the batches in flight
  const InFlightBatch& oldest() const { return batches_.begin()->second; }
  AggregatorClock::time_point last_batch_done() const { return last_batch_done_; }
  // Some ISN has answered the newest batch in flight (and so every batch ahead of it: an ISN
  // answers in order): that ISN is idle now.
  bool newest_answered_by_one() const {
    return !batches_.empty() && batches_.rbegin()->second.received > 0;
  }
  // The send times of the batches in flight, oldest first (replaces `out`'s contents).
  void sent_times(std::vector<AggregatorClock::time_point>& out) const {
    out.clear();
    for (const auto& [id, b] : batches_) out.push_back(b.sent);
  }

  // Encodes the batch (non-empty, one params) once and starts a send of it to every ISN. Term
  // IDs travel when `term_ids` (every ISN shares the vocabulary), else the normalized terms.
  // A non-empty `ranker_plan` goes first, as a ranker-cache command for this batch, to the same
  // ISNs (MPI keeps the order of messages from one sender to one receiver).
  void broadcast(std::vector<PendingQuery> queries, AggregatorClock::time_point cut, bool term_ids,
                 const RankerCachePlan& ranker_plan = {});
  // Tests the sends still running; true if one finished. `pending`: some still run.
  bool test_sends(bool& pending);
  // Receives every result that has arrived; true if one did.
  bool receive();
  // Hands every batch that all ISNs answered, or whose deadline passed by `now`, to `done`
  // (which frees its place in the pipeline); true if one was. `due` becomes the earliest
  // deadline still ahead.
  bool complete(AggregatorClock::time_point now, const std::function<void(InFlightBatch&&)>& done,
                AggregatorClock::time_point& due);

  // Per query: how long it waited in the batcher; per batch: how long encoding took.
  const metrics::SampleSet& wait_ms() const { return wait_ms_; }
  const metrics::SampleSet& encode_ms() const { return encode_ms_; }
  nlohmann::json wire_json(bool term_ids) const;
  std::uint64_t rejected_messages() const { return rejected_messages_; }
  std::uint64_t control_messages() const { return control_messages_; }  // ranker-cache commands
  std::uint64_t control_bytes() const { return control_bytes_; }
  std::uint64_t late_discarded() const { return late_discarded_; }

 private:
  MPI_Comm world_;
  IsnRoster& isns_;
  std::uint64_t deadline_ms_;
  std::string me_;
  std::uint64_t dead_after_ = 0;
  std::map<std::uint64_t, InFlightBatch> batches_;
  std::size_t queries_ = 0;
  std::uint64_t next_batch_id_ = 1;
  AggregatorClock::time_point last_batch_done_{};
  std::uint64_t rejected_messages_ = 0, late_discarded_ = 0, bytes_sent_ = 0, messages_sent_ = 0,
                bytes_received_ = 0, control_messages_ = 0, control_bytes_ = 0;
  metrics::SampleSet wait_ms_, encode_ms_;
  std::vector<wire::WireQueryView> wire_views_;  // a batch's queries as encoded (reused)
};

}  // namespace gpusearch
