#include "isn/list_cache_setup.hpp"

#include <cmath>

#include <fmt/format.h>

#include "common/byte_size.hpp"
#include "common/cache_swapper.hpp"
#include "common/cache_admission.hpp"
#include "common/cache_model.hpp"
#include "common/cache_plan.hpp"
#include "common/error.hpp"
#include "common/index_format.hpp"
#include "common/online_cache_policy.hpp"
#include "common/shard_index.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/engine_factory.hpp"
#if defined(GPUSEARCH_HAVE_CUDA)
#include "gpu/device_list_cache.hpp"
#include "gpu/device_memory_budget.hpp"
#include "gpu/gpu_engine.hpp"
#endif

namespace gpusearch {

nlohmann::json ListCacheSizes::to_json() const {
  return {{"memory_bytes", memory_bytes},   {"resident_bytes", resident_bytes},
          {"cache_bytes", cache_bytes},     {"batch_bytes", batch_bytes},
          {"batch_queries", batch_queries}, {"chosen_by", chosen_by},
          {"model_choice", model_choice}};
}

namespace {

// A plain number in (0, 1] is a fraction of the device; anything else a byte size. Either is
// the GPU's budget, split evenly among the engines on it.
std::uint64_t memory_budget(const std::string& text, std::uint64_t device_total,
                            unsigned engines_on_device) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == text.size() && value > 0 && value <= 1.0) {
    if (device_total == 0)
      throw InputError(
          "--gpu-mem", 0,
          fmt::format("'{}' is a fraction of the GPU's memory, but no GPU is known", text));
    return std::uint64_t(value * double(device_total) / std::max(1u, engines_on_device));
  }
  return parse_byte_size(text, "--gpu-mem") / std::max(1u, engines_on_device);
}

}  // namespace

ListCacheSizes size_list_cache(const ListCacheEngineOptions& o, std::uint64_t device_total_bytes,
                               std::uint64_t resident_bytes, unsigned batch_size) {
  ListCacheSizes s;
  s.resident_bytes = resident_bytes;
  s.batch_queries = std::max(1u, batch_size);
  const double gib = double(1ull << 30);
  if (!o.gpu_mem.empty())
    s.memory_bytes = memory_budget(o.gpu_mem, device_total_bytes, o.engines_on_device);
  if (!o.cache_bytes.empty() || !o.batch_bytes.empty()) {
    s.chosen_by = "sizes";
    if (o.cache_bytes.empty() || o.batch_bytes.empty()) {
      if (s.memory_bytes == 0)
        throw InputError(o.cache_bytes.empty() ? "--cache-bytes" : "--batch-bytes", 0,
                         "give both --cache-bytes and --batch-bytes, or one of them and --gpu-mem");
      if (s.memory_bytes <= resident_bytes)
        throw InputError("--gpu-mem", 0, "the budget is below the shard's resident arrays");
    }
    const std::uint64_t rest =
        s.memory_bytes > resident_bytes ? s.memory_bytes - resident_bytes : 0;
    s.cache_bytes =
        o.cache_bytes.empty() ? 0 : parse_byte_size(o.cache_bytes, "--cache-bytes", true);
    s.batch_bytes =
        o.batch_bytes.empty() ? 0 : parse_byte_size(o.batch_bytes, "--batch-bytes", true);
    if (o.cache_bytes.empty()) s.cache_bytes = rest > s.batch_bytes ? rest - s.batch_bytes : 0;
    if (o.batch_bytes.empty()) s.batch_bytes = rest > s.cache_bytes ? rest - s.cache_bytes : 0;
    const std::uint64_t need = resident_bytes + s.cache_bytes + s.batch_bytes;
    if (s.memory_bytes == 0) s.memory_bytes = need;
    if (need > s.memory_bytes)
      throw InputError("--gpu-mem", 0,
                       fmt::format("{:.3f} GiB of list cache and {:.3f} GiB of batch buffer beside "
                                   "the shard's {:.3f} GiB of resident arrays exceed the budget "
                                   "of {:.3f} GiB",
                                   s.cache_bytes / gib, s.batch_bytes / gib, resident_bytes / gib,
                                   s.memory_bytes / gib));
    return s;
  }
  if (s.memory_bytes <= resident_bytes)
    throw InputError("--gpu-mem", 0,
                     fmt::format("a budget of {:.3f} GiB does not hold the shard's resident "
                                 "arrays ({:.3f} GiB: block metadata and per-document arrays); "
                                 "raise it, or cut the index into more shards",
                                 s.memory_bytes / gib, resident_bytes / gib));
  const double available = double(s.memory_bytes - resident_bytes);
  if (!o.model.empty()) {
    const ThroughputModel model = ThroughputModel::read(o.model);
    const double min_batch = std::min(available, std::max(double(1 << 20), available * 0.01));
    const CacheSplit best =
        model.choose(available, min_batch, double(s.batch_queries), o.max_response_ms);
    if (!best.feasible)
      throw InputError("--max-response-ms", 0,
                       fmt::format("the throughput model ({}) finds no split of {:.3f} GiB whose "
                                   "batches finish within {} ms",
                                   o.model.string(), available / gib, o.max_response_ms));
    s.chosen_by = "model";
    s.cache_bytes = std::uint64_t(best.cache_bytes);
    s.batch_bytes = std::uint64_t(available) - s.cache_bytes;
    s.batch_queries = std::max(1u, unsigned(best.batch_queries));
    s.model_choice = {
        {"cache_bytes", best.cache_bytes},        {"batch_bytes", best.batch_bytes},
        {"batch_queries", best.batch_queries},    {"predicted_queries_per_second", best.throughput},
        {"predicted_batch_ms", best.response_ms}, {"max_response_ms", o.max_response_ms}};
    return s;
  }
  if (o.max_response_ms > 0)
    throw InputError("--max-response-ms", 0, "needs --cache-model (the fitted throughput model)");
  if (!(o.cache_fraction >= 0.0 && o.cache_fraction <= 1.0))
    throw InputError("--cache-fraction", 0,
                     fmt::format("must be in [0, 1], got {}", o.cache_fraction));
  s.chosen_by = "fraction";
  s.cache_bytes = std::uint64_t(o.cache_fraction * available);
  s.batch_bytes = std::uint64_t(available) - s.cache_bytes;
  return s;
}

