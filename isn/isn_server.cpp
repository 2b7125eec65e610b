#include "isn/isn_server.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/index_format.hpp"
#include "common/progress.hpp"
#include "common/shard_index.hpp"
#include "common/wire/mpi_transport.hpp"
#include "common/wire/progress_pacer.hpp"
#include "isn/batch_pipeline.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/fallback_engine.hpp"
#include "isn/isn_engine_stack.hpp"
#include "isn/ranker/ranker_backend.hpp"
#include "isn/ranker/ranker_cache.hpp"
#include "isn/ranker/ranker_store.hpp"
#include "isn/isn_startup.hpp"
#include "isn/ranker/second_stage.hpp"
#include "isn/shared_thresholds.hpp"

namespace gpusearch {

namespace {

using Clock = std::chrono::steady_clock;
using namespace wire;

std::uint64_t micros(Clock::duration d) {
  return std::uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

// ---- 2. The batch loop (1, the start-up, is isn_startup.cpp) --------------------------------- -----------------------------------------------------------------------

// A batch received by the MPI thread, waiting for the engine thread.
struct Inbound {
  Received message;
  Clock::time_point received;
};

// What the engine thread counts; read by the MPI thread only when the engine is idle.
struct EngineCounters {
  std::uint64_t batches = 0, queries = 0, compute_us = 0, unknown_terms = 0, rejected = 0,
                failed_batches = 0, idle_us = 0, encode_us = 0, answer_bytes = 0, queries_by_id = 0;
};

// Two threads: this one (the caller's, the only one that calls MPI: MPI_THREAD_FUNNELED)
// receives batches ahead into a queue while the engine works, answers clock pings at once, and
// sends each answer the moment the engine thread has encoded it. The engine thread decodes,
// resolves, searches and encodes, one batch after the other, and waits on a condition variable
// when the queue is empty. With the scheduler (--scheduler), the engine thread instead queues
// each batch's jobs as the batch arrives (up to --scheduler-batches-in-flight batches at once,
// isn/batch_pipeline.hpp) and answers the batches in order as their jobs complete.
class BatchLoop {
 public:
  BatchLoop(const IsnOptions& options, const Placement& where, const ShardIndex& shard,
            FallbackEngine& engine, IsnSecondStage* second, const SharedThresholdWindow* thresholds,
            MPI_Comm world)
      : options_(options),
        where_(where),
        shard_(shard),
        engine_(engine),
        second_(second),
        thresholds_(thresholds),
        world_(world),
        pacer_(options.pacing) {
    if (thresholds_) {
      sharing_engine_ = dynamic_cast<cpu::CpuEngine*>(engine_.active_primary());
      if (!sharing_engine_ &&
          (where.share_thresholds == ShareThresholds::kOn || where.local_rank == 0))
        std::cerr << fmt::format(
            "{}: --share-thresholds: not available with this ISN's engine stack ({}{}): only "
            "the plain CPU engine shares thresholds (not --scheduler, a list cache or an "
            "injected fault); each ISN prunes alone\n",
            where.who, engine_.name(), options.scheduler.policy.empty() ? "" : ", --scheduler");
    }
    auto* scheduler = dynamic_cast<SchedulerEngine*>(engine_.active_primary());
    if (scheduler && options.scheduler.batches_in_flight > 1)
      pipeline_ = std::make_unique<BatchPipeline>(
          *scheduler, options.scheduler.batches_in_flight, [this] {
            { std::lock_guard lock(mutex_); }  // the engine thread waits, or sees the change
            work_ready_.notify_one();
          });
  }

  // Serves batches until a shutdown has been answered with the stats.
  void run();

 private:
  void engine_thread_main();
  void pipelined_engine_thread_main();
  // Decodes and resolves a batch (nullptr: rejected); then one of: answers it now, or queues
  // its jobs in the pipeline; and sends an answered batch.
  std::unique_ptr<PipelinedBatch> open_batch(Inbound in, Clock::time_point idle_since);
  void search_now(PipelinedBatch& b);
  // Searches the opened batches: runs of them with equal parameters (one stage, no threshold
  // sharing) in one engine call, the others one by one.
  void search_joined(std::vector<std::unique_ptr<PipelinedBatch>>& open);
  // The second stage of a batch whose first stage is done: first the ranker-cache commands the
  // aggregator sent for it (and any for batches this ISN never got), then the ranking. Throws
  // what the ranking throws (a bad ranker does not: its queries keep the first stage).
  void rank_batch(PipelinedBatch& b);
  void apply_ranker_commands(std::uint64_t batch_id);
  void send_answer(PipelinedBatch& b);
  std::vector<Query> resolve_batch(QueryBatch& batch);
  // Takes every waiting message; returns whether there was any.
  bool receive_messages();
  void on_control(const Received& m, Clock::time_point received);
  nlohmann::json stats() const;

  const IsnOptions& options_;
  const Placement& where_;
  const ShardIndex& shard_;
  FallbackEngine& engine_;
  IsnSecondStage* second_;  // null: one stage
  // --share-thresholds: the node's slots, and the CPU engine that uses them (null: not sharing).
  const SharedThresholdWindow* thresholds_;
  cpu::CpuEngine* sharing_engine_ = nullptr;
  std::vector<cpu::QueryThresholdSlots> slots_;  // the engine thread's
  std::uint64_t batches_shared_ = 0;
  std::uint64_t joint_calls_ = 0, batches_joined_ = 0;  // --coalesce-batches
  MPI_Comm world_;
  ProgressPacer pacer_;

  // Shared between the MPI thread and the engine thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<Inbound> inbox_;
  // Ranker-cache commands by the batch they prepare; received before that batch (MPI keeps
  // the aggregator's order), applied by the engine thread just before it ranks it.
  std::deque<RankerCacheCommand> ranker_commands_;
  std::deque<std::shared_ptr<const OutgoingMessage>> outbox_;
  bool stop_ = false, engine_busy_ = false;
  Clock::time_point busy_since_{};
  double compute_ewma_us_ = 0;  // the engine's time per batch, to predict when it needs the next
  std::unique_ptr<BatchPipeline> pipeline_;  // --scheduler with batches in flight, else null

  EngineCounters counters_;  // the engine thread's; `rejected` also the MPI thread's
  // The engine thread's: ranker-cache commands applied, and loads they asked for that failed.
  std::uint64_t ranker_commands_applied_ = 0, ranker_command_load_failures_ = 0;
  std::vector<std::string> ranker_command_errors_;  // the first few

  // The MPI thread's.
  // When batches arrive: the next is due about one gap after the last (a quarter early, for the
  // variance), unless none has come for three gaps (the aggregator is idle or done).
  Clock::time_point last_batch_at_{};
  double batch_gap_us_ = 0;
  // A stats request or a shutdown: answered once every batch received before it is sent.
  bool stats_wanted_ = false, shutdown_wanted_ = false;
};

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
  try {
    batch = decode_query_batch(in.message.data());
  } catch (const WireError& e) {
    ++counters_.rejected;
    std::cerr << where_.who << ": " << e.what() << '\n';
    return nullptr;
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

void BatchLoop::search_now(PipelinedBatch& b) {
  b.results.assign(b.queries.size(), ShardResult{});
  try {
    // Two-stage ranking keeps each shard's own top candidates: no sharing there.
    if (sharing_engine_ && !engine_.fallback_active() && b.params.candidates == 0) {
      thresholds_->slots_for(b.header.batch_id, b.queries.size(), slots_);
      try {
        sharing_engine_->search(b.queries, b.params, b.results, slots_);
        ++batches_shared_;
      } catch (const std::exception& e) {
        // As FallbackEngine::search does when its primary throws.
        engine_.fail_over(e.what());
        for (ShardResult& r : b.results) r = ShardResult{};
        engine_.search(b.queries, b.params, b.results);
      }
    } else {
      engine_.search(b.queries, b.params, b.results);
    }
    b.error.clear();
    rank_batch(b);
  } catch (const std::exception& e) {
    b.error = e.what();
  }
  b.finished = Clock::now();
}

void BatchLoop::search_joined(std::vector<std::unique_ptr<PipelinedBatch>>& open) {
  const auto joinable = [&](const PipelinedBatch& a, const PipelinedBatch& b) {
    const SearchParams &p = a.params, &q = b.params;
    return !sharing_engine_ && p.candidates == 0 && q.candidates == 0 && p.mode == q.mode &&
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
    const auto t0 = Clock::now();
    std::string error;
    try {
      engine_.search(queries, open[i]->params, results);
    } catch (const std::exception& e) {
      error = e.what();
    }
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
  ResultHeader& header = b.header;
  if (!b.error.empty()) {
    ++counters_.failed_batches;
    header.error = b.error;
    b.results.clear();
    std::cerr << where_.who << ": batch " << header.batch_id << " failed: " << b.error << '\n';
  }
  const auto t1 = b.finished;
  header.end_us = steady_us(t1);
  header.fallback_active = engine_.fallback_active();
  header.compute_us = std::uint64_t(double(micros(t1 - b.started)) * b.compute_share);
  auto message = std::make_shared<const OutgoingMessage>(
      encode_results(header, b.results, [&](DocId d) { return shard_.external_id(d); }));
  // Pipelined batches overlap: their busy time is the pipeline's (stats), not this sum.
  if (!pipeline_) counters_.compute_us += header.compute_us;
  counters_.idle_us += header.idle_us;
  counters_.encode_us += micros(Clock::now() - t1);
  counters_.answer_bytes += message->bytes();
  ++counters_.batches;
  counters_.queries += b.queries.size();
  {
    std::lock_guard lock(mutex_);
    outbox_.push_back(std::move(message));
    const double us = double(header.compute_us);
    compute_ewma_us_ = compute_ewma_us_ == 0 ? us : 0.8 * compute_ewma_us_ + 0.2 * us;
  }
  pacer_.notify();  // the MPI thread sends it now, not at its next polling round
}

void BatchLoop::engine_thread_main() {
  if (pipeline_) return pipelined_engine_thread_main();
  auto idle_since = Clock::now();  // when the engine last finished (or started)
  for (;;) {
    std::vector<Inbound> ins;
    {
      std::unique_lock lock(mutex_);
      engine_busy_ = false;
      work_ready_.wait(lock, [&] { return stop_ || !inbox_.empty(); });
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
    search_joined(open);
    for (auto& b : open) send_answer(*b);
    idle_since = Clock::now();
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
      work_ready_.wait(lock, [&] {
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
  }
}

void BatchLoop::on_control(const Received& m, Clock::time_point received) {
  Control c;
  try {
    c = decode_control(m.data());
  } catch (const WireError& e) {
    ++counters_.rejected;
    std::cerr << where_.who << ": " << e.what() << '\n';
    return;
  }
  if (c.kind == Control::Kind::kClockPing) {
    // Answered at once, with the time the ping arrived: the aggregator's offset estimate is
    // only as good as this reply is prompt.
    Control pong{Control::Kind::kClockPong, "", steady_us(received)};
    send_blocking(encode_message(pong), 0, kTagControl, world_);
  } else if (c.kind == Control::Kind::kShutdown || c.kind == Control::Kind::kStatsRequest) {
    stats_wanted_ = true;
    shutdown_wanted_ = shutdown_wanted_ || c.kind == Control::Kind::kShutdown;
  } else if (c.kind == Control::Kind::kRankerCache) {
    if (!second_) {
      ++counters_.rejected;
      std::cerr << where_.who << ": a ranker-cache command, but this ISN was started without "
                                 "--ranker-store\n";
      return;
    }
    std::lock_guard lock(mutex_);
    ranker_commands_.push_back(std::move(c.ranker_cache));
  }
}

bool BatchLoop::receive_messages() {
  bool did = false;
  while (auto m = try_receive(world_, 0, MPI_ANY_TAG)) {
    did = true;
    const auto received = Clock::now();
    if (!m->rejected.empty()) {
      ++counters_.rejected;
      std::cerr << where_.who << ": rejected " << m->rejected << '\n';
      continue;
    }
    if (m->tag == kTagQueryBatch) {
      if (last_batch_at_ != Clock::time_point{}) {
        const double gap =
            std::chrono::duration<double, std::micro>(received - last_batch_at_).count();
        batch_gap_us_ = batch_gap_us_ == 0 ? gap : 0.8 * batch_gap_us_ + 0.2 * gap;
      }
      last_batch_at_ = received;
      {
        std::lock_guard lock(mutex_);
        inbox_.push_back({std::move(*m), received});
      }
      work_ready_.notify_one();
    } else if (m->tag == kTagControl) {
      on_control(*m, received);
    } else {
      ++counters_.rejected;
    }
  }
  return did;
}

void BatchLoop::run() {
  std::thread engine_thread([this] { engine_thread_main(); });
  // The engine thread must end before the objects it uses, whatever happens below.
  struct JoinOnExit {
    BatchLoop& loop;
    std::thread& t;
    ~JoinOnExit() {
      {
        std::lock_guard lock(loop.mutex_);
        loop.stop_ = true;
      }
      loop.work_ready_.notify_all();
      t.join();
    }
  } join_on_exit{*this, engine_thread};

  std::deque<PendingSend> sends;
  for (;;) {
    bool did = receive_messages();
    std::deque<std::shared_ptr<const OutgoingMessage>> ready;
    bool drained = false, inbox_empty = true;
    auto due = Clock::time_point::max();
    {
      std::lock_guard lock(mutex_);
      ready.swap(outbox_);
      drained = inbox_.empty() && !engine_busy_;
      inbox_empty = inbox_.empty();
      // The engine will want its next batch about when this one ends: be polling by then.
      if (engine_busy_ && inbox_.empty())
        due = busy_since_ + std::chrono::microseconds(std::uint64_t(compute_ewma_us_));
    }
    for (auto& msg : ready) {
      did = true;
      sends.emplace_back(std::move(msg), 0, kTagResultBatch, world_);
    }
    while (!sends.empty() && sends.front().test()) {
      sends.pop_front();
      did = true;
    }
    // ---- 3. Shutdown and stats (results go out before the stats, so the aggregator sees them
    // in order).
    if (stats_wanted_ && drained && ready.empty()) {
      for (auto& s : sends)
        while (!s.test()) std::this_thread::yield();
      sends.clear();
      send_blocking(encode_message(Control{Control::Kind::kStatsReply, stats().dump()}), 0,
                    kTagControl, world_);
      if (shutdown_wanted_) return;
      stats_wanted_ = false;
      did = true;
    }
    const auto now = Clock::now();
    // The next batch matters only when none waits for the engine: with batches queued, a late
    // receive costs nothing, and each early wake-up takes a core from the engine (measured on
    // 2 cores: with 40-90 wake-ups per batch the engine ran 1.4-2.6x slower; NOTES-cluster.md).
    if (batch_gap_us_ > 0 && inbox_empty) {
      const auto gap = std::chrono::microseconds(std::int64_t(batch_gap_us_));
      if (now < last_batch_at_ + 3 * gap + std::chrono::milliseconds(1))
        due = std::min(due, last_batch_at_ + gap * 3 / 4);
    }
    if (did)
      pacer_.activity(now);
    else
      // An answer in flight needs this rank's progress: Open MPI's rendezvous for messages
      // above the eager limit moves only while both sides poll (measured: without it an answer
      // took ~1 ms longer to reach the aggregator).
      pacer_.idle(now, due, !sends.empty());
  }
}

// ---- 3. Shutdown and stats -------------------------------------------------------------------

nlohmann::json BatchLoop::stats() const {
  const EngineCounters& c = counters_;
  nlohmann::json j{{"rank", where_.rank},
                   {"shard", where_.shard_id},
                   {"batches", c.batches},
                   {"queries", c.queries},
                   {"queries_sent_as_term_ids", c.queries_by_id},
                   {"compute_seconds", c.compute_us / 1e6 + (pipeline_ ? pipeline_->busy_seconds() : 0)},
                   {"idle_seconds", c.idle_us / 1e6},
                   {"encode_seconds", c.encode_us / 1e6},
                   {"answer_bytes", c.answer_bytes},
                   {"unknown_terms", c.unknown_terms},
                   {"rejected_messages", c.rejected},
                   {"failed_batches", c.failed_batches},
                   {"engine", std::string(engine_.name())},
                   {"fallback_active", engine_.fallback_active()},
                   {"fallback_reason", engine_.failure()},
                   {"batches_on_fallback", engine_.batches_on_fallback()},
                   {"progress", pacer_.stats()},
                   {"share_thresholds",
                    {{"active", sharing_engine_ != nullptr},
                     {"sharers", thresholds_ ? thresholds_->sharers() : 1},
                     {"batches_shared", batches_shared_}}},
                   {"coalesce",
                    {{"max_batches", options_.coalesce_batches},
                     {"joint_calls", joint_calls_},
                     {"batches_joined", batches_joined_}}},
                   {"rss_bytes", current_rss_bytes()},
                   {"peak_rss_bytes", peak_rss_bytes()}};
  // The scheduler's processors, queues, stolen and promoted jobs, and its predictor's error.
  if (!options_.scheduler.policy.empty()) {
    j["scheduler"] = engine_.stats();
    j["scheduler"]["batches_in_flight"] = pipeline_ ? pipeline_->max_in_flight() : 1;
    j["scheduler"]["peak_batches_in_flight"] = pipeline_ ? pipeline_->peak_in_flight() : 1;
  }
  // The second stage: its ranker cache (hits, loads, evictions, load time and bytes) and the
  // aggregator's commands.
  if (second_) {
    j["second_stage"] = second_->ranker->stats();
    j["second_stage"]["ranker_cache_policy"] = options_.ranker_cache_policy;
    j["second_stage"]["ranker_commands_applied"] = ranker_commands_applied_;
    j["second_stage"]["ranker_command_load_failures"] = ranker_command_load_failures_;
    j["second_stage"]["ranker_command_errors"] = ranker_command_errors_;
  }
  // The GPU list cache's hit rates, shipping, post-processing and split (--gpu-mem).
  if (options_.engine.list_cache.enabled() && options_.scheduler.policy.empty()) {
    const nlohmann::json e = engine_.stats();
    for (const char* key : {"list_cache", "list_cache_setup"})
      if (e.contains(key)) j[key] = e[key];
  }
  return j;
}

}  // namespace

int run_isn(const IsnOptions& options, MPI_Comm world) {
  Placement where = place_isn(options, world);
  const std::unique_ptr<SharedThresholdWindow> thresholds = open_threshold_window(where);
  StartedIsn started = start_isn(options, where, world);
  if (!started.engine) return 1;  // the aggregator reports the hello's error
  BatchLoop loop(options, where, started.index->shard(0), *started.engine, started.second.get(),
                 thresholds.get(), world);
  loop.run();
  return 0;
}

}  // namespace gpusearch
