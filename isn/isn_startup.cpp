#include "isn/isn_startup.hpp"

#include <unistd.h>

#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "common/progress.hpp"
#include "common/shard_index.hpp"
#include "common/thread_placement.hpp"
#include "common/wire/mpi_transport.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/isn_engine_stack.hpp"
#include "isn/ranker/ranker_backend.hpp"
#include "isn/ranker/ranker_cache.hpp"
#include "isn/ranker/ranker_store.hpp"

namespace gpusearch {

namespace {

using Clock = std::chrono::steady_clock;
using namespace wire;

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::uint64_t mapped_bytes(const ShardManifest& m) {
  std::uint64_t b = 0;
  for (const auto& [name, rec] : m.files) b += rec.bytes;
  return b;
}

}  // namespace

Placement place_isn(const IsnOptions& options, MPI_Comm world) {
  Placement p;
  GPUSEARCH_MPI_CHECK(MPI_Comm_rank(world, &p.rank));
  GPUSEARCH_MPI_CHECK(MPI_Comm_size(world, &p.size));
  // The node-local rank among ISNs picks the GPU(s).
  MPI_Comm isns, node;
  GPUSEARCH_MPI_CHECK(MPI_Comm_split(world, 1, p.rank, &isns));
  GPUSEARCH_MPI_CHECK(
      MPI_Comm_split_type(isns, MPI_COMM_TYPE_SHARED, p.rank, MPI_INFO_NULL, &node));
  GPUSEARCH_MPI_CHECK(MPI_Comm_rank(node, &p.local_rank));
  GPUSEARCH_MPI_CHECK(MPI_Comm_size(node, &p.local_isns));
  p.node_isns = node;
  MPI_Comm_free(&isns);
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"))
    p.ompi_local_rank = std::atoi(env);
  p.shard_id = std::uint32_t(p.rank - 1);
  p.who = fmt::format("gpusearch-isn[{}]", p.rank);
  p.gpu_device = options.engine.gpu_device;
  const int gpus = gpu_device_count();
  const bool uses_gpu = resolve_engine_name(options.engine.engine) == "gpu" && gpus > 0;
  if (options.gpus_per_isn == 0) {
    p.error = "--gpus-per-isn 0: an ISN needs at least one GPU (use --engine cpu for none)";
  } else if (uses_gpu && int(options.gpus_per_isn) > gpus) {
    p.error = fmt::format("--gpus-per-isn {} but this node ({}) has {} GPU(s)",
                          options.gpus_per_isn, host_name(), gpus);
  } else if (uses_gpu && options.engine.gpu_device >= gpus) {
    p.error = fmt::format("--gpu {} but this node ({}) has {} GPU(s): ordinals 0..{}",
                          options.engine.gpu_device, host_name(), gpus, gpus - 1);
  } else if (p.gpu_device < 0) {
    p.gpu_device = int(unsigned(p.local_rank) * options.gpus_per_isn);
    // More ISNs on a node than GPUs: they share the GPUs round-robin instead of asking for
    // ordinals that do not exist. Also with the CPU engine: the second-stage ranker may still
    // run on the GPU.
    if (gpus > 0 && p.gpu_device >= gpus) {
      if (uses_gpu)
        std::cerr << fmt::format(
            "{}: node-local ISN {} would use GPU {}, which does not exist ({} present): ISNs "
            "share the GPUs round-robin, this one GPU {}\n",
            p.who, p.local_rank, p.gpu_device, gpus, p.gpu_device % gpus);
      p.gpu_device %= gpus;
    }
    if (uses_gpu && options.gpus_per_isn > 1)
      std::cerr << fmt::format(
          "{}: --gpus-per-isn {}: GPUs {}..{} (mod {}) are this ISN's; {}\n", p.who,
          options.gpus_per_isn, p.gpu_device, p.gpu_device + int(options.gpus_per_isn) - 1, gpus,
          options.engine.gpu_split == "queries"
              ? std::string("each holds the whole shard and answers a share of each batch's "
                            "queries (--gpu-split queries)")
              : fmt::format("its shard is split by docID range across them, the ranges' top-k "
                            "merged on GPU {} through NCCL",
                            p.gpu_device));
    if (uses_gpu) {
      // The ISNs of this node whose GPUs include this one's first (each holds a shard image).
      p.isns_on_device = 0;
      for (int r = 0; r < p.local_isns; ++r)
        for (unsigned i = 0; i < options.gpus_per_isn; ++i)
          if (int(unsigned(r) * options.gpus_per_isn + i) % gpus == p.gpu_device) {
            ++p.isns_on_device;
            break;
          }
    }
  } else if (uses_gpu) {
    // --gpu D for every ISN of the node: they all share D.
    p.isns_on_device = unsigned(p.local_isns);
  }
  try {
    p.share_thresholds = parse_share_thresholds(options.share_thresholds);
  } catch (const std::exception& e) {
    if (p.error.empty()) p.error = e.what();  // every ISN alike: none opens the window
  }
  // Before the shard is opened: the threads that open it (oneTBB's) and every later one
  // inherit the CPUs.
  try {
    p.cpu_set = cpus_to_pin(options.pin_cores, p.local_rank, p.local_isns);
    if (!p.cpu_set.empty()) {
      pin_process_threads(p.cpu_set);
      std::cerr << fmt::format("{}: --pin-cores {}: node-local ISN {} of {} runs on CPUs {}\n",
                               p.who, options.pin_cores, p.local_rank, p.local_isns,
                               format_cpu_list(p.cpu_set));
    }
  } catch (const std::exception& e) {
    if (p.error.empty()) p.error = e.what();
    p.cpu_set.clear();
  }
  return p;
}

namespace {

std::unique_ptr<IsnSecondStage> make_second_stage(const IsnOptions& options, const Placement& where,
                                                  const ShardIndex& shard, const OpenOptions& oo) {
  if (!options.ranking.enabled()) return nullptr;
  auto s = std::make_unique<IsnSecondStage>(
      IsnSecondStage{ranker::RankerStore::open(options.ranking.store_dir),
                     ranker::make_ranker_backend(options.ranking.backend, where.gpu_device),
                     ForwardIndex::open(shard, oo), nullptr, nullptr});
  s->cache =
      std::make_unique<ranker::RankerCache>(s->store, *s->backend, options.ranking.cache_bytes);
  s->cache->set_coordinated(options.ranker_cache_policy == "coordinated");
  s->ranker =
      std::make_unique<ranker::SecondStageRanker>(shard, s->forward, *s->cache, *s->backend);
  return s;
}

StartedIsn open_shard_and_engine(const IsnOptions& options, const Placement& where) {
  StartedIsn s;
  const auto t_open = Clock::now();
  const RootManifest root = read_root_manifest(options.index_dir / kRootManifestName);
  if (root.shards.size() != std::size_t(where.size - 1))
    throw Error(fmt::format("the index has {} shard(s) but the job has {} ISN(s)",
                            root.shards.size(), where.size - 1));
  OpenOptions oo;
  oo.verify_checksums = options.verify_checksums;
  oo.external_ids_in_huge_pages = options.id_table_in_huge_pages;
  s.index = std::make_unique<Index>(Index::open_shard(options.index_dir, where.shard_id, oo));
  const ShardIndex& shard = s.index->shard(0);
  IsnEngineStackOptions so;
  so.engine = options.engine;
  so.engine.gpu_device = where.gpu_device;
  so.engine.gpus = options.gpus_per_isn;
  so.engine.list_cache.index_dir = options.index_dir;
  so.fallback_engine = options.fallback_engine;
  so.parallel_chunk_queries = options.parallel_chunk_queries;
  so.inject_engine_fault_at_batch = options.inject_engine_fault_at_batch;
  so.scheduler = options.scheduler;
  so.isns_on_device = where.isns_on_device;
  s.engine = make_isn_engine_stack(so, shard, where.shard_id, where.who);
  s.second = make_second_stage(options, where, shard, oo);
  double prepare_seconds = 0;
  if (options.prepare_params) {
    SearchParams p = *options.prepare_params;
    if (std::isnan(p.alpha)) p.alpha = root.params.gs_alpha;  // as the aggregator resolves it
    const auto t_prepare = Clock::now();
    s.engine->prepare(p);
    prepare_seconds = std::chrono::duration<double>(Clock::now() - t_prepare).count();
  }

  const auto pos = shard.input_positions();
  const auto ranks = shard.global_ranks();
  std::uint32_t pos_min = 0, pos_max = 0, rank_min = 0, rank_max = 0;
  if (!pos.empty()) {
    auto [a, b] = std::minmax_element(pos.begin(), pos.end());
    auto [c, d] = std::minmax_element(ranks.begin(), ranks.end());
    pos_min = *a, pos_max = *b, rank_min = *c, rank_max = *d;
  }
  s.hello = {{"rank", where.rank},
             {"host", host_name()},
             {"local_rank", where.local_rank},
             {"ompi_local_rank", where.ompi_local_rank},
             {"gpu_device", where.gpu_device},
             {"shard", where.shard_id},
             {"docs", shard.num_docs()},
             {"input_range", {pos_min, pos_max}},
             {"global_rank_range", {rank_min, rank_max}},
             {"postings", shard.manifest().num_postings},
             {"mapped_bytes", mapped_bytes(shard.manifest())},
             {"rss_bytes", current_rss_bytes()},
             {"open_seconds", std::chrono::duration<double>(Clock::now() - t_open).count()},
             {"prepare_seconds", prepare_seconds},
             {"engine", std::string(s.engine->name())},
             {"vocabulary", vocabulary_fingerprint(shard.manifest(), shard.num_terms())},
             {"ranker_backend", s.second ? nlohmann::json(std::string(s.second->backend->name()))
                                         : nlohmann::json(nullptr)},
             {"clock_us", steady_us(Clock::now())}};
  std::cerr << fmt::format(
      "{}: shard {} on {}: {} docs (input positions {}..{}), {:.1f} MiB mapped, RSS {:.1f} "
      "MiB, engine {}, GPU ordinal {}\n",
      where.who, where.shard_id, host_name(), shard.num_docs(), pos_min, pos_max,
      mapped_bytes(shard.manifest()) / 1048576.0, current_rss_bytes() / 1048576.0, s.engine->name(),
      where.gpu_device);
  return s;
}

}  // namespace

StartedIsn start_isn(const IsnOptions& options, const Placement& where, MPI_Comm world) {
  StartedIsn s;
  try {
    if (!where.error.empty()) throw InputError("gpusearch-isn", 0, where.error);
    s = open_shard_and_engine(options, where);
  } catch (const std::exception& e) {
    s = StartedIsn{};
    s.hello = {{"rank", where.rank}, {"error", e.what()}};
  }
  send_blocking(encode_message(Control{Control::Kind::kHello, s.hello.dump()}), 0, kTagControl,
                world);
  return s;
}

std::unique_ptr<SharedThresholdWindow> open_threshold_window(Placement& where) {
  MPI_Comm node = where.node_isns;
  where.node_isns = MPI_COMM_NULL;
  if (where.share_thresholds == ShareThresholds::kOff || where.local_isns < 2) {
    if (where.share_thresholds == ShareThresholds::kOn && where.local_rank == 0)
      std::cerr << fmt::format(
          "{}: --share-thresholds on: not available: this ISN is alone on its node ({}), "
          "nothing to share\n",
          where.who, host_name());
    MPI_Comm_free(&node);
    return nullptr;
  }
  try {
    return std::make_unique<SharedThresholdWindow>(node);
  } catch (const std::exception& e) {
    std::cerr << where.who << ": " << e.what() << "; each ISN prunes alone\n";
    return nullptr;
  }
}

}  // namespace gpusearch
