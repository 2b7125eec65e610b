// The GPU engine with a list cache (paper 000), as `gpusearch search` and the ISN build it
// from their flags (isn/list_cache_flags.hpp): the device memory budget M (--gpu-mem) split
// into the list cache S_c and the batch buffer S_b (--cache-fraction, or --cache-bytes and
// --batch-bytes, or the throughput model with --max-response-ms), the cache filled at start
// from an offline plan (--cache-plan) or a plan made here from a training log (--cache-train),
// optionally an online policy (--cache-online), and the CPU engine's resume as the
// post-processor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace gpusearch {

struct ListCacheEngineOptions {
  std::string gpu_mem;           // BYTES or FRACTION of the device; "" (and no sizes): no cache
  double cache_fraction = 0.75;  // S_c / (M - resident arrays)
  std::string cache_bytes, batch_bytes;  // S_c and S_b given instead
  std::filesystem::path plan;            // offline plan (gpusearch plan-cache)
  std::filesystem::path train;           // or: plan here from this training log
  std::string policy = "vfb";
  double lambda = 1.0;
  unsigned plan_k = 10;
  bool fill_spare = true;  // budget the log's lists leave: unqueried lists (AdmissionOptions)
  bool online = false;  // adapt to the served queries
  double half_life_queries = 20000;
  std::uint64_t replan_queries = 2000;    // served queries between plans
  unsigned replan_backoff_max = 8;        // online: withheld plans stretch the interval
  // One served query in 4 replayed: on the H200 (session 38, vfb at 1/10, 1/25, 1/50 of the
  // shard, one replay thread) it kept the online policy at or above the offline plan (1.00-1.08)
  // where replaying every query lost at 1/10 (0.96): the replay re-runs each query on the CPU,
  // and that costs the serving calls more than the last points of hit rate give back.
  unsigned sample_every = 4;
  std::size_t replay_memo_entries = 1 << 16;  // online (vfb): repeats' reads kept
  std::string swap_bytes;                 // most bytes copied per online change ("": no limit)
  std::string planner_priority = "idle";  // online: the planning threads' class (idle|normal)
  unsigned planner_threads = 1;           // online: replay threads
  std::string planner_pause = "gaps";     // online: plan only between calls (gaps) or always
  std::string swap = "gaps";              // online: apply plans between calls (gaps) or in them
  double min_payoff = 1.0;                // online: the gate (OnlinePolicyOptions)
  double min_gain = 0.02;
  std::filesystem::path model;       // throughput model (bench_list_cache --model-out)
  double max_response_ms = 0;        // with model: choose S_c for this batch time
  unsigned postprocess_threads = 0;  // 0: hardware threads - 1
  bool ship_tails = false;           // lists cached in part ship whole where they fit
  // Set by the caller: the index directory (the plan's index check) and how many engines share
  // the device (--gpu-mem, bytes or fraction, is split evenly among them).
  std::filesystem::path index_dir;
  unsigned engines_on_device = 1;
  bool enabled() const { return !gpu_mem.empty() || !cache_bytes.empty() || !batch_bytes.empty(); }
};

// The split of one engine's budget. resident: the arrays that stay on the device whatever the
// cache holds (gpu/device_list_cache.hpp).
struct ListCacheSizes {
  std::uint64_t memory_bytes = 0, resident_bytes = 0, cache_bytes = 0, batch_bytes = 0;
  unsigned batch_queries = 0;  // queries per launch (the model may lower it)
  std::string chosen_by;       // "fraction", "sizes", "model"
  nlohmann::json model_choice;
  nlohmann::json to_json() const;
};

// Sizes from the options and the device's memory (host code, tested without a GPU). Throws
// InputError naming the flag when they cannot work (budget below the resident arrays, sizes
// above the budget, a bad fraction, an unreadable model, no split meeting the bound).
ListCacheSizes size_list_cache(const ListCacheEngineOptions& options,
                               std::uint64_t device_total_bytes, std::uint64_t resident_bytes,
                               unsigned batch_size);

struct EngineOptions;
class QueryEngine;
class ShardIndex;

// The GPU engine serving `shard` through a list cache sized, filled and run as
// options.list_cache says (CUDA builds; InputError otherwise).
std::unique_ptr<QueryEngine> make_list_cache_gpu_engine(const EngineOptions& options,
                                                        const ShardIndex& shard,
                                                        std::uint32_t shard_id);

}  // namespace gpusearch
