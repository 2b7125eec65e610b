#include "isn/isn_server.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include "common/progress.hpp"
#include "common/thread_placement.hpp"
#include "common/wire/shared_memory_eager.hpp"
#include "common/wire/wire.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/isn_batch_loop.hpp"
#include "isn/isn_startup.hpp"
#include "isn/ranker/second_stage.hpp"

namespace gpusearch {

namespace isn_detail {

namespace {
// A latency series in a few numbers (the stats reply stays small).
nlohmann::json brief(const metrics::SampleSet& s) {
  if (s.empty()) return {{"count", 0}};
  return {{"count", s.size()},
          {"p50", s.percentile(50)},
          {"p95", s.percentile(95)},
          {"max", s.percentile(100)}};
}
}  // namespace

// The MPI thread's half of the batch loop (the engine thread's: isn_engine_thread.cpp).

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
      Inbound in{std::move(*m), received, std::nullopt};
      if (options_.answers_on_mpi_thread && !pipeline_) {
        // A batch that waits for the engine anyway is decoded here, so that the engine starts
        // it the moment it is free; one for an idle engine goes to it as it is (the engine
        // thread would wait for this thread's decoding as long as for its own). The engine
        // thread counts a batch that does not decode.
        bool engine_free;
        {
          std::lock_guard lock(mutex_);
          engine_free = !engine_busy_ && inbox_.empty();
        }
        if (!engine_free) {
          try {
            in.decoded = decode_query_batch(in.message.data());
            ++batches_decoded_ahead_;
          } catch (const WireError&) {
            // left to the engine thread, which reports and counts it in order
          }
        }
      }
      {
        std::lock_guard lock(mutex_);
        inbox_.push_back(std::move(in));
      }
      engine_wait_.notify_one();
    } else if (m->tag == kTagControl) {
      on_control(*m, received);
    } else {
      ++counters_.rejected;
    }
  }
  return did;
}

