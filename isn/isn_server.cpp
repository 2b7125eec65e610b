#include "isn/isn_server.hpp"

#include <unistd.h>

#include <chrono>
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
#include "isn/fallback_engine.hpp"
#include "isn/parallel_batch_engine.hpp"

namespace gpusearch {

namespace {

using Clock = std::chrono::steady_clock;
using namespace wire;

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::uint64_t steady_us(Clock::time_point t) {
  return std::uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

// A batch received by the MPI thread, waiting for the engine thread.
struct Inbound {
  Received message;
  Clock::time_point received;
};

std::uint64_t mapped_bytes(const ShardManifest& m) {
  std::uint64_t b = 0;
  for (const auto& [name, rec] : m.files) b += rec.bytes;
  return b;
}

}  // namespace

int run_isn(const IsnOptions& options, MPI_Comm world) {
  int rank = 0, size = 0;
  GPUSEARCH_MPI_CHECK(MPI_Comm_rank(world, &rank));
  GPUSEARCH_MPI_CHECK(MPI_Comm_size(world, &size));
  // The node-local rank among ISNs picks the GPU(s). Collective with the aggregator's split.
  MPI_Comm isns, node;
  GPUSEARCH_MPI_CHECK(MPI_Comm_split(world, 1, rank, &isns));
  GPUSEARCH_MPI_CHECK(MPI_Comm_split_type(isns, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int local_rank = 0;
  GPUSEARCH_MPI_CHECK(MPI_Comm_rank(node, &local_rank));
  MPI_Comm_free(&node);
  MPI_Comm_free(&isns);
  const char* env_local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");

  const std::uint32_t shard_id = std::uint32_t(rank - 1);
  const std::string who = fmt::format("gpusearch-isn[{}]", rank);
  EngineOptions eo = options.engine;
  if (eo.gpu_device < 0) {
    eo.gpu_device = int(unsigned(local_rank) * options.gpus_per_isn);
    // More ISNs on a node than GPUs: they share the GPUs round-robin instead of asking for
    // ordinals that do not exist.
    const int gpus = gpu_device_count();
    if (gpus > 0 && eo.gpu_device >= gpus && resolve_engine_name(eo.engine) == "gpu") {
      std::cerr << fmt::format("{}: GPU {} does not exist ({} present); sharing GPU {}\n",
                               fmt::format("gpusearch-isn[{}]", rank), eo.gpu_device, gpus,
                               eo.gpu_device % gpus);
      eo.gpu_device %= gpus;
    }
  }
  if (resolve_engine_name(eo.engine) == "gpu")
    eo.gpu_inject_fault_at_call = options.inject_gpu_fault_at_batch;

  std::unique_ptr<Index> index;
  std::unique_ptr<FallbackEngine> engine;
  nlohmann::json hello;
  const auto t_open = Clock::now();
  try {
    const RootManifest root = read_root_manifest(options.index_dir / kRootManifestName);
    if (root.shards.size() != std::size_t(size - 1))
      throw Error(fmt::format("the index has {} shard(s) but the job has {} ISN(s)",
                              root.shards.size(), size - 1));
    OpenOptions oo;
    oo.verify_checksums = options.verify_checksums;
    index = std::make_unique<Index>(Index::open_shard(options.index_dir, shard_id, oo));
    const ShardIndex& shard = index->shard(0);
    // The GPU engine takes the whole batch in its own launches (and is not re-entrant); the
    // CPU engines are spread over the cores in chunks.
    std::unique_ptr<QueryEngine> primary = make_engine(eo, shard, shard_id);
    if (eo.engine != "gpu")
      primary = std::make_unique<ParallelBatchEngine>(std::move(primary),
                                                      options.parallel_chunk_queries);
    // The GPU engine fails for real inside (a failing CUDA call through its checked path); any
    // other engine is wrapped in a fault injector.
    if (options.inject_gpu_fault_at_batch > 0 && resolve_engine_name(eo.engine) != "gpu")
      primary = std::make_unique<FaultInjectingEngine>(std::move(primary),
                                                       options.inject_gpu_fault_at_batch);
    EngineOptions fo = eo;
    fo.engine = options.fallback_engine;
    fo.algorithm.clear();
    const std::size_t chunk = options.parallel_chunk_queries;
    engine = std::make_unique<FallbackEngine>(
        std::move(primary),
        [fo, &shard, shard_id, chunk] {
          return std::make_unique<ParallelBatchEngine>(make_engine(fo, shard, shard_id), chunk);
        },
        who);
    const auto pos = shard.input_positions();
    const auto ranks = shard.global_ranks();
    std::uint32_t pos_min = 0, pos_max = 0, rank_min = 0, rank_max = 0;
    if (!pos.empty()) {
      auto [a, b] = std::minmax_element(pos.begin(), pos.end());
      auto [c, d] = std::minmax_element(ranks.begin(), ranks.end());
      pos_min = *a, pos_max = *b, rank_min = *c, rank_max = *d;
    }
    hello = {{"rank", rank},
             {"host", host_name()},
             {"local_rank", local_rank},
             {"ompi_local_rank", env_local ? std::atoi(env_local) : -1},
             {"gpu_device", eo.gpu_device},
             {"shard", shard_id},
             {"docs", shard.num_docs()},
             {"input_range", {pos_min, pos_max}},
             {"global_rank_range", {rank_min, rank_max}},
             {"postings", shard.manifest().num_postings},
             {"mapped_bytes", mapped_bytes(shard.manifest())},
             {"rss_bytes", current_rss_bytes()},
             {"open_seconds", std::chrono::duration<double>(Clock::now() - t_open).count()},
             {"engine", std::string(engine->name())},
             {"vocabulary", vocabulary_fingerprint(shard.manifest(), shard.num_terms())},
             {"clock_us", steady_us(Clock::now())}};
    std::cerr << fmt::format(
        "{}: shard {} on {}: {} docs (input positions {}..{}), {:.1f} MiB mapped, RSS {:.1f} "
        "MiB, engine {}, GPU ordinal {}\n",
        who, shard_id, host_name(), shard.num_docs(), pos_min, pos_max,
        mapped_bytes(shard.manifest()) / 1048576.0, current_rss_bytes() / 1048576.0, engine->name(),
        eo.gpu_device);
  } catch (const std::exception& e) {
    hello = {{"rank", rank}, {"error", e.what()}};
  }
  send_blocking(encode_message(Control{Control::Kind::kHello, hello.dump()}), 0, kTagControl,
                world);
  if (hello.contains("error")) {
    // The aggregator reports it once and shuts every ISN down; this one is done.
    return 1;
  }

  const ShardIndex& shard = index->shard(0);

  // Shared between the MPI thread and the engine thread, under `mutex`.
  std::mutex mutex;
  std::condition_variable work_ready;
  std::deque<Inbound> inbox;
  std::deque<std::shared_ptr<const OutgoingMessage>> outbox;
  bool stop = false, engine_busy = false;
  Clock::time_point busy_since{};
  double compute_ewma_us = 0;  // the engine's time per batch, to predict when it needs the next
  // Owned by the engine thread; read by the MPI thread only when the engine is idle.
  std::uint64_t batches = 0, queries = 0, compute_us = 0, unknown_terms = 0, rejected = 0,
                failed_batches = 0, idle_us = 0, encode_us = 0, answer_bytes = 0,
                queries_by_id = 0;
  ProgressPacer pacer(options.pacing);

  auto answer_batch = [&](Inbound in, Clock::time_point idle_since) {
    QueryBatch batch;
    try {
      batch = decode_query_batch(in.message.data());
    } catch (const WireError& e) {
      ++rejected;
      std::cerr << who << ": " << e.what() << '\n';
      return;
    }
    if (options.inject_delay_ms > 0 &&
        (options.inject_delay_rank < 0 || options.inject_delay_rank == rank))
      std::this_thread::sleep_for(std::chrono::milliseconds(options.inject_delay_ms));

    const auto t0 = Clock::now();
    std::vector<Query> qs(batch.queries.size());
    for (std::size_t i = 0; i < qs.size(); ++i) {
      WireQuery& wq = batch.queries[i];
      qs[i].id = std::move(wq.id);
      if (!wq.term_ids.empty()) ++queries_by_id;
      for (std::uint32_t id : wq.term_ids) {
        if (id < shard.num_terms())
          qs[i].terms.push_back(id);
        else
          ++unknown_terms;  // the aggregator checked the vocabulary: only bad bytes get here
      }
      for (const std::string& t : wq.terms) {
        if (auto id = shard.find_term(t))
          qs[i].terms.push_back(*id);
        else
          ++unknown_terms;  // the vocabulary is global: only a mismatched index gets here
      }
    }
    ResultHeader header;
    header.batch_id = batch.batch_id;
    header.isn_rank = std::uint32_t(rank);
    header.shard_id = shard_id;
    header.received_us = steady_us(in.received);
    header.start_us = steady_us(t0);
    std::vector<ShardResult> results(qs.size());
    try {
      engine->search(qs, batch.params, results);
    } catch (const std::exception& e) {
      ++failed_batches;
      header.error = e.what();
      results.clear();
      std::cerr << who << ": batch " << batch.batch_id << " failed: " << e.what() << '\n';
    }
    const auto t1 = Clock::now();
    header.end_us = steady_us(t1);
    header.fallback_active = engine->fallback_active();
    header.compute_us = std::uint64_t(
        std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count());
    header.idle_us = std::uint64_t(
        std::chrono::duration_cast<std::chrono::microseconds>(t0 - idle_since).count());
    auto message = std::make_shared<const OutgoingMessage>(encode_results(
        header, results, [&](DocId d) { return shard.external_id(d); }));
    const auto t2 = Clock::now();
    compute_us += header.compute_us;
    idle_us += header.idle_us;
    encode_us += std::uint64_t(
        std::chrono::duration_cast<std::chrono::microseconds>(t2 - t1).count());
    answer_bytes += message->bytes();
    ++batches;
    queries += qs.size();
    {
      std::lock_guard lock(mutex);
      outbox.push_back(std::move(message));
      const double us = double(header.compute_us);
      compute_ewma_us = compute_ewma_us == 0 ? us : 0.8 * compute_ewma_us + 0.2 * us;
    }
    pacer.notify();  // the MPI thread sends it now, not at its next polling round
  };

  std::thread engine_thread([&] {
    auto idle_since = Clock::now();  // when the engine last finished (or started)
    for (;;) {
      Inbound in;
      {
        std::unique_lock lock(mutex);
        engine_busy = false;
        work_ready.wait(lock, [&] { return stop || !inbox.empty(); });
        if (inbox.empty()) return;  // stop, nothing left
        in = std::move(inbox.front());
        inbox.pop_front();
        engine_busy = true;
        busy_since = Clock::now();
      }
      answer_batch(std::move(in), idle_since);
      idle_since = Clock::now();
    }
  });
  // The engine thread must end before the objects it uses, whatever happens below.
  struct JoinOnExit {
    std::thread& t;
    std::mutex& m;
    std::condition_variable& cv;
    bool& stop;
    ~JoinOnExit() {
      {
        std::lock_guard lock(m);
        stop = true;
      }
      cv.notify_all();
      t.join();
    }
  } join_on_exit{engine_thread, mutex, work_ready, stop};

  auto stats = [&] {
    return nlohmann::json{{"rank", rank},
                          {"shard", shard_id},
                          {"batches", batches},
                          {"queries", queries},
                          {"queries_sent_as_term_ids", queries_by_id},
                          {"compute_seconds", compute_us / 1e6},
                          {"idle_seconds", idle_us / 1e6},
                          {"encode_seconds", encode_us / 1e6},
                          {"answer_bytes", answer_bytes},
                          {"unknown_terms", unknown_terms},
                          {"rejected_messages", rejected},
                          {"failed_batches", failed_batches},
                          {"engine", std::string(engine->name())},
                          {"fallback_active", engine->fallback_active()},
                          {"fallback_reason", engine->failure()},
                          {"batches_on_fallback", engine->batches_on_fallback()},
                          {"progress", pacer.stats()},
                          {"rss_bytes", current_rss_bytes()},
                          {"peak_rss_bytes", peak_rss_bytes()}};
  };

  std::deque<PendingSend> sends;
  // When batches arrive: the next is due about one gap after the last (a quarter early, for the
  // variance), unless none has come for three gaps (the aggregator is idle or done).
  Clock::time_point last_batch_at{};
  double batch_gap_us = 0;
  // A stats request or a shutdown: answered once every batch received before it is sent.
  bool stats_wanted = false, shutdown_wanted = false;
  for (;;) {
    bool did = false;
    while (auto m = try_receive(world, 0, MPI_ANY_TAG)) {
      did = true;
      const auto received = Clock::now();
      if (!m->rejected.empty()) {
        ++rejected;
        std::cerr << who << ": rejected " << m->rejected << '\n';
        continue;
      }
      if (m->tag == kTagQueryBatch) {
        if (last_batch_at != Clock::time_point{}) {
          const double gap =
              std::chrono::duration<double, std::micro>(received - last_batch_at).count();
          batch_gap_us = batch_gap_us == 0 ? gap : 0.8 * batch_gap_us + 0.2 * gap;
        }
        last_batch_at = received;
        {
          std::lock_guard lock(mutex);
          inbox.push_back({std::move(*m), received});
        }
        work_ready.notify_one();
        continue;
      }
      if (m->tag != kTagControl) {
        ++rejected;
        continue;
      }
      Control c;
      try {
        c = decode_control(m->data());
      } catch (const WireError& e) {
        ++rejected;
        std::cerr << who << ": " << e.what() << '\n';
        continue;
      }
      if (c.kind == Control::Kind::kClockPing) {
        // Answered at once, with the time the ping arrived: the aggregator's offset estimate is
        // only as good as this reply is prompt.
        Control pong{Control::Kind::kClockPong, "", steady_us(received)};
        send_blocking(encode_message(pong), 0, kTagControl, world);
      } else if (c.kind == Control::Kind::kShutdown || c.kind == Control::Kind::kStatsRequest) {
        stats_wanted = true;
        shutdown_wanted = shutdown_wanted || c.kind == Control::Kind::kShutdown;
      }
      // ranker-cache commands: not implemented yet
    }
    std::deque<std::shared_ptr<const OutgoingMessage>> ready;
    bool drained = false, inbox_empty = true;
    auto due = Clock::time_point::max();
    {
      std::lock_guard lock(mutex);
      ready.swap(outbox);
      drained = inbox.empty() && !engine_busy;
      inbox_empty = inbox.empty();
      // The engine will want its next batch about when this one ends: be polling by then.
      if (engine_busy && inbox.empty())
        due = busy_since + std::chrono::microseconds(std::uint64_t(compute_ewma_us));
    }
    for (auto& msg : ready) {
      did = true;
      sends.emplace_back(std::move(msg), 0, kTagResultBatch, world);
    }
    while (!sends.empty() && sends.front().test()) {
      sends.pop_front();
      did = true;
    }
    if (stats_wanted && drained && ready.empty()) {
      // Results go out before the stats, so the aggregator sees them in order.
      for (auto& s : sends)
        while (!s.test()) std::this_thread::yield();
      sends.clear();
      send_blocking(encode_message(Control{Control::Kind::kStatsReply, stats().dump()}), 0,
                    kTagControl, world);
      if (shutdown_wanted) break;
      stats_wanted = false;
      did = true;
    }
    const auto now = Clock::now();
    // The next batch matters only when none waits for the engine: with batches queued, a late
    // receive costs nothing, and each early wake-up takes a core from the engine (measured on
    // 2 cores: with 40-90 wake-ups per batch the engine ran 1.4-2.6x slower; NOTES-cluster.md).
    if (batch_gap_us > 0 && inbox_empty) {
      const auto gap = std::chrono::microseconds(std::int64_t(batch_gap_us));
      if (now < last_batch_at + 3 * gap + std::chrono::milliseconds(1))
        due = std::min(due, last_batch_at + gap * 3 / 4);
    }
    if (did)
      pacer.activity(now);
    else
      // An answer in flight needs this rank's progress: Open MPI's rendezvous for messages
      // above the eager limit moves only while both sides poll (measured: without it an answer
      // took ~1 ms longer to reach the aggregator).
      pacer.idle(now, due, !sends.empty());
  }
  return 0;
}

}  // namespace gpusearch
