// The GPU list cache's flags (isn/list_cache_setup.hpp), the same on `gpusearch search` and on
// the ISN (launch/cluster.sh passes them through). Header-only: each main links CLI11.
#pragma once

#include <CLI/CLI.hpp>

#include "isn/list_cache_setup.hpp"

namespace gpusearch {

inline void add_list_cache_flags(CLI::App& app, ListCacheEngineOptions& o) {
  app.add_option("--gpu-mem", o.gpu_mem,
                 "gpu: serve through a list cache within this much device memory per GPU: BYTES "
                 "(8G, 512M) or a FRACTION of the device (0.5), shared by the engines on it");
  app.add_option("--cache-fraction", o.cache_fraction,
                 "gpu list cache: share of --gpu-mem (after the resident arrays) for the cache "
                 "S_c; the rest is the batch buffer S_b")
      ->capture_default_str();
  app.add_option("--cache-bytes", o.cache_bytes, "gpu list cache: S_c in bytes (0: no cache)");
  app.add_option("--batch-bytes", o.batch_bytes,
                 "gpu list cache: S_b in bytes, the two pipeline lanes' shipping regions");
  app.add_option("--cache-plan", o.plan,
                 "gpu list cache: fill from this plan (gpusearch plan-cache)");
  app.add_option("--cache-train", o.train,
                 "gpu list cache: plan here from this training log (TSV or TREC topics)");
  app.add_option("--cache-policy", o.policy,
                 "gpu list cache: vfb, qtf or qtfdf (--cache-train, "
                 "--cache-online)")
      ->capture_default_str();
  app.add_option("--cache-lambda", o.lambda,
                 "gpu list cache vfb: largest fraction of a list cached")
      ->capture_default_str();
  app.add_option("--cache-plan-k", o.plan_k, "gpu list cache: k of the AND that vfb replays")
      ->capture_default_str();
  app.add_flag_callback("--cache-no-fill", [&o] { o.fill_spare = false; },
               "gpu list cache (--cache-train, --cache-online): leave the budget the log's lists "
               "do not take empty (default: whole unqueried lists fill it, longest first)");
  app.add_flag("--cache-online", o.online,
               "gpu list cache: follow the served queries (decayed visiting frequencies, "
               "re-planned in the background, applied between batches)");
  app.add_option("--cache-half-life", o.half_life_queries,
                 "gpu list cache online: served queries after which a visit weighs half")
      ->capture_default_str();
  app.add_option("--cache-replan", o.replan_queries,
                 "gpu list cache online: a new plan every this many served queries (of which "
                 "one in --cache-sample is replayed)")
      ->capture_default_str();
  app.add_option("--cache-replan-backoff", o.replan_backoff_max,
                 "gpu list cache online: each plan the gate withholds doubles the interval to "
                 "the next, up to this many times --cache-replan (1: fixed interval)")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  app.add_option("--cache-sample", o.sample_every,
                 "gpu list cache online: replay one query of this many")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  app.add_option("--cache-replay-memo", o.replay_memo_entries,
                 "gpu list cache online (vfb): distinct queries whose replayed reads are kept for "
                 "their repeats (0: replay every query)")
      ->check(CLI::Range(std::size_t(0), std::size_t(1) << 30))
      ->capture_default_str();
  app.add_option("--cache-swap-bytes", o.swap_bytes,
                 "gpu list cache online: most bytes copied into the cache per change (default: "
                 "no limit)");
  app.add_option("--cache-planner-priority", o.planner_priority,
                 "gpu list cache online: the planning threads' scheduling class: idle "
                 "(SCHED_IDLE: only cycles serving leaves) or normal")
      ->capture_default_str();
  app.add_option("--cache-planner-threads", o.planner_threads,
                 "gpu list cache online: threads replaying the served queries")
      ->capture_default_str();
  app.add_option("--cache-planner-pause", o.planner_pause,
                 "gpu list cache online: gaps (the replay and planning pause while a call is "
                 "served and run between calls) or always (they run during calls too)")
      ->check(CLI::IsMember({"gaps", "always"}))
      ->capture_default_str();
  app.add_option("--cache-swap", o.swap,
                 "gpu list cache online: where a new plan is copied into the cache: gaps (a "
                 "thread of the engine's, between calls; a call arriving meanwhile waits for it) "
                 "or calls (at the start of the next call, inside it)")
      ->check(CLI::IsMember({"gaps", "calls"}))
      ->capture_default_str();
  app.add_option("--cache-min-payoff", o.min_payoff,
                 "gpu list cache online: a new plan goes in when the bytes it saves over a "
                 "half-life of queries are this many times the bytes it copies (0: every plan)")
      ->capture_default_str();
  app.add_option("--cache-min-gain", o.min_gain,
                 "gpu list cache online: and when it saves more than this fraction of the bytes "
                 "the cache serves per query (out of sample)")
      ->capture_default_str();
  app.add_option("--cache-model", o.model,
                 "gpu list cache: throughput model (bench_list_cache --model-out) that chooses "
                 "S_c and S_b");
  app.add_option("--max-response-ms", o.max_response_ms,
                 "gpu list cache: with --cache-model, the split with the best throughput whose "
                 "batches take at most this long");
  app.add_flag("--cache-ship-tails", o.ship_tails,
               "gpu list cache: a list cached in part ships whole with a batch where it fits "
               "(beyond paper 000: less post-processing, more shipping)");
  app.add_option("--postprocess-threads", o.postprocess_threads,
                 "gpu list cache: CPU threads completing truncated queries (0: cores - 1)")
      ->capture_default_str();
}

}  // namespace gpusearch
