#include "isn/isn_engine_stack.hpp"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <tbb/global_control.h>

#include "common/error.hpp"
#include "isn/memo_engine.hpp"
#include "isn/online_cost_predictor.hpp"
#include "isn/parallel_batch_engine.hpp"

namespace gpusearch {

std::string engine_for_this_node(const std::string& requested, const std::string& report_prefix) {
  const std::string name = resolve_engine_name(requested);
  if (name != "gpu" || gpu_device_count() > 0) return name;
  const auto names = engine_names();
  const bool built = std::find(names.begin(), names.end(), "gpu") != names.end();
  std::cerr << fmt::format("{}: --engine gpu, but {}: running the CPU engine instead\n",
                           report_prefix,
                           built ? "this node has no usable CUDA device"
                                 : "this build has no GPU engine (configured without CUDA)");
  return "cpu";
}

namespace {

std::vector<Query> read_training_queries(const IsnSchedulerOptions& o, const ShardIndex& shard) {
  if (o.train_file.empty() || !std::filesystem::exists(o.train_file))
    throw InputError("--scheduler-train", 0,
                     fmt::format("--scheduler {} needs training queries for its cost predictor: "
                                 "give --scheduler-train FILE (TSV or TREC topics){}",
                                 o.policy,
                                 o.train_file.empty()
                                     ? ""
                                     : fmt::format(" ({} does not exist)", o.train_file.string())));
  const QueryFile f = read_query_file(o.train_file);
  std::vector<Query> queries;
  for (const QueryText& qt : f.queries) {
    if (queries.size() >= o.train_queries) break;
    Query q;
    QueryProblem problem;
    if (resolve_query(shard, qt, {}, q, problem, o.train_file.string()) && !q.terms.empty())
      queries.push_back(std::move(q));
  }
  if (queries.size() < 4 * CostModel::kFeatures)
    throw InputError("--scheduler-train", 0,
                     fmt::format("{} holds {} usable queries; the cost predictor needs at least {}",
                                 o.train_file.string(), queries.size(), 4 * CostModel::kFeatures));
  return queries;
}

}  // namespace

std::unique_ptr<FallbackEngine> make_isn_engine_stack(const IsnEngineStackOptions& options,
                                                      const ShardIndex& shard,
                                                      std::uint32_t shard_id,
                                                      const std::string& report_prefix) {
  EngineOptions eo = options.engine;
  eo.engine = engine_for_this_node(eo.engine, report_prefix);
  const bool gpu = eo.engine == "gpu";
  eo.list_cache.engines_on_device = options.isns_on_device;
  // With a list cache the engine sizes itself to --gpu-mem (isn/list_cache_setup.hpp); the
  // whole-image check is for the engine without one.
  if (gpu && !eo.list_cache.enabled()) {
    const nlohmann::json plan = check_gpu_memory(shard, eo.gpu_device, options.isns_on_device);
    if (!plan.empty())
      std::cerr << fmt::format(
          "{}: GPU {} memory: device image {:.2f} GiB + buffers {:.2f} GiB, {} ISN(s) on it, "
          "{:.2f} GiB free of {:.2f}\n",
          report_prefix, plan["device"].get<int>(), plan["image_bytes"].get<double>() / (1 << 30),
          plan["buffer_bytes"].get<double>() / (1 << 30), plan["isns_on_device"].get<unsigned>(),
          plan["free_bytes"].get<double>() / (1 << 30),
          plan["total_bytes"].get<double>() / (1 << 30));
  }
  if (gpu) eo.gpu_inject_fault_at_call = options.inject_engine_fault_at_batch;
  const std::size_t chunk = options.parallel_chunk_queries;
  std::unique_ptr<QueryEngine> primary =
      run_batches_in_parallel(make_engine(eo, shard, shard_id), chunk);
  if (options.inject_engine_fault_at_batch > 0 && !gpu)
    primary = std::make_unique<FaultInjectingEngine>(std::move(primary),
                                                     options.inject_engine_fault_at_batch);
  if (eo.probe_memo_answers) {
    // The scheduler runs its processors' engines itself, around any wrapper of ours.
    if (!options.scheduler.policy.empty())
      throw InputError("--probe-memo-answers", 0, "not available with --scheduler");
    primary = std::make_unique<MemoEngine>(std::move(primary));
  }
  EngineOptions fo = eo;
  fo.engine = options.fallback_engine;
  fo.probe_memo_answers = false;
  fo.algorithm.clear();
  fo.gpu_inject_fault_at_call = 0;
  auto make_fallback = [fo, &shard, shard_id, chunk] {
    return run_batches_in_parallel(make_engine(fo, shard, shard_id), chunk);
  };

  const IsnSchedulerOptions& so = options.scheduler;
  if (!so.policy.empty()) {
    SchedulerOptions sched = so.scheduling;
    sched.policy = parse_scheduler_policy(so.policy);
    if (so.lbd_short_on != "cpu" && so.lbd_short_on != "gpu")
      throw InputError("--lbd-short-on", 0,
                       fmt::format("'{}': the processor is cpu or gpu", so.lbd_short_on));
    sched.lbd_short_on = so.lbd_short_on == "cpu" ? Processor::kCpu : Processor::kGpu;
    sched.routing = parse_queues_routing(so.routing);
    // The GPU-side processor keeps its own fallback, so a GPU failure leaves the CPU side
    // scheduling as before.
    auto accelerator =
        std::make_unique<FallbackEngine>(std::move(primary), make_fallback, report_prefix);
    EngineOptions co = options.engine;
    co.engine = "cpu";
    if (resolve_engine_name(options.engine.engine) != "cpu") co.algorithm.clear();
    auto cpu_engine = make_engine(co, shard, shard_id);
    // Half the cores by default: with every core but one, the CPU workers starved the GPU
    // engine's own host pipeline (packing, the parallel unpack) and the scheduler sustained
    // 0.58x the GPU alone on Debian; with half, 1.01x (H100 host, 16 cores, NOTES-scheduler.md).
    const unsigned workers =
        so.cpu_workers > 0
            ? so.cpu_workers
            : std::max(1u, unsigned(tbb::global_control::active_value(
                               tbb::global_control::max_allowed_parallelism)) /
                               2);
    SchedulerEngine::Trainer trainer;
    if (sched.policy == SchedulerPolicy::kQueues || sched.policy == SchedulerPolicy::kBestSerial) {
      auto queries = std::make_shared<std::vector<Query>>(read_training_queries(so, shard));
      // The CPU engine's cost is its thread's CPU time, unless it spreads a query over threads.
      CostLogOptions cost_log;
      cost_log.and_probe_blocks = sched.and_probe_blocks;  // the features the scheduler computes
      if (co.intra_query_threads > 1) cost_log.clock[std::size_t(Processor::kCpu)] = CostClock::kWall;
      sched.observe_clock = cost_log.clock;
      const std::size_t refit_every = so.refit_every;
      const CostModelKind kind = parse_cost_model_kind(so.cost_model);
      trainer = [queries, &shard, cost_log, refit_every, kind](
                    const SearchParams& p, QueryEngine& cpu, QueryEngine& gpu,
                    nlohmann::json& report) {
        CostLog log = log_query_costs(shard, *queries, p, cpu, gpu, cost_log);
        CostPredictor first = CostPredictor::train(log.samples[0], log.samples[1], &report, kind);
        // Refitted online from the CPU jobs' own costs (isn/online_cost_predictor.hpp).
        return OnlineCostPredictor::hooks(std::make_shared<OnlineCostPredictor>(
            std::move(log), std::move(first), refit_every));
      };
    }
    primary = std::make_unique<SchedulerEngine>(
        shard, std::move(cpu_engine), std::move(accelerator), ProcessorSlot{nullptr, workers, 1},
        ProcessorSlot{nullptr, 1, so.gpu_max_batch}, sched, trainer);
  }
  return std::make_unique<FallbackEngine>(std::move(primary), make_fallback, report_prefix);
}

}  // namespace gpusearch
