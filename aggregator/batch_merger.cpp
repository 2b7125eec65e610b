#include "aggregator/batch_merger.hpp"

#include <cmath>
#include <iostream>

#include <fmt/core.h>

#include "aggregator/kway_merge.hpp"

namespace gpusearch {

using Clock = AggregatorClock;
using namespace wire;

BatchMerger::BatchMerger(Setup setup, IsnRoster& isns, SharedResultCache& cache, Progress& bar,
                         std::function<void()> on_done)
    : setup_(std::move(setup)),
      isns_(isns),
      cache_(cache),
      bar_(bar),
      on_done_(std::move(on_done)),
      writer_(*setup_.run, setup_.run_tag) {
  thread_ = std::thread([this] {
    // Pinned with the front end's event loop (--rpc-thread CPU): an answer's hand-off to it then
    // wakes a thread of this CPU, not another CPU's (an inter-processor interrupt).
    if (setup_.placement.any())
      if (std::string why = place_this_thread(setup_.placement); !why.empty())
        fmt::print(stderr, "{}: merge thread: {}\n", setup_.me, why);
    loop();
    thread_cpu_seconds_ = metrics::thread_cpu_seconds();
  });
}

BatchMerger::~BatchMerger() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  handoff_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void BatchMerger::push(MergeJob job) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(job));
  }
  handoff_.notify_one();
}

void BatchMerger::submit(InFlightBatch&& batch) {
  merging_queries_ += batch.queries.size();
  MergeJob job;
  job.batch = std::move(batch);
  push(std::move(job));
}

void BatchMerger::submit_answer(std::uint64_t sequence, std::uint64_t ticket, std::string qid,
                                CachedAnswer answer, Clock::time_point arrival) {
  MergeJob job;
  job.sequence = sequence;
  job.ticket = ticket;
  job.qid = std::move(qid);
  job.answer = std::move(answer);
  job.arrival = arrival;
  job.answered = Clock::now();
  push(std::move(job));
}

void BatchMerger::rethrow_if_failed() {
  std::lock_guard lock(mutex_);
  if (error_) std::rethrow_exception(error_);
}

void BatchMerger::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  handoff_.notify_one();
  if (thread_.joinable()) thread_.join();
  writer_.finish();  // every answer handed over is in the run file, flushed
  rethrow_if_failed();
}

LatencyModel BatchMerger::model() const {
  std::lock_guard lock(model_mutex_);
  return model_;
}

