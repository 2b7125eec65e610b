// bench_list_cache's drift comparison (paper 000's online policy against its offline plan):
// a drifting test log served at --drift-ratio through VFB, offline and each online variant in
// alternating rounds, with the same arrivals; see bench_list_cache.cpp for the program.
#include <tbb/parallel_for.h>

#include <sstream>

#include <sys/resource.h>

#include <fmt/format.h>

#include "bench_list_cache.hpp"
#include "common/cache_admission.hpp"
#include "common/metrics.hpp"
#include "common/online_cache_policy.hpp"
#include "common/reference_engine.hpp"
#include "partition/synthetic_collection.hpp"

namespace gpusearch::bench {

void add_drift_options(CLI::App& app, DriftOptions& o) {
  app.add_option("--drift-spec", o.spec,
                 "the index's synthetic spec; with it, the online-vs-offline comparison on its "
                 "drifting test log (query_drift=1 is added, then --drift-log)");
  app.add_option("--drift-log", o.log,
                 "the drifting log's settings, e.g. drift_ramp=0.5,drift_topics=8 (default: "
                 "query_drift=1 alone, a log that moves under 2% of the bytes a query reads at "
                 "2.5M documents; bench_drift_headroom tells what a setting moves)");
  app.add_option("--drift-limit", o.limit, "queries of the drifting log")->capture_default_str();
  // A cache smaller than the hot lists (10x), so that which lists it holds matters, and calls
  // short enough that plans are taken between them.
  app.add_option("--drift-ratio", o.ratio, "postings / M of the drift comparison")
      ->capture_default_str();
  app.add_option("--drift-call-size", o.call_size,
                 "queries per search() call of the drift comparison (plans go in between)")
      ->capture_default_str();
  app.add_option("--drift-arrivals", o.arrivals,
                 "queries per second arriving in the drift comparison (0: as fast as served); "
                 "a GPU serves a 10,000-query log in under 0.1 s, before any background plan can "
                 "finish, so an arrival rate gives the online policy the time a live stream would")
      ->capture_default_str();
  app.add_option("--drift-rounds", o.rounds, "offline/online rounds, alternating (medians)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--drift-swap-fraction", o.swap_fraction,
                 "online policy: bytes one plan change may copy, as a fraction of S_c")
      ->capture_default_str();
  app.add_option("--drift-half-life", o.half_life, "online policy: --cache-half-life")
      ->capture_default_str();
  app.add_option("--drift-replan", o.replan, "online policy: --cache-replan")
      ->capture_default_str();
  app.add_option("--drift-sample", o.sample, "online policy: --cache-sample")
      ->capture_default_str();
  app.add_option("--drift-replan-backoff", o.replan_backoff,
                 "online policy: --cache-replan-backoff")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  // The planner's share of the host (idle priority, its own threads, only between calls) and
  // its gate. Each variant runs in every round after the offline plan (the first is "online" in
  // the JSON and the summary).
  app.add_option("--drift-online", o.online,
                 "online policy variants, each PRIORITY:MIN_PAYOFF:MIN_GAIN[:gaps|always"
                 "[:gaps|calls[:BACKOFF[:SAMPLE]]]] (idle|normal: the planning threads' class; --cache-min-payoff, "
                 "--cache-min-gain, 0:0 every plan; gaps (default): planning only between calls, "
                 "always: also during them, --cache-planner-pause; then where plans are copied "
                 "in, --cache-swap: gaps (default) between calls, calls: inside the next call; "
                 "then --cache-replan-backoff, default --drift-replan-backoff; then --cache-sample, "
                 "default --drift-sample), comma-separated")
      ->capture_default_str();
  app.add_option("--drift-policy", o.policy,
                 "the admission of both arms, the offline plan and the online policy: vfb:LAMBDA, "
                 "qtf or qtfdf (whole lists: the online policy then counts query frequencies and "
                 "replays nothing)")
      ->check([](const std::string& v) -> std::string {
        try {  // at parsing: before the device and the index are set up
          PolicyCase::parse(v, "--drift-policy");
          return "";
        } catch (const std::exception&) {
          return "'" + v + "' is not vfb:LAMBDA (LAMBDA in (0, 1]), qtf or qtfdf";
        }
      })
      ->capture_default_str();
  app.add_option("--drift-planner-threads", o.planner_threads,
                 "online policy: replay threads (--cache-planner-threads)")
      ->capture_default_str();
  app.add_option("--drift-max-pending", o.max_pending,
                 "online policy: queries queued for replay (the oldest are dropped)")
      ->capture_default_str();
}

nlohmann::json run_drift_comparison(Bench& b, const DriftOptions& o, double postings) {
  // Online against offline on the drifting log, at --drift-ratio, with --drift-policy.
  // Later keys override earlier ones: the spec's documents, then the drift.
  SyntheticParams sp =
      SyntheticParams::parse(o.spec + ",query_drift=1" + (o.log.empty() ? "" : "," + o.log));
  sp.test_queries = o.limit;
  std::vector<Query> drifting;
  for (const auto& [id, text] : SyntheticCollection(sp).queries(false)) {
    Query q;
    QueryProblem p;
    if (resolve_query(b.shard, QueryText{id, text, 0, {}}, {}, q, p, "drift") && !q.terms.empty())
      drifting.push_back(std::move(q));
  }
  // The answers checked are spread over the log (the online policy's changes come late).
  const std::size_t stride =
      std::max<std::size_t>(1, drifting.size() / std::max<std::size_t>(1, b.check));
  std::vector<ReferenceAnswer> drift_refs;
  drift_refs.resize(std::min(b.check, drifting.size()));
  tbb::parallel_for(std::size_t(0), drift_refs.size(), [&](std::size_t j) {
    drift_refs[j] = reference_answer(b.index, drifting[j * stride], b.params, 2 * b.params.k + 20);
  });
  const double memory = postings / o.ratio;
  const PolicyCase pc = PolicyCase::parse(o.policy, "--drift-policy");
  if (pc.tails) throw InputError("--drift-policy", 0, "'" + o.policy + "': no +tails here");
  const double share = 0.8;
  VisitLog visits = b.visits;
  const auto lists = admit_lists(b.shard, visits,
                                 {.policy = pc.policy,
                                  .lambda = pc.lambda,
                                  .budget_bytes = std::uint64_t(share * memory),
                                  .fill_spare = b.fill_spare});
  nlohmann::json online_json = nlohmann::json::object();
  const std::size_t saved_call = b.call_size;
  b.call_size = o.call_size;  // an ISN's batches: the online plans go in between them
  b.ref_stride = stride;
  // Rounds alternate offline and online (this host's rates move by 20% between runs);
  // the JSON keeps the last round's runs and every round's rates.
  struct Variant {
    std::string spec;
    PlannerPriority priority = PlannerPriority::kIdle;
    double min_payoff = 1, min_gain = 0.02;
    bool pause_while_serving = true;
    CacheSwapTiming swap = CacheSwapTiming::kGaps;
    unsigned replan_backoff = 8;
    unsigned sample = 0;  // 0: --drift-sample
    std::vector<double> rates;
    nlohmann::json last;
  };
  std::vector<Variant> variants(1);  // [0]: the offline plan
  for (const std::string& spec : split(o.online)) {
    Variant v;
    v.spec = spec;
    std::stringstream ss(spec);
    std::string part;
    std::vector<std::string> parts;
    while (std::getline(ss, part, ':')) parts.push_back(part);
    const std::string bad = "'" + spec +
                            "' is not PRIORITY:MIN_PAYOFF:MIN_GAIN[:gaps|always[:gaps|calls["
                            ":BACKOFF[:SAMPLE]]]]";
    if (parts.size() < 3 || parts.size() > 7) throw InputError("--drift-online", 0, bad);
    if (parts.size() >= 4) {
      if (parts[3] != "gaps" && parts[3] != "always") throw InputError("--drift-online", 0, bad);
      v.pause_while_serving = parts[3] == "gaps";
    }
    if (parts.size() >= 5) {
      if (parts[4] != "gaps" && parts[4] != "calls") throw InputError("--drift-online", 0, bad);
      v.swap = parse_cache_swap_timing(parts[4]);
    }
    v.replan_backoff = o.replan_backoff;
    if (parts.size() >= 6) {
      try {
        v.replan_backoff = unsigned(std::stoul(parts[5]));
      } catch (const std::exception&) {
        throw InputError("--drift-online", 0, bad);
      }
      if (v.replan_backoff == 0) throw InputError("--drift-online", 0, bad + " (BACKOFF >= 1)");
    }
    if (parts.size() == 7) {
      try {
        v.sample = unsigned(std::stoul(parts[6]));
      } catch (const std::exception&) {
        throw InputError("--drift-online", 0, bad);
      }
      if (v.sample == 0) throw InputError("--drift-online", 0, bad + " (SAMPLE >= 1)");
    }
    v.priority = parse_planner_priority(parts[0]);
    try {
      v.min_payoff = std::stod(parts[1]);
      v.min_gain = std::stod(parts[2]);
    } catch (const std::exception&) {
      throw InputError("--drift-online", 0, bad);
    }
    variants.push_back(std::move(v));
  }
  if (variants.size() < 2) throw InputError("--drift-online", 0, "no online variant");
  for (unsigned round = 0; round < o.rounds; ++round)
    for (std::size_t arm = 0; arm < variants.size(); ++arm) {
      const bool online = arm > 0;
      Variant& variant = variants[arm];
      auto e = cached_engine(b, memory, share, lists, b.batch_size, pc.tails);
      std::shared_ptr<OnlineCachePolicy> policy;
      if (online) {
        OnlinePolicyOptions oo;
        oo.policy = pc.policy;
        oo.lambda = pc.lambda;
        oo.budget_bytes = std::uint64_t(share * memory);
        oo.k = b.params.k;
        oo.scoring = b.params.scoring;
        oo.half_life_queries = o.half_life;
        oo.replan_queries = o.replan;
        oo.sample_every = variant.sample > 0 ? variant.sample : o.sample;
        oo.replan_backoff_max = variant.replan_backoff;
        oo.max_pending = o.max_pending;
        oo.planner_priority = variant.priority;
        oo.planner_threads = o.planner_threads;
        oo.min_payoff = variant.min_payoff;
        oo.min_gain = variant.min_gain;
        oo.pause_while_serving = variant.pause_while_serving;
        policy = std::make_shared<OnlineCachePolicy>(b.shard, oo);
        policy->seed(b.train);  // what the offline plan saw, as the stream's past
        policy->take_plan();    // the offline plan's equal: the engine holds that already
        e->set_online_policy(policy, std::uint64_t(share * memory * o.swap_fraction),
                             variant.swap);
      }
      // The process's CPU time over the run (serving, post-processing and planning together).
      rusage r0{}, r1{};
      getrusage(RUSAGE_SELF, &r0);
      nlohmann::json run = timed_run(b, *e, drifting, drift_refs, drifting.size() / 2, o.arrivals);
      getrusage(RUSAGE_SELF, &r1);
      auto cpu_s = [](const rusage& r) {
        return double(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
               1e-6 * double(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
      };
      run["process_cpu_seconds"] = cpu_s(r1) - cpu_s(r0);
      const auto& lc = run["list_cache"];
      fmt::print(
          "drifting log at {}x, {}: {:.0f} q/s{}, hit {:.3f} (bytes; halves {:.3f} / {:.3f}), "
          "post {:.3f}, wrong {}\n",
          o.ratio, online ? "online " + variant.spec : std::string("offline"),
          run[o.arrivals > 0 ? "busy_queries_per_second" : "queries_per_second"].get<double>(),
          o.arrivals > 0 ? fmt::format(" busy ({:.0f}/s arriving)", o.arrivals) : "",
          lc["hit_rate_bytes"].get<double>(), lc.value("hit_rate_bytes_first_half", 0.0),
          lc.value("hit_rate_bytes_second_half", 0.0), lc["post_processed_fraction"].get<double>(),
          run["wrong"].get<std::size_t>());
      // Where a call's time goes (medians, ms): before the first launch, launches, after the last.
      fmt::print("  call ms p50 {:.3f}: before the first launch {:.3f}, after the last {:.3f}; "
                 "launch p50 {:.3f}; in all: planning {:.4f} s, finishing {:.4f} s, handing "
                 "queries to the online policy {:.4f} s\n",
                 run["call_ms_p50"].get<double>(), run.value("call_pre_launch_ms_p50", 0.0),
                 run.value("call_tail_ms_p50", 0.0), run.value("batch_ms_p50", 0.0),
                 run.value("call_plan_seconds", 0.0), run.value("call_finish_seconds", 0.0),
                 lc.value("online_observe_seconds", 0.0));
      if (policy) {
        run["online_policy"] = policy->stats();  // at the end of the run: what lagged
        const auto& ps = run["online_policy"];
        fmt::print(
            "  online policy: {} plans (1 seeded), {} cache changes, {:.1f} MB copied by swaps, "
            "{} replayed of {} observed ({} dropped), {} pending at the end, replay {:.3f} s, "
            "planning {:.3f} s; {} plans withheld by the gate (last: saves {:.0f} B/query of "
            "{:.0f}, copies {:.1f} MB); planner {} x {}, {}; paused {} times for {} calls "
            "({:.2f} s); process CPU {:.2f} s\n",
            ps["plans"].get<std::uint64_t>(), lc.value("online_cache_changes", 0ull),
            double(lc.value("online_bytes_copied", 0ull)) / 1e6,
            ps["replayed"].get<std::uint64_t>(), ps["observed"].get<std::uint64_t>(),
            ps["dropped"].get<std::uint64_t>(), ps["pending"].get<std::size_t>(),
            ps["replay_seconds"].get<double>(), ps["plan_seconds"].get<double>(),
            ps["plans_withheld"].get<std::uint64_t>(),
            ps["last_gate"]["saving_per_query"].get<double>(),
            ps["last_gate"]["held_bytes_per_query"].get<double>(),
            ps["last_gate"]["copy_bytes"].get<double>() / 1e6,
            ps["planner_threads"].get<unsigned>(), ps["planner_priority"].get<std::string>(),
            ps["pause_while_serving"].get<bool>() ? "only between calls" : "during calls too",
            ps["planner_pauses"].get<std::uint64_t>(), ps["serving_calls"].get<std::uint64_t>(),
            ps["planner_paused_seconds"].get<double>(), run["process_cpu_seconds"].get<double>());
        if (lc.contains("online_swaps")) {
          const auto& sw = lc["online_swaps"];
          fmt::print("  swaps: {}{}; calls that waited for a swap {} ({:.4f} s)\n",
                     sw.value("swap", std::string("?")),
                     sw.contains("swaps")
                         ? fmt::format(" ({} applied between calls in {:.3f} s, {} gave way to a "
                                       "call)",
                                       sw["swaps"].get<std::uint64_t>(),
                                       sw["apply_seconds"].get<double>(),
                                       sw["gave_way"].get<std::uint64_t>())
                         : std::string(" (inside the next call)"),
                     sw.value("calls_waited", 0ull), sw.value("call_wait_seconds", 0.0));
        }
      } else {
        fmt::print("  offline plan: process CPU {:.2f} s\n",
                   run["process_cpu_seconds"].get<double>());
      }
      variant.rates.push_back(
          run[o.arrivals > 0 ? "busy_queries_per_second" : "queries_per_second"].get<double>());
      variant.last = std::move(run);
    }
  b.call_size = saved_call;
  b.ref_stride = 1;
  const char* rate = o.arrivals > 0 ? "busy_queries_per_second" : "queries_per_second";
  const double med_off = metrics::percentile(variants[0].rates, 50);
  online_json["offline"] = variants[0].last;
  online_json["offline_rates"] = variants[0].rates;
  online_json["variants"] = nlohmann::json::array();
  for (std::size_t arm = 1; arm < variants.size(); ++arm) {
    const Variant& v = variants[arm];
    const double med_on = metrics::percentile(v.rates, 50);
    fmt::print(
        "drifting log at {}x, {}, {} rounds: online {} / offline = {:.3f} (medians {:.0f} / "
        "{:.0f} {})\n",
        o.ratio, pc.name(), o.rounds, v.spec, med_on / med_off, med_on, med_off, rate);
    // The first variant's last run is the report's "online" (not repeated: wrong counted once).
    online_json["variants"].push_back({{"spec", v.spec},
                                       {"rates", v.rates},
                                       {"online_over_offline", med_on / med_off},
                                       {"run", arm == 1 ? nlohmann::json("online") : v.last}});
    if (arm == 1) {  // the first variant: the report's "online"
      online_json["online"] = v.last;
      online_json["online_rates"] = v.rates;
      online_json["online_over_offline"] = med_on / med_off;
    }
  }
  online_json["rounds"] = o.rounds;
  online_json["online_over_offline_measure"] = rate;
  online_json["arrivals_per_second"] = o.arrivals;
  online_json["swap_fraction"] = o.swap_fraction;
  online_json["ratio"] = o.ratio;
  online_json["call_size"] = o.call_size;
  online_json["drifting_queries"] = drifting.size();
  online_json["drift_log"] = sp.to_json();
  online_json["online_variants"] = o.online;
  online_json["policy"] = pc.name();
  online_json["planner_threads"] = o.planner_threads;
  return online_json;
}

}  // namespace gpusearch::bench
