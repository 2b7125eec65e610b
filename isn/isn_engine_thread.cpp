// The ISN's engine thread (isn_batch_loop.hpp): decodes and resolves each batch, searches it
// (batches waiting together in one engine call, or through the scheduler's pipeline), ranks it
// (the second stage) and encodes its answer for the MPI thread to send.
#include <algorithm>
#include <chrono>
#include <thread>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "common/metrics.hpp"
#include "isn/isn_batch_loop.hpp"
#include "isn/ranker/ranker_cache.hpp"
#include "isn/ranker/second_stage.hpp"

namespace gpusearch::isn_detail {

std::vector<Query> BatchLoop::resolve_batch(QueryBatch& batch) {
  std::vector<Query> qs(batch.queries.size());
  for (std::size_t i = 0; i < qs.size(); ++i) {
    WireQuery& wq = batch.queries[i];
    qs[i].id = std::move(wq.id);
    qs[i].ranker = std::move(wq.ranker);
    if (!wq.term_ids.empty()) ++counters_.queries_by_id;
    for (std::uint32_t id : wq.term_ids) {
      if (id < shard_.num_terms())
        qs[i].terms.push_back(id);
      else
        ++counters_.unknown_terms;  // the aggregator checked the vocabulary: only bad bytes
    }
    for (const std::string& t : wq.terms) {
      if (auto id = shard_.find_term(t))
        qs[i].terms.push_back(*id);
      else
        ++counters_.unknown_terms;  // the vocabulary is global: only a mismatched index
    }
  }
  return qs;
}

std::unique_ptr<PipelinedBatch> BatchLoop::open_batch(Inbound in, Clock::time_point idle_since) {
  QueryBatch batch;
  if (in.decoded) {
    batch = std::move(*in.decoded);  // the MPI thread decoded it while the engine worked
  } else {
    try {
      batch = decode_query_batch(in.message.data());
    } catch (const WireError& e) {
      ++counters_.rejected;
      std::cerr << where_.who << ": " << e.what() << '\n';
      return nullptr;
    }
  }
  if (options_.inject_delay_ms > 0 &&
      (options_.inject_delay_rank < 0 || options_.inject_delay_rank == where_.rank))
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.inject_delay_ms));

  auto b = std::make_unique<PipelinedBatch>();
  b->started = Clock::now();
  b->queries = resolve_batch(batch);
  b->ranked_params = batch.params;
  b->params = batch.params;
  // Two stages: the first keeps the top `candidates` (at least k) for the ranker.
  if (batch.params.candidates > 0) b->params.k = std::max(batch.params.k, batch.params.candidates);
  ResultHeader& header = b->header;
  header.batch_id = batch.batch_id;
  header.isn_rank = std::uint32_t(where_.rank);
  header.shard_id = where_.shard_id;
  header.received_us = steady_us(in.received);
  header.start_us = steady_us(b->started);
  header.idle_us = b->started > idle_since ? micros(b->started - idle_since) : 0;
  return b;
}

bool BatchLoop::can_share(const SearchParams& params) const {
  // Two-stage ranking keeps each shard's own top candidates: no sharing there.
  return sharing_engine_ && !engine_.fallback_active() && params.candidates == 0;
}

void BatchLoop::add_slots(const PipelinedBatch& b) {
  thresholds_->slots_for(b.header.batch_id, b.queries.size(), batch_slots_,
                         options_.share_unions);
  slots_.insert(slots_.end(), batch_slots_.begin(), batch_slots_.end());
}

bool BatchLoop::search_sharing(std::span<const Query> queries, const SearchParams& params,
                               std::span<ShardResult> results) {
  try {
    sharing_engine_->search(queries, params, results, slots_);
    return true;
  } catch (const std::exception& e) {
    // As FallbackEngine::search does when its primary throws.
    engine_.fail_over(e.what());
    for (ShardResult& r : results) r = ShardResult{};
    engine_.search(queries, params, results);
    return false;
  }
}

