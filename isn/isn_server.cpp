#include "isn/isn_server.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/index_format.hpp"
#include "common/progress.hpp"
#include "common/shard_index.hpp"
#include "common/wire/mpi_transport.hpp"
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

// Blocks until a message from the aggregator arrives, polling with a sleep that doubles from
// idle_sleep_us to 1 ms: a blocking MPI_Probe spins a core, which an oversubscribed node cannot
// spare.
Received receive_from_aggregator(MPI_Comm world, unsigned idle_sleep_us) {
  for (unsigned round = 0;; ++round) {
    if (auto m = try_receive(world, 0, MPI_ANY_TAG)) return std::move(*m);
    std::this_thread::sleep_for(std::chrono::microseconds(
        std::min<std::uint64_t>(1000, std::uint64_t(idle_sleep_us) << std::min(round, 4u))));
  }
}

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
             {"engine", std::string(engine->name())}};
    std::cerr << fmt::format(
        "{}: shard {} on {}: {} docs (input positions {}..{}), {:.1f} MiB mapped, RSS {:.1f} "
        "MiB, engine {}, GPU ordinal {}\n",
        who, shard_id, host_name(), shard.num_docs(), pos_min, pos_max,
        mapped_bytes(shard.manifest()) / 1048576.0, current_rss_bytes() / 1048576.0, engine->name(),
        eo.gpu_device);
  } catch (const std::exception& e) {
    hello = {{"rank", rank}, {"error", e.what()}};
  }
  send_blocking(encode(Control{Control::Kind::kHello, hello.dump()}), 0, kTagControl, world);
  if (hello.contains("error")) {
    // The aggregator reports it once and shuts every ISN down; this one is done.
    return 1;
  }

  const ShardIndex& shard = index->shard(0);
  std::uint64_t batches = 0, queries = 0, compute_us = 0, unknown_terms = 0, rejected = 0,
                failed_batches = 0;
  std::deque<PendingSend> sends;
  std::uint64_t idle_us = 0;
  auto idle_since = Clock::now();  // when this ISN last had nothing to do
  auto stats = [&] {
    return nlohmann::json{{"rank", rank},
                          {"shard", shard_id},
                          {"batches", batches},
                          {"queries", queries},
                          {"compute_seconds", compute_us / 1e6},
                          {"idle_seconds", idle_us / 1e6},
                          {"unknown_terms", unknown_terms},
                          {"rejected_messages", rejected},
                          {"failed_batches", failed_batches},
                          {"engine", std::string(engine->name())},
                          {"fallback_active", engine->fallback_active()},
                          {"fallback_reason", engine->failure()},
                          {"batches_on_fallback", engine->batches_on_fallback()},
                          {"rss_bytes", current_rss_bytes()},
                          {"peak_rss_bytes", peak_rss_bytes()}};
  };
  for (;;) {
    while (!sends.empty() && sends.front().test()) sends.pop_front();
    Received m = receive_from_aggregator(world, options.idle_sleep_us);
    if (!m.rejected.empty()) {
      ++rejected;
      std::cerr << who << ": rejected " << m.rejected << '\n';
      continue;
    }
    if (m.tag == kTagControl) {
      Control c;
      try {
        c = decode_control(m.data());
      } catch (const WireError& e) {
        ++rejected;
        std::cerr << who << ": " << e.what() << '\n';
        continue;
      }
      if (c.kind == Control::Kind::kShutdown || c.kind == Control::Kind::kStatsRequest) {
        // Results go out before the stats so the aggregator sees them in order.
        for (auto& s : sends)
          while (!s.test()) std::this_thread::sleep_for(std::chrono::microseconds(50));
        sends.clear();
        send_blocking(encode(Control{Control::Kind::kStatsReply, stats().dump()}), 0, kTagControl,
                      world);
        if (c.kind == Control::Kind::kShutdown) break;
      }
      continue;  // ranker-cache commands: not implemented yet
    }
    if (m.tag != kTagQueryBatch) {
      ++rejected;
      continue;
    }
    QueryBatch batch;
    try {
      batch = decode_query_batch(m.data());
    } catch (const WireError& e) {
      ++rejected;
      std::cerr << who << ": " << e.what() << '\n';
      continue;
    }
    if (options.inject_delay_ms > 0 &&
        (options.inject_delay_rank < 0 || options.inject_delay_rank == rank))
      std::this_thread::sleep_for(std::chrono::milliseconds(options.inject_delay_ms));

    const auto t0 = Clock::now();
    const std::uint64_t batch_idle_us = std::uint64_t(
        std::chrono::duration_cast<std::chrono::microseconds>(t0 - idle_since).count());
    std::vector<Query> qs(batch.queries.size());
    for (std::size_t i = 0; i < qs.size(); ++i) {
      qs[i].id = batch.queries[i].id;
      for (const std::string& t : batch.queries[i].terms) {
        if (auto id = shard.find_term(t))
          qs[i].terms.push_back(*id);
        else
          ++unknown_terms;  // the vocabulary is global: only a mismatched index gets here
      }
    }
    ResultBatch out;
    out.batch_id = batch.batch_id;
    out.isn_rank = std::uint32_t(rank);
    out.shard_id = shard_id;
    std::vector<ShardResult> results(qs.size());
    try {
      engine->search(qs, batch.params, results);
      out.answers.resize(qs.size());
      for (std::size_t i = 0; i < qs.size(); ++i) {
        ShardAnswer& a = out.answers[i];
        for (const RankedDoc& h : results[i].hits) a.hit_ids.emplace_back(shard.external_id(h.doc));
        for (const RankedDoc& h : results[i].or_hits)
          a.or_hit_ids.emplace_back(shard.external_id(h.doc));
        a.result = std::move(results[i]);
      }
    } catch (const std::exception& e) {
      ++failed_batches;
      out.error = e.what();
      out.answers.clear();
      std::cerr << who << ": batch " << batch.batch_id << " failed: " << e.what() << '\n';
    }
    out.fallback_active = engine->fallback_active();
    out.compute_us = std::uint64_t(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count());
    out.idle_us = batch_idle_us;
    compute_us += out.compute_us;
    idle_us += batch_idle_us;
    ++batches;
    queries += qs.size();
    auto buf = std::make_shared<const WireBytes>(encode(out));
    sends.emplace_back(buf, buf->size() * sizeof(std::uint64_t), 0, kTagResultBatch, world);
    idle_since = Clock::now();
  }
  return 0;
}

}  // namespace gpusearch