namespace {

// The plan's lists for this shard, checked against the index it was made for.
std::vector<CachedList> read_plan_lists(const ListCacheEngineOptions& o, const ShardIndex& shard,
                                        std::uint32_t shard_id, std::uint64_t cache_bytes) {
  const std::string name = o.plan.string();
  const CachePlan plan = CachePlan::read(o.plan);
  if (!o.index_dir.empty() &&
      xxh3_of_file(o.index_dir / kRootManifestName) != plan.index_manifest_xxh3)
    throw InputError(name, 0,
                     fmt::format("stale cache plan: made for another index than {} (its "
                                 "manifest changed); make it again with `gpusearch "
                                 "plan-cache`",
                                 o.index_dir.string()));
  for (const ShardCachePlan& sp : plan.shards) {
    if (sp.shard != shard_id) continue;
    for (const CachedList& l : sp.lists)
      if (l.term >= shard.num_terms() || l.blocks > shard.term(l.term).num_blocks)
        throw InputError(name, 0,
                         fmt::format("shard {}: term {} with {} cached blocks does not "
                                     "exist in the index",
                                     shard_id, l.term, l.blocks));
    if (sp.bytes > cache_bytes)
      throw InputError(name, 0,
                       fmt::format("the plan holds {} bytes for shard {}, but the list "
                                   "cache has {} bytes: make it with --budget {} or less, "
                                   "or give the cache more (--gpu-mem, --cache-fraction, "
                                   "--cache-bytes)",
                                   sp.bytes, shard_id, cache_bytes, cache_bytes));
    return sp.lists;
  }
  throw InputError(name, 0, fmt::format("the plan has no entry for shard {}", shard_id));
}

std::vector<Query> read_training(const std::filesystem::path& file, const ShardIndex& shard) {
  const QueryFile f = read_query_file(file);
  std::vector<Query> queries;
  for (const QueryText& qt : f.queries) {
    Query q;
    QueryProblem problem;
    if (resolve_query(shard, qt, {}, q, problem, file.string()) && !q.terms.empty())
      queries.push_back(std::move(q));
  }
  if (queries.empty()) throw InputError(file.string(), 0, "no training query has a known term");
  return queries;
}

}  // namespace

