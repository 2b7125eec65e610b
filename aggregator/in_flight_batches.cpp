#include "aggregator/in_flight_batches.hpp"

#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "common/wire/shared_memory_eager.hpp"

namespace gpusearch {

using Clock = AggregatorClock;
using namespace wire;


InFlightBatches::InFlightBatches(MPI_Comm world, IsnRoster& isns, std::uint64_t deadline_ms,
                                 std::string me, std::uint64_t dead_after)
    : world_(world), isns_(isns), deadline_ms_(deadline_ms), me_(std::move(me)),
      dead_after_(dead_after) {}

void InFlightBatches::broadcast(std::vector<PendingQuery> queries, Clock::time_point cut,
                                bool term_ids, const RankerCachePlan& ranker_plan) {
  const std::size_t num_isns = isns_.size();
  InFlightBatch b;
  b.id = next_batch_id_++;
  b.cut = cut;
  b.queries = std::move(queries);
  b.params = b.queries.front().params;
  // Encoded from the pending queries themselves (views): nothing copied or freed before the
  // send. Their terms stay with the batch until its merge.
  wire_views_.clear();
  for (const PendingQuery& pq : b.queries) {
    if (term_ids)
      wire_views_.push_back({pq.id, {}, pq.term_ids, pq.ranker});
    else
      wire_views_.push_back({pq.id, pq.terms, {}, pq.ranker});
    wait_ms_.add(ms_between(pq.arrival, b.cut));
  }
  auto msg =
      std::make_shared<const OutgoingMessage>(encode_query_batch(b.id, b.params, wire_views_));
  b.encoded = Clock::now();
  encode_ms_.add(ms_between(b.cut, b.encoded));
  b.bytes = msg->bytes();
  if (!ranker_plan.empty()) {
    Control c{Control::Kind::kRankerCache, ""};
    c.ranker_cache = {b.id, ranker_plan.evict, ranker_plan.load};
    auto command = std::make_shared<const OutgoingMessage>(encode_message(c));
    for (std::size_t i = 0; i < num_isns; ++i)
      if (!isns_[i].dead) {
        b.sends.emplace_back(command, int(i + 1), kTagControl, world_);
        ++control_messages_;
        control_bytes_ += command->bytes();
      }
  }
  for (std::size_t i = 0; i < num_isns; ++i)
    if (!isns_[i].dead) {
      b.sends.emplace_back(msg, int(i + 1), kTagQueryBatch, world_);
      ++b.expected;
    }
  b.sent = Clock::now();
  bytes_sent_ += msg->bytes() * b.expected;
  messages_sent_ += b.expected;
  b.deadline = deadline_ms_ == 0 ? Clock::time_point::max()
                                 : b.sent + std::chrono::milliseconds(deadline_ms_);
  b.messages.resize(num_isns);
  b.headers.resize(num_isns);
  b.times.resize(num_isns);
  queries_ += b.queries.size();
  batches_.emplace(b.id, std::move(b));
}

bool InFlightBatches::test_sends(bool& pending) {
  bool progress = false;
  pending = false;
  for (auto& [id, b] : batches_) {
    if (b.all_sent) continue;
    bool all = true;
    for (auto& s : b.sends) all = s.test() && all;
    if (all) {
      b.all_sent = true, b.sends_done = Clock::now(), b.sends.clear();
      progress = true;
    } else {
      pending = true;
    }
  }
  return progress;
}

bool InFlightBatches::receive() {
  const std::size_t num_isns = isns_.size();
  bool progress = false;
  while (auto m = try_receive(world_, MPI_ANY_SOURCE, kTagResultBatch)) {
    progress = true;
    const auto arrived_at = Clock::now();
    const std::size_t i = std::size_t(m->source - 1);
    if (!m->rejected.empty() || i >= num_isns) {
      ++rejected_messages_;
      std::cerr << me_ << ": " << (m->rejected.empty() ? "message from unknown rank" : m->rejected)
                << '\n';
      continue;
    }
    bytes_received_ += m->bytes;
    if (isns_[i].dead) {
      // Declared dead, yet it answers: it was only slow. Batches go to it again.
      isns_[i].dead = false;
      isns_[i].consecutive_misses = 0;
      std::cerr << fmt::format("{}: ISN rank {} answered again; it gets batches again\n", me_,
                               m->source);
    }
    ResultHeader h;
    try {
      h = decode_result_header(m->data());
    } catch (const WireError& e) {
      ++rejected_messages_;
      std::cerr << me_ << ": from ISN rank " << m->source << ": " << e.what() << '\n';
      continue;
    }
    const auto it = batches_.find(h.batch_id);
    if (it == batches_.end() || it->second.messages[i]) {
      ++late_discarded_;
      ++isns_[i].late_results;
      continue;
    }
    if (!h.error.empty()) {
      ++isns_[i].errors;
      std::cerr << me_ << ": ISN rank " << m->source << " could not answer batch " << h.batch_id
                << ": " << h.error << '\n';
    }
    InFlightBatch& b = it->second;
    b.times[i] = {isns_.isn_time(i, h.received_us), isns_.isn_time(i, h.start_us),
                  isns_.isn_time(i, h.end_us), isns_.isn_time(i, h.encoded_us), arrived_at};
    b.headers[i] = std::move(h);
    b.messages[i] = std::move(*m);
    ++b.received;
  }
  return progress;
}

double answer_spread_us_of(const InFlightBatch& b) {
  std::optional<Clock::time_point> first, last;
  for (std::size_t i = 0; i < b.messages.size() && i < b.times.size(); ++i) {
    if (!b.messages[i]) continue;
    const Clock::time_point t = b.times[i].arrived;
    first = first ? std::min(*first, t) : t;
    last = last ? std::max(*last, t) : t;
  }
  if (!first) return 0;
  return std::chrono::duration<double, std::micro>(*last - *first).count();
}

bool InFlightBatches::complete(Clock::time_point now,
                               const std::function<void(InFlightBatch&&)>& done,
                               Clock::time_point& due) {
  const std::size_t num_isns = isns_.size();
  bool progress = false;
  for (auto it = batches_.begin(); it != batches_.end();) {
    InFlightBatch& b = it->second;
    if (b.received == b.expected || now >= b.deadline) {
      if (b.received < b.expected)
        std::cerr << fmt::format(
            "{}: batch {} missed its deadline of {} ms on {} ISN(s); its "
            "{} queries are answered partially\n",
            me_, b.id, deadline_ms_, b.expected - b.received, b.queries.size());
      // Deadlines missed in a row: a dead (or hopelessly stuck) ISN is left out from now on.
      for (std::size_t i = 0; i < num_isns; ++i) {
        IsnBook& isn = isns_[i];
        if (isn.dead) continue;
        if (b.messages[i]) {
          isn.consecutive_misses = 0;
          continue;
        }
        if (++isn.consecutive_misses < dead_after_ || dead_after_ == 0) continue;
        isn.dead = true;
        isn.dead_after_batch = b.id;
        std::cerr << fmt::format(
            "{}: ISN rank {} declared dead: no answer to {} batches in a row within the {} ms "
            "deadline; its shard's answers are partial from now on ({} of {} ISNs live)\n",
            me_, i + 1, isn.consecutive_misses, deadline_ms_, isns_.live(), num_isns);
      }
      b.complete = now;
      b.sends.clear();  // a send to an ISN that missed the deadline stays with MPI
      queries_ -= b.queries.size();
      last_batch_done_ = now;
      done(std::move(b));
      it = batches_.erase(it);
      progress = true;
    } else {
      due = std::min(due, b.deadline);
      ++it;
    }
  }
  return progress;
}

nlohmann::json InFlightBatches::wire_json(bool term_ids) const {
  return {{"term_ids", term_ids},
          {"messages_sent", messages_sent_},
          {"bytes_sent", bytes_sent_},
          {"bytes_received", bytes_received_},
          {"ranker_cache_commands", control_messages_},
          {"ranker_cache_command_bytes", control_bytes_},
          // Open MPI's shared-memory eager limit and the rest (--shm-eager-bytes)
          {"shared_memory", wire::shared_memory_transport_json()}};
}

}  // namespace gpusearch