void BatchLoop::search_now(PipelinedBatch& b) {
  b.results.assign(b.queries.size(), ShardResult{});
  try {
    if (can_share(b.params)) {
      slots_.clear();
      add_slots(b);
      if (search_sharing(b.queries, b.params, b.results)) ++batches_shared_;
    } else {
      engine_.search(b.queries, b.params, b.results);
    }
    b.error.clear();
    rank_batch(b);
  } catch (const std::exception& e) {
    b.error = e.what();
  }
  pad_compute(b.started, 1);
  b.finished = Clock::now();
}

void BatchLoop::pad_compute(Clock::time_point started, std::size_t batches) const {
  if (options_.inject_compute_ms > 0 &&
      (options_.inject_compute_rank < 0 || options_.inject_compute_rank == where_.rank))
    std::this_thread::sleep_until(
        started + std::chrono::milliseconds(std::uint64_t(options_.inject_compute_ms) * batches));
}

void BatchLoop::search_joined(std::vector<std::unique_ptr<PipelinedBatch>>& open) {
  const auto joinable = [&](const PipelinedBatch& a, const PipelinedBatch& b) {
    const SearchParams &p = a.params, &q = b.params;
    return p.candidates == 0 && q.candidates == 0 && p.mode == q.mode &&
           p.scoring == q.scoring && p.alpha == q.alpha && p.k == q.k;
  };
  for (std::size_t i = 0; i < open.size();) {
    std::size_t j = i + 1;
    while (j < open.size() && joinable(*open[i], *open[j])) ++j;
    if (j - i == 1) {
      search_now(*open[i++]);
      continue;
    }
    std::vector<Query> queries;
    for (std::size_t x = i; x < j; ++x)
      queries.insert(queries.end(), open[x]->queries.begin(), open[x]->queries.end());
    std::vector<ShardResult> results(queries.size());
    // Sharing ISNs join batches too: each query keeps its own batch's slots, which the node's
    // other ISNs find by (batch, position) whatever calls they answer it in.
    const bool share = can_share(open[i]->params);
    if (share) {
      slots_.clear();
      for (std::size_t x = i; x < j; ++x) add_slots(*open[x]);
    }
    const auto t0 = Clock::now();
    std::string error;
    try {
      if (!share)
        engine_.search(queries, open[i]->params, results);
      else if (search_sharing(queries, open[i]->params, results))
        batches_shared_ += j - i;
    } catch (const std::exception& e) {
      error = e.what();
    }
    pad_compute(t0, j - i);
    const auto t1 = Clock::now();
    std::size_t at = 0;
    for (std::size_t x = i; x < j; ++x) {
      PipelinedBatch& b = *open[x];
      b.results.assign(results.begin() + std::ptrdiff_t(at),
                       results.begin() + std::ptrdiff_t(at + b.queries.size()));
      at += b.queries.size();
      b.error = error;
      if (error.empty()) {
        try {
          rank_batch(b);  // one stage: applies the ranker-cache commands due by this batch
        } catch (const std::exception& e) {
          b.error = e.what();
        }
      }
      b.started = t0;
      b.header.start_us = steady_us(t0);
      b.finished = t1;
      b.compute_share = double(b.queries.size()) / double(std::max<std::size_t>(1, queries.size()));
    }
    ++joint_calls_;
    batches_joined_ += j - i;
    i = j;
  }
}

void BatchLoop::apply_ranker_commands(std::uint64_t batch_id) {
  std::vector<RankerCacheCommand> due;
  {
    std::lock_guard lock(mutex_);
    while (!ranker_commands_.empty() && ranker_commands_.front().batch_id <= batch_id) {
      due.push_back(std::move(ranker_commands_.front()));
      ranker_commands_.pop_front();
    }
  }
  if (!second_) return;  // counted as rejected when received
  for (const RankerCacheCommand& c : due) {
    ++ranker_commands_applied_;
    for (const std::string& r : c.evict) second_->cache->evict(r);
    for (const std::string& r : c.load) {
      try {
        second_->cache->load(r);
      } catch (const std::exception& e) {
        // The batch's queries of this ranker fall back to the first stage, with this error.
        ++ranker_command_load_failures_;
        if (ranker_command_errors_.size() < 20) ranker_command_errors_.push_back(e.what());
        std::cerr << where_.who << ": ranker-cache command for batch " << c.batch_id
                  << ": cannot load: " << e.what() << '\n';
      }
    }
  }
}