std::unique_ptr<QueryEngine> make_list_cache_gpu_engine(const EngineOptions& options,
                                                        const ShardIndex& shard,
                                                        std::uint32_t shard_id) {
#if defined(GPUSEARCH_HAVE_CUDA)
  const ListCacheEngineOptions& lo = options.list_cache;
  if (!gpu::gpu_available())
    throw gpu::CudaError("no CUDA device is available to the GPU engine (--gpu-mem)");
  const int device = std::max(0, options.gpu_device);
  const gpu::DeviceMemoryInfo memory = gpu::device_memory(device);
  const ListCacheSizes sizes = size_list_cache(
      lo, memory.total_bytes, gpu::list_cache_resident_bytes(shard), options.gpu_batch_size);
  const std::uint64_t need = sizes.resident_bytes + sizes.cache_bytes + sizes.batch_bytes;
  if (need > memory.free_bytes)
    throw InputError("--gpu-mem", 0,
                     fmt::format("the list cache needs {} bytes on GPU {}, which has {} free", need,
                                 device, memory.free_bytes));
  const CachePolicy policy = parse_cache_policy(lo.policy);
  gpu::GpuEngineOptions g;
  g.device = options.gpu_device;
  g.algorithm = options.algorithm;
  g.batch_size = sizes.batch_queries;
  g.or_window = options.gpu_or_window;
  g.or_warp_window = options.gpu_or_warp_window;
  g.bmw_threads = options.gpu_bmw_threads;
  g.blocks_per_sm = options.gpu_blocks_per_sm;
  g.max_segments_per_query = options.gpu_max_segments;
  g.inject_fault_at_call = options.gpu_inject_fault_at_call;
  g.list_cache = true;
  g.cache_bytes = sizes.cache_bytes;
  g.batch_bytes = sizes.batch_bytes;
  g.postprocess_threads = lo.postprocess_threads;
  g.ship_tails = lo.ship_tails;
  auto engine = std::make_unique<gpu::GpuEngine>(shard, shard_id, g);
  engine->set_host_engine(std::make_unique<cpu::CpuEngine>(shard, shard_id));
  auto cpu = std::make_shared<const cpu::CpuEngine>(shard, shard_id);
  engine->set_post_processor(
      [cpu](const Query& q, const SearchParams& p, DocId from, const ShardResult& running) {
        return cpu->resume(q, p, from, running);
      });
  nlohmann::json setup = sizes.to_json();
  std::vector<Query> training;
  if (!lo.train.empty()) training = read_training(lo.train, shard);
  if (!lo.plan.empty()) {
    const auto lists = read_plan_lists(lo, shard, shard_id, sizes.cache_bytes);
    setup["fill"] = engine->apply_cache_plan(lists).to_json();
    setup["plan"] = lo.plan.string();
  } else if (!training.empty()) {
    const auto lists = plan_shard_cache(shard, training,
                                        {.policy = policy,
                                         .lambda = lo.lambda,
                                         .budget_bytes = sizes.cache_bytes,
                                         .fill_spare = lo.fill_spare},
                                        lo.plan_k, Scoring::kBm25);
    setup["fill"] = engine->apply_cache_plan(lists).to_json();
    setup["plan"] = fmt::format("{} (lambda {}) from {}", lo.policy, lo.lambda, lo.train.string());
  }
  if (lo.online) {
    OnlinePolicyOptions oo;
    oo.policy = policy;
    oo.lambda = lo.lambda;
    oo.fill_spare = lo.fill_spare;
    oo.budget_bytes = sizes.cache_bytes;
    oo.k = lo.plan_k;
    oo.half_life_queries = lo.half_life_queries;
    oo.replan_queries = lo.replan_queries;
    oo.replan_backoff_max = lo.replan_backoff_max;
    oo.sample_every = lo.sample_every;
    oo.replay_memo_entries = lo.replay_memo_entries;
    oo.planner_priority = parse_planner_priority(lo.planner_priority);
    oo.planner_threads = lo.planner_threads;
    if (lo.planner_pause != "gaps" && lo.planner_pause != "always")
      throw InputError("--cache-planner-pause", 0,
                       "must be gaps or always, not '" + lo.planner_pause + "'");
    oo.pause_while_serving = lo.planner_pause == "gaps";
    oo.min_payoff = lo.min_payoff;
    oo.min_gain = lo.min_gain;
    auto online = std::make_shared<OnlineCachePolicy>(shard, oo);
    if (!training.empty()) {  // the training log seeds the visits; its plan is already in
      online->seed(training);
      online->take_plan();
    }
    engine->set_online_policy(online,
                              lo.swap_bytes.empty()
                                  ? ~0ull
                                  : parse_byte_size(lo.swap_bytes, "--cache-swap-bytes"),
                              parse_cache_swap_timing(lo.swap));
  }
  engine->annotate_stats("list_cache_setup", std::move(setup));
  return engine;
#else
  (void)options, (void)shard, (void)shard_id;
  throw InputError("--gpu-mem", 0, "this build has no GPU engine (configured without CUDA)");
#endif
}

}  // namespace gpusearch