void BatchMerger::loop() {
  try {
    for (;;) {
      MergeJob job;
      {
        std::unique_lock lock(mutex_);
        handoff_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      if (job.batch) {
        const std::size_t n = job.batch->queries.size();
        merge(*job.batch);
        merging_queries_ -= n;
      } else {
        if (job.answer.answered_by_or) ++stats_.answered_by_or;
        admitted_hits_.clear();
        for (const CachedHit& h : job.answer.hits) admitted_hits_.push_back({h.docid, h.score});
        record_answer(job.sequence, job.ticket, job.qid, admitted_hits_, &job.answer, false,
                      job.arrival, job.answered);
      }
      // The job's answers to the run writer in one hand-over.
      bar_.add(to_write_.size());
      writer_.add_all(to_write_);
      on_done_();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
  }
}

double BatchMerger::rel_ms(Clock::time_point t) const {
  return std::round(ms_between(setup_.t_run, t) * 1000) / 1000;
}

void BatchMerger::record_answer(std::uint64_t seq, std::uint64_t ticket, const std::string& qid,
                                std::span<const HitView> hits, const CachedAnswer* owned,
                                bool partial, Clock::time_point arrival, Clock::time_point at) {
  if (ticket != 0 && setup_.source) setup_.source->answered(ticket, *owned, partial, arrival);
  stats_.hits_written += hits.size();
  if (hits.empty()) ++stats_.empty_results;
  ++stats_.answered;
  stats_.latency_ms.add(ms_between(arrival, at));
  to_write_.add(seq, qid, hits);  // the ids copied once, into the job's buffer
}

void BatchMerger::merge(InFlightBatch& b) {
  const std::size_t num_isns = isns_.size();
  MergeStats& s = stats_;
  const auto t_merge = Clock::now();
  bool missed = false;
  // Each answering ISN's message decoded in place: the ids stay views into b.messages, which
  // outlive this function; the merge copies out only the ids it keeps.
  decoded_.resize(num_isns);
  std::vector<std::size_t> present;
  for (std::size_t i = 0; i < num_isns; ++i) {
    if (!b.messages[i] || !b.headers[i].error.empty()) {
      missed = true;
      if (!b.messages[i]) ++isns_[i].batches_missed;
      continue;
    }
    try {
      decoded_[i].decode(b.messages[i]->data());
    } catch (const WireError& e) {
      ++isns_[i].errors;
      missed = true;
      std::cerr << setup_.me << ": from ISN rank " << i + 1 << ": " << e.what() << '\n';
      continue;
    }
    if (decoded_[i].size() != b.queries.size()) {
      ++isns_[i].errors;
      missed = true;
      continue;
    }
    present.push_back(i);
  }
  const auto t_decoded = Clock::now();
  if (missed) ++s.batches_with_misses;
  std::vector<ShardAnswerView> shards(present.size());
  const auto now = Clock::now();
  for (std::size_t q = 0; q < b.queries.size(); ++q) {
    for (std::size_t j = 0; j < present.size(); ++j) shards[j] = decoded_[present[j]].answer(q);
    merge_answer_views(b.params, shards, merged_);  // its ids: views into b.messages
    const bool partial = merged_.partial || missed;
    s.counters.add(merged_.counters);
    if (merged_.answered_by_or) ++s.answered_by_or;
    if (partial) ++s.partial_answers;
    if (merged_.ranker_fallback) ++s.ranker_fallbacks;
    const PendingQuery& pq = b.queries[q];
    // A fallback answer is not the ranked one: not cached, so a fixed store serves it later.
    const bool cache_it = !partial && !merged_.ranker_fallback && cache_.enabled();
    // Strings only where the answer outlives the batch's messages: the cache, a live client.
    std::optional<CachedAnswer> owned;
    if (cache_it || (pq.ticket != 0 && setup_.source))
      owned = owned_answer(merged_.hits, merged_.answered_by_or);
    if (cache_it) cache_.insert(pq.cache_key, *owned);
    record_answer(pq.sequence, pq.ticket, pq.id, merged_.hits, owned ? &*owned : nullptr, partial,
                  pq.arrival, now);
  }
  // No view into this batch's messages outlives the merge.
  for (auto& d : decoded_) d.clear();
  merged_.hits.clear();
  const auto t_done = Clock::now();

  // Stages and the timeline.
  std::uint64_t max_compute_us = 0, max_idle_us = 0;
  // The cut model's compute: how long the batch holds the ISN's engine thread, with the answer's
  // encoding where that thread encodes it before it takes the next batch (--answer-thread
  // engine). At batch 1,024 the encoding is 0.5-0.8 ms beside a GPU engine's 3.5 ms; counted as
  // wire overhead there, it made the chain of predicted answers run early by that much a batch
  // in flight, and the next batch queued behind the ones ahead (H200, session 30: 2-4.6 ms at
  // the ISN). Encoded by the ISN's MPI thread (the default), it is wire overhead: the engine is
  // free from the search's end on.
  double max_occupancy_us = 0;
  Clock::time_point last_result = b.sent;
  std::size_t critical = num_isns;  // the ISN whose answer came last
  double to_isn = 0, isn_queue = 0, isn_encode = 0, from_isn = 0;
  for (std::size_t i : present) {
    const ResultHeader& h = b.headers[i];
    IsnBook& book = isns_[i];
    ++book.batches_answered;
    book.compute_us += h.compute_us;
    book.idle_us += h.idle_us;
    book.fallback_seen = book.fallback_seen || h.fallback_active;
    max_compute_us = std::max(max_compute_us, h.compute_us);
    max_occupancy_us = std::max(
        max_occupancy_us,
        split_answer(double(h.compute_us),
                     1000.0 * ms_between(b.times[i].end, b.times[i].encoded), h.encoded_off_engine)
            .occupancy_us);
    max_idle_us = std::max(max_idle_us, h.idle_us);
    const IsnTimes& t = b.times[i];
    if (t.arrived >= last_result) last_result = t.arrived, critical = i;
    to_isn = std::max(to_isn, ms_between(b.sent, t.received));
    isn_queue = std::max(isn_queue, ms_between(t.received, t.start));
    isn_encode = std::max(isn_encode, ms_between(t.end, t.encoded));
    from_isn = std::max(from_isn, ms_between(t.encoded, t.arrived));
  }
  s.batch_sizes.add(double(b.queries.size()));
  s.broadcast_ms.add(ms_between(b.cut, b.all_sent ? b.sends_done : b.complete));
  s.round_trip_ms.add(ms_between(b.sent, last_result));
  s.compute_ms.add(double(max_compute_us) / 1000.0);
  s.gather_ms.add(std::max(0.0, ms_between(b.sent, last_result) - double(max_compute_us) / 1000.0));
  s.merge_ms.add(ms_between(t_merge, t_done));
  s.decode_ms.add(ms_between(t_merge, t_decoded));
  s.merge_wait_ms.add(ms_between(b.complete, t_merge));
  s.isn_idle_ms.add(double(max_idle_us) / 1000.0);
  if (!present.empty()) {
    s.to_isn_ms.add(to_isn);
    s.isn_queue_ms.add(isn_queue);
    s.isn_encode_ms.add(isn_encode);
    s.from_isn_ms.add(from_isn);
  }
  if (critical < num_isns) {
    // The cluster's own cost for this batch: from the cut to the merged answers, less the
    // critical ISN's compute and the time the batch queued there behind earlier batches
    // (the pipeline's overlap, not a cost).
    const IsnTimes& t = b.times[critical];
    const double own = ms_between(b.cut, t_done) - ms_between(t.start, t.end) -
                       std::max(0.0, ms_between(t.received, t.start));
    s.overhead_ms.add(std::max(0.0, own));
    // The depth model: the slowest compute, and the wire both ways without the ISN queue.
    const double service_ms = ms_between(std::max(b.sent, previous_last_answer_), t.arrived);
    previous_last_answer_ = std::max(previous_last_answer_, t.arrived);
    std::lock_guard lock(model_mutex_);
    const double encode_overhead_us =
        split_answer(0.0, 1000.0 * ms_between(t.end, t.encoded), b.headers[critical].encoded_off_engine)
            .encode_overhead_us;
    model_.add(max_occupancy_us,
               1000.0 * (ms_between(b.cut, t.received) + ms_between(t.encoded, t.arrived) +
                         ms_between(t.arrived, t_done)) +
                   encode_overhead_us,
               1000.0 * std::max(0.0, service_ms));
    // Just in time: the cut's aim, a quantile of the slowest occupancy over the last batches.
    if (setup_.aim_quantile > 0 || setup_.early_quantile > 0) {
      compute_window_.add(max_occupancy_us);
      if (setup_.aim_quantile > 0)
        model_.compute_aim_us = compute_window_.quantile(setup_.aim_quantile);
      if (setup_.early_quantile > 0)
        model_.compute_early_us = compute_window_.quantile(setup_.early_quantile);
    }
  }
  if (s.timeline.size() < setup_.timeline_batches) {
    // Plain numbers here; the JSON is built once, when the metrics are written.
    TimelineBatch& e = s.timeline.emplace_back();
    e.batch = b.id;
    e.queries = b.queries.size();
    e.bytes_sent = b.bytes;
    e.cut = rel_ms(b.cut);
    e.encoded = rel_ms(b.encoded);
    e.sent = rel_ms(b.sent);
    if (b.all_sent) e.sends_done = rel_ms(b.sends_done);
    e.complete = rel_ms(b.complete);
    e.merge_start = rel_ms(t_merge);
    e.merged = rel_ms(t_done);
    e.isn.resize(num_isns);
    for (std::size_t i = 0; i < num_isns; ++i) {
      if (!b.messages[i]) continue;  // missing
      const IsnTimes& t = b.times[i];
      e.isn[i] = {rel_ms(t.received), rel_ms(t.start), rel_ms(t.end), rel_ms(t.encoded),
                  rel_ms(t.arrived)};
    }
  }
}

nlohmann::json timeline_json(const std::vector<TimelineBatch>& timeline) {
  nlohmann::json batches = nlohmann::json::array();
  for (const TimelineBatch& e : timeline) {
    nlohmann::json per_isn = nlohmann::json::array();
    for (std::size_t i = 0; i < e.isn.size(); ++i) {
      const auto& t = e.isn[i];
      if (!t) {
        per_isn.push_back({{"rank", i + 1}, {"missing", true}});
        continue;
      }
      per_isn.push_back({{"rank", i + 1},
                         {"received", t->received},
                         {"start", t->start},
                         {"end", t->end},
                         {"encoded", t->encoded},
                         {"arrived", t->arrived}});
    }
    batches.push_back(
        {{"batch", e.batch},
         {"queries", e.queries},
         {"bytes_sent", e.bytes_sent},
         {"cut", e.cut},
         {"encoded", e.encoded},
         {"sent", e.sent},
         {"sends_done", e.sends_done ? nlohmann::json(*e.sends_done) : nlohmann::json()},
         {"complete", e.complete},
         {"merge_start", e.merge_start},
         {"merged", e.merged},
         {"isn", per_isn}});
  }
  return batches;
}

}  // namespace gpusearch