void BatchLoop::rank_batch(PipelinedBatch& b) {
  apply_ranker_commands(b.header.batch_id);
  if (b.ranked_params.candidates == 0) return;
  if (!second_)
    throw Error(fmt::format("batch {} asks for two-stage ranking ({} candidates) but this ISN "
                            "was started without --ranker-store",
                            b.header.batch_id, b.ranked_params.candidates));
  second_->ranker->rank(b.queries, b.ranked_params, b.results);
}

void BatchLoop::send_answer(PipelinedBatch& b) {
  auto message = encode_answer(b);
  {
    std::lock_guard lock(mutex_);
    outbox_.push_back({std::move(message), Clock::now()});
  }
  pacer_.notify();  // the MPI thread sends it now, not at its next polling round
}

std::shared_ptr<const OutgoingMessage> BatchLoop::encode_answer(PipelinedBatch& b) {
  ResultHeader& header = b.header;
  if (!b.error.empty()) {
    ++counters_.failed_batches;
    header.error = b.error;
    b.results.clear();
    std::cerr << where_.who << ": batch " << header.batch_id << " failed: " << b.error << '\n';
  }
  const auto t1 = b.finished;
  const auto encode_started = Clock::now();
  header.end_us = steady_us(t1);
  header.fallback_active = engine_.fallback_active();
  header.compute_us = std::uint64_t(double(micros(t1 - b.started)) * b.compute_share);
  // The hits' external ids, in packing order: a large batch's on oneTBB's threads (cache misses
  // in the shard's id table, 0.5-0.9 ms a batch of 1,024 on this thread alone; session 45), each
  // chunk of queries asking for its ids in two rounds first, so that the misses overlap.
  const std::size_t n = b.results.size();
  answer_hit_at_.assign(n + 1, 0);
  for (std::size_t q = 0; q < n; ++q)
    answer_hit_at_[q + 1] =
        answer_hit_at_[q] + b.results[q].hits.size() + b.results[q].or_hits.size();
  answer_ids_.resize(answer_hit_at_[n]);
  const auto look_up = [&](std::size_t from, std::size_t to) {
    look_up_external_ids(shard_, std::span(b.results).subspan(from, to - from),
                         answer_ids_.data() + answer_hit_at_[from]);
  };
  if (n >= wire::kParallelPackQueries)
    // Isolated: while it waits, this thread takes only these chunks, not a query of a batch
    // the scheduler's pipeline runs meanwhile.
    tbb::this_task_arena::isolate([&] {
      tbb::parallel_for(
          tbb::blocked_range<std::size_t>(0, n, 64),
          [&](const tbb::blocked_range<std::size_t>& r) { look_up(r.begin(), r.end()); });
    });
  else
    look_up(0, n);
  const auto looked_up = Clock::now();
  auto message = std::make_shared<const OutgoingMessage>(
      encode_results(header, b.results, answer_ids_, answer_segments_));
  const auto packed = Clock::now();
  answer_pickup_us_.add(std::chrono::duration<double, std::micro>(encode_started - t1).count());
  answer_lookup_us_.add(
      std::chrono::duration<double, std::micro>(looked_up - encode_started).count());
  answer_pack_us_.add(std::chrono::duration<double, std::micro>(packed - looked_up).count());
  // Pipelined batches overlap: their busy time is the pipeline's (stats), not this sum.
  if (!pipeline_) counters_.compute_us += header.compute_us;
  counters_.idle_us += header.idle_us;
  counters_.encode_us += micros(packed - t1);
  counters_.answer_bytes += message->bytes();
  for (const ShardResult& r : b.results) counters_.work.add(r.counters);
  ++counters_.batches;
  counters_.queries += b.queries.size();
  {
    std::lock_guard lock(mutex_);
    const double us = double(header.compute_us);
    compute_ewma_us_ = compute_ewma_us_ == 0 ? us : 0.8 * compute_ewma_us_ + 0.2 * us;
  }
  return message;
}