void BatchLoop::run() {
  run_started_ = Clock::now();
  process_cpu_at_run_ = metrics::process_cpu_seconds();
  mpi_cpu_at_run_ = metrics::thread_cpu_seconds();
  mpi_run_delay_at_run_ = metrics::thread_run_delay_seconds();
  std::thread engine_thread([this] { engine_thread_main(); });
  engine_thread_handle_ = static_cast<unsigned long>(engine_thread.native_handle());
  // The engine thread must end before the objects it uses, whatever happens below.
  struct JoinOnExit {
    BatchLoop& loop;
    std::thread& t;
    ~JoinOnExit() {
      {
        std::lock_guard lock(loop.mutex_);
        loop.stop_ = true;
      }
      loop.engine_wait_.notify_all();
      t.join();
    }
  } join_on_exit{*this, engine_thread};

  std::deque<PendingSend> sends;
  std::deque<Clock::time_point> sends_posted;  // when each of `sends` was posted
  for (;;) {
    bool did = receive_messages();
    std::deque<ReadyAnswer> ready;
    std::deque<std::unique_ptr<PipelinedBatch>> searched;
    bool drained = false, inbox_empty = true;
    auto due = Clock::time_point::max();
    {
      std::lock_guard lock(mutex_);
      ready.swap(outbox_);
      searched.swap(searched_);  // encoded and posted below, before any stats reply
      drained = inbox_.empty() && !engine_busy_;
      inbox_empty = inbox_.empty();
      // The engine will want its next batch about when this one ends: be polling by then.
      if (engine_busy_ && inbox_.empty())
        due = busy_since_ + std::chrono::microseconds(std::uint64_t(compute_ewma_us_));
    }
    for (auto& answer : ready) {
      did = true;
      const auto posted = Clock::now();
      answer_post_us_.add(std::chrono::duration<double, std::micro>(posted - answer.ready).count());
      sends.emplace_back(std::move(answer.message), 0, kTagResultBatch, world_);
      sends_posted.push_back(posted);
    }
    did = send_searched(searched, sends, sends_posted) || did;
    while (!sends.empty() && sends.front().test()) {
      answer_send_us_.add(
          std::chrono::duration<double, std::micro>(Clock::now() - sends_posted.front()).count());
      sends.pop_front();
      sends_posted.pop_front();
      did = true;
    }
    // ---- 3. Shutdown and stats (results go out before the stats, so the aggregator sees them
    // in order).
    if (stats_wanted_ && drained && ready.empty()) {
      for (std::size_t i = 0; i < sends.size(); ++i) {
        while (!sends[i].test()) std::this_thread::yield();
        answer_send_us_.add(
            std::chrono::duration<double, std::micro>(Clock::now() - sends_posted[i]).count());
      }
      sends.clear();
      sends_posted.clear();
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
      pacer_.idle(now, due, !sends.empty(), !sends.empty());
  }
}

bool BatchLoop::send_searched(std::deque<std::unique_ptr<PipelinedBatch>>& searched,
                              std::deque<PendingSend>& sends,
                              std::deque<Clock::time_point>& posted) {
  if (searched.empty()) return false;
  for (auto& b : searched) {
    sends.emplace_back(encode_answer(*b), 0, kTagResultBatch, world_);
    const auto now = Clock::now();
    // From the search's end: this thread's reaction and the encoding (--answer-thread engine:
    // from the engine thread's encoded answer).
    answer_post_us_.add(std::chrono::duration<double, std::micro>(now - b->finished).count());
    posted.push_back(now);
  }
  searched.clear();
  return true;
}

// ---- 3. Shutdown and stats -------------------------------------------------------------------

nlohmann::json BatchLoop::cpu_seconds() const {
  // Called on the MPI thread, while the engine thread runs.
  const double process = metrics::process_cpu_seconds() - process_cpu_at_run_;
  const double mpi = metrics::thread_cpu_seconds() - mpi_cpu_at_run_;
  const double engine =
      engine_thread_handle_ ? metrics::thread_cpu_seconds(engine_thread_handle_) : 0.0;
  return {{"process", process},
          {"mpi_thread", mpi},
          // its time runnable without a core (a late send or receive that was not its own work)
          {"mpi_thread_run_delay", metrics::thread_run_delay_seconds() - mpi_run_delay_at_run_},
          {"engine_thread", engine},  // with its share of a batch's queries (oneTBB's caller)
          // oneTBB's workers, and MPI's and the second stage's threads
          {"other_threads", std::max(0.0, process - mpi - engine)},
          // The process during the engine calls (the engines' work and the calls' tails; not
          // measured for pipelined batches), and the calls' wall seconds: the rest of `process`
          // was spent between calls.
          {"in_engine_calls", engine_call_cpu_seconds_},
          {"engine_call_seconds", engine_call_seconds_},
          {"run_seconds", std::chrono::duration<double>(Clock::now() - run_started_).count()}};
}

nlohmann::json BatchLoop::stats() const {
  const EngineCounters& c = counters_;
  nlohmann::json j{{"rank", where_.rank},
                   {"shard", where_.shard_id},
                   {"batches", c.batches},
                   {"queries", c.queries},
                   {"work", to_json(c.work)},
                   {"queries_sent_as_term_ids", c.queries_by_id},
                   {"compute_seconds", c.compute_us / 1e6 + (pipeline_ ? pipeline_->busy_seconds() : 0)},
                   {"idle_seconds", c.idle_us / 1e6},
                   {"encode_seconds", c.encode_us / 1e6},
                   {"answer_post_us", brief(answer_post_us_)},
                   {"answer_send_us", brief(answer_send_us_)},
                   {"answer_pickup_us", brief(answer_pickup_us_)},
                   {"answer_lookup_us", brief(answer_lookup_us_)},
                   {"answer_pack_us", brief(answer_pack_us_)},
                   {"answer_bytes", c.answer_bytes},
                   {"answer_segments_reused", answer_segments_->reused()},
                   {"shared_memory", wire::shared_memory_transport_json()},
                   {"unknown_terms", c.unknown_terms},
                   {"rejected_messages", c.rejected},
                   {"failed_batches", c.failed_batches},
                   {"engine", std::string(engine_.name())},
                   {"fallback_active", engine_.fallback_active()},
                   {"fallback_reason", engine_.failure()},
                   {"batches_on_fallback", engine_.batches_on_fallback()},
                   {"progress", pacer_.stats()},
                   {"engine_handoff", engine_wait_.stats()},
                   {"share_thresholds",
                    {{"active", sharing_engine_ != nullptr},
                     {"collection_seeds", collection_seeds_ != nullptr},
                     {"unions", options_.share_unions},
                     {"sharers", thresholds_ ? thresholds_->sharers() : 1},
                     {"batches_shared", batches_shared_}}},
                   {"answer_thread", options_.answers_on_mpi_thread && !pipeline_ ? "mpi" : "engine"},
                   {"id_table", options_.id_table_in_huge_pages ? "huge-pages" : "mapped"},
                   {"batches_decoded_ahead", batches_decoded_ahead_},
                   {"coalesce",
                    {{"max_batches", options_.coalesce_batches},
                     {"joint_calls", joint_calls_},
                     {"batches_joined", batches_joined_}}},
                   {"cpu_set", where_.cpu_set.empty() ? std::string("any")
                                                      : format_cpu_list(where_.cpu_set)},
                   {"cpu_seconds", cpu_seconds()},
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
  // Only engines that have these parts are asked (a GPU engine's stats() is not free).
  const bool multi_gpu = options_.gpus_per_isn > 1 || options_.engine.gpu_range_engine;
  if (options_.scheduler.policy.empty() && (options_.engine.list_cache.enabled() || multi_gpu)) {
    const nlohmann::json e = engine_.stats();
    // The GPU list cache's hit rates, shipping, post-processing and split (--gpu-mem).
    if (options_.engine.list_cache.enabled())
      for (const char* key : {"list_cache", "list_cache_setup"})
        if (e.contains(key)) j[key] = e[key];
    // Several GPUs per ISN (--gpus-per-isn G, gpu/multi_gpu_engine.hpp): the GPUs, the time
    // their ranges computed and the time the NCCL gather and merge took (issue 15's merge
    // share), and the bytes the lead GPU received.
    if (multi_gpu && e.is_object() && e.contains("merge_seconds"))
      j["multi_gpu"] = {{"split", e.value("split", std::string("ranges"))},
                        {"devices", e.value("devices", nlohmann::json::array())},
                        {"batches", e.value("batches", std::uint64_t{0})},
                        {"range_seconds", e.value("range_seconds", 0.0)},
                        {"merge_seconds", e.value("merge_seconds", 0.0)},
                        {"nccl_bytes_received", e.value("nccl_bytes_received", std::uint64_t{0})}};
  }
  return j;
}

}  // namespace isn_detail

using isn_detail::BatchLoop;

int run_isn(const IsnOptions& options, MPI_Comm world) {
  Placement where = place_isn(options, world);
  const std::unique_ptr<SharedThresholdWindow> thresholds = open_threshold_window(where);
  StartedIsn started = start_isn(options, where, world);
  // Sharing: the node's shards start each query from the collection's K-th impact bounds
  // (collective over the node's ISNs, so before a failed one leaves).
  std::shared_ptr<const KthImpactTable> collection_seeds;
  if (thresholds) {
    auto* cpu = started.engine ? dynamic_cast<cpu::CpuEngine*>(started.engine->active_primary())
                               : nullptr;
    const bool want = options.share_kth_seeds && cpu && cpu->kth_impacts();
    const std::uint64_t vocabulary =
        started.index ? std::hash<std::string>{}(wire::vocabulary_fingerprint(
                            started.index->shard(0).manifest(), started.index->shard(0).num_terms()))
                      : 0;
    try {
      collection_seeds =
          thresholds->combine_seed_tables(want ? cpu->kth_impacts() : nullptr, vocabulary);
    } catch (const std::exception& e) {
      std::cerr << where.who << ": " << e.what() << "; each shard seeds from its own table\n";
    }
  }
  if (!started.engine) return 1;  // the aggregator reports the hello's error
  BatchLoop loop(options, where, started.index->shard(0), *started.engine, started.second.get(),
                 thresholds.get(), world);
  if (collection_seeds) loop.use_collection_seeds(std::move(collection_seeds));
  loop.run();
  return 0;
}

}  // namespace gpusearch