void BatchLoop::engine_thread_main() {
  if (pipeline_) return pipelined_engine_thread_main();
  auto idle_since = Clock::now();  // when the engine last finished (or started)
  for (;;) {
    std::vector<Inbound> ins;
    {
      std::unique_lock lock(mutex_);
      engine_busy_ = false;
      engine_wait_.wait(lock, [&] { return stop_ || !inbox_.empty(); });
      if (inbox_.empty()) return;  // stop, nothing left
      // The batches already waiting come along (--coalesce-batches), to share one engine call.
      do {
        ins.push_back(std::move(inbox_.front()));
        inbox_.pop_front();
      } while (ins.size() < options_.coalesce_batches && !inbox_.empty());
      engine_busy_ = true;
      busy_since_ = Clock::now();
    }
    std::vector<std::unique_ptr<PipelinedBatch>> open;
    for (Inbound& in : ins)
      if (auto b = open_batch(std::move(in), idle_since)) open.push_back(std::move(b));
    // The process's CPU while the batches are searched: the engines' work (and its tail), against
    // what the ISN's threads burn between calls (stats' cpu_seconds).
    const double cpu0 = metrics::process_cpu_seconds();
    const auto t0 = Clock::now();
    search_joined(open);
    engine_call_cpu_seconds_ += metrics::process_cpu_seconds() - cpu0;
    engine_call_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
    if (options_.answers_on_mpi_thread) {
      {
        std::lock_guard lock(mutex_);
        for (auto& b : open) {
          b->header.encoded_off_engine = true;
          searched_.push_back(std::move(b));
        }
      }
      pacer_.notify();  // the MPI thread encodes and sends them now
    } else {
      for (auto& b : open) send_answer(*b);
    }
    idle_since = Clock::now();
    engine_wait_.worked(idle_since);
  }
}

void BatchLoop::pipelined_engine_thread_main() {
  auto idle_since = Clock::now();  // when the pipeline last became empty
  for (;;) {
    Inbound in;
    std::unique_ptr<PipelinedBatch> done;
    {
      std::unique_lock lock(mutex_);
      engine_busy_ = !pipeline_->empty();
      engine_wait_.wait(lock, [&] {
        return pipeline_->front_complete() || (!inbox_.empty() && pipeline_->has_room()) ||
               (stop_ && inbox_.empty() && pipeline_->empty());
      });
      done = pipeline_->take_completed();
      if (!done) {
        if (inbox_.empty()) return;  // stop, nothing left
        in = std::move(inbox_.front());
        inbox_.pop_front();
      }
      if (!engine_busy_) busy_since_ = Clock::now();
      engine_busy_ = true;
    }
    if (done) {
      // A failed job (the CPU engine threw; GPU failures fall back inside the scheduler's GPU
      // side): the ISN's fallback engine answers the batch, and every later one, as without
      // the pipeline.
      if (!done->error.empty()) {
        engine_.fail_over(done->error);
        search_now(*done);
      } else {
        try {
          rank_batch(*done);
        } catch (const std::exception& e) {
          done->error = e.what();
        }
        done->finished = Clock::now();
      }
      send_answer(*done);
      if (pipeline_->empty()) idle_since = Clock::now();
      engine_wait_.worked(Clock::now());
      continue;
    }
    auto b = open_batch(std::move(in), idle_since);
    if (!b) continue;
    if (!engine_.fallback_active()) {
      try {
        pipeline_->start(b);
        continue;
      } catch (const std::exception& e) {
        engine_.fail_over(e.what());  // e.g. the predictor's training at the first batch
      }
    }
    search_now(*b);
    send_answer(*b);
    engine_wait_.worked(Clock::now());
  }
}

}  // namespace gpusearch::isn_detail
