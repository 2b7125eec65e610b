// What a drifting test log leaves for an online list-cache policy to gain (a program, not a
// test; CPU only, no serving): the byte hit rate of each half of the log under the offline VFB
// plan (fitted on the training log) and under a plan fitted on the drifted half itself, out of
// sample (fitted on its even queries, scored on its odd ones), with the gate's figures (saving
// per query against the bytes the held cache serves per query, and the bytes a change copies).
// The hit rate is the share of the bytes each query's simulated reads (the engine's
// early-terminating AND, simulate_and_reads) that the cached prefixes hold. It chooses the
// generator's drift settings (query_drift, drift_ramp, drift_topics) before a GPU run: the H100
// runs' log (query_drift=1 alone) moved under 2% of the bytes a query reads, below the gate's
// margin, so the online policy could at best tie the offline plan there.
// With --online, the online policy itself follows the log in calls (plans awaited after each
// call, as the CPU twin's tests do: no serving, no timing), with the bench's settings, and the
// drifted half's hit rate under the cache it keeps (a directory the plans are applied to, each
// change copying at most --swap-fraction of the cache) is printed beside the offline plan's.
//
//   bench_drift_headroom --spec "docs=200000,seed=7,query_drift=1,drift_topics=8"
//       [--index DIR] [--ratio 10] [--share 0.8] [--k 10] [--out headroom.json]
//       [--online [--sample 4] [--half-life 8000] [--replan 2000] [--max-pending 4000]
//        [--min-payoff 1] [--min-gain 0.02] [--call-size 1000] [--swap-fraction 0.0625]
//        [--replan-backoff 8] [--own-cadence]]
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include <fmt/format.h>
#include <tbb/parallel_for.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/cache_admission.hpp"
#include "common/cache_plan.hpp"
#include "common/error.hpp"
#include "common/list_cache.hpp"
#include "common/online_cache_policy.hpp"
#include "common/shard_index.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"

using namespace gpusearch;

namespace {

struct Replayed {
  std::vector<Query> queries;
  std::vector<std::vector<ListRead>> reads;
};

Replayed replay(const ShardIndex& shard,
                const std::vector<std::pair<std::string, std::string>>& log, unsigned k) {
  Replayed r;
  for (const auto& [id, text] : log) {
    Query q;
    QueryProblem p;
    if (resolve_query(shard, QueryText{id, text, 0, {}}, {}, q, p, "log") && !q.terms.empty())
      r.queries.push_back(std::move(q));
  }
  r.reads.resize(r.queries.size());
  tbb::parallel_for(std::size_t(0), r.queries.size(), [&](std::size_t i) {
    r.reads[i] = simulate_and_reads(shard, r.queries[i], k, Scoring::kBm25);
  });
  return r;
}

// Visits of queries [begin, end) of r, every `stride`-th from `begin`.
VisitLog visits_of(const Replayed& r, std::size_t begin, std::size_t end, std::size_t stride) {
  VisitLog v;
  for (std::size_t i = begin; i < end; i += stride) {
    for (TermId t : r.queries[i].terms) v[t].query_frequency += 1;
    for (const ListRead& read : r.reads[i]) v[read.term].prefixes.push_back({read.blocks, 1.0});
  }
  return v;
}

struct Scored {
  double read = 0, hit = 0;  // bytes per query
  double rate() const { return read > 0 ? hit / read : 0; }
};

Scored score(const ShardIndex& shard, const std::vector<CachedList>& plan, const Replayed& r,
             std::size_t begin, std::size_t end, std::size_t stride) {
  std::unordered_map<TermId, std::uint32_t> cached;
  for (const CachedList& l : plan) cached[l.term] = l.blocks;
  Scored s;
  std::size_t n = 0;
  for (std::size_t i = begin; i < end; i += stride, ++n)
    for (const ListRead& read : r.reads[i]) {
      const std::uint64_t first = shard.term(read.term).first_block;
      s.read += double(blocks_bytes(shard, first, read.blocks));
      const auto it = cached.find(read.term);
      if (it != cached.end())
        s.hit += double(blocks_bytes(shard, first, std::min(read.blocks, it->second)));
    }
  if (n > 0) s.read /= double(n), s.hit /= double(n);
  return s;
}

// The online policy over the log in calls of `call`: after each call it is drained and its plan,
// if any, applied to `cache` (as the engine does between calls). With plan_every_call a drain
// also plans what was replayed since the last plan (a look for the gate after every call);
// without it plans come at the policy's own cadence and back-off, as on the GPU host, where the
// planner runs between calls and is never drained. Returns the hit of the log's
// second half under the cache held when each query was served, and the policy's stats.
struct OnlineRun {
  Scored second;
  std::size_t changes = 0;
  double used_fraction = 0;        // of the region the cache holds at the end
  std::uint64_t rebuilds = 0;      // changes that laid the region out again
  std::uint64_t lists_skipped = 0;  // wanted lists a change did not copy (copy limit or room)
  std::uint64_t bytes_copied = 0, bytes_relocated = 0;  // from the host; within the region
  std::uint64_t table_entries = 0;  // block-offset table entries the changes rewrote
  double apply_seconds = 0;         // the directory's share of the changes (host)
  nlohmann::json stats;
};
OnlineRun follow(const ShardIndex& shard, const Replayed& train, const Replayed& test,
                 const OnlinePolicyOptions& oo, const std::vector<CachedList>& offline,
                 std::size_t call, double swap_fraction, bool compaction_copy_limit,
                 bool plan_every_call) {
  const DeviceBlockNumbering numbering(shard);
  ListCacheDirectory cache(shard, numbering, oo.budget_bytes);
  cache.set_compaction_copy_limit(compaction_copy_limit);
  cache.apply(offline);
  OnlineCachePolicy online(shard, oo);
  online.seed(train.queries);
  online.take_plan();  // the offline plan's equal: the cache holds it
  online.report_cache(cache.held_lists());
  OnlineRun run;
  const std::size_t n = test.queries.size(), half = n / 2;
  double read = 0, hit = 0;
  for (std::size_t b = 0; b < n; b += call) {
    online.drain(plan_every_call);
    if (auto plan = online.take_plan()) {
      const auto t0 = std::chrono::steady_clock::now();
      const CacheChange change =
          cache.apply(*plan, std::uint64_t(swap_fraction * double(oo.budget_bytes)));
      run.apply_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      run.table_entries += change.patches.size();
      online.report_cache(cache.held_lists());
      ++run.changes;
      run.rebuilds += change.rebuilt;
      run.lists_skipped += change.lists_skipped;
      run.bytes_copied += change.words_copied * 4;
      run.bytes_relocated += change.words_relocated * 4;
    }
    const std::size_t e = std::min(n, b + call);
    if (e > half) {
      const Scored s = score(shard, cache.held_lists(), test, std::max(b, half), e, 1);
      const double q = double(e - std::max(b, half));
      read += s.read * q;
      hit += s.hit * q;
    }
    online.observe(std::span<const Query>(test.queries.data() + b, e - b));
  }
  run.second.read = read / double(n - half);
  run.second.hit = hit / double(n - half);
  run.stats = online.stats();
  run.used_fraction = cache.capacity_words() > 0
                          ? double(cache.used_words()) / double(cache.capacity_words())
                          : 0;
  return run;
}

double copy_bytes(const std::vector<CachedList>& from, const std::vector<CachedList>& to) {
  std::unordered_map<TermId, std::uint64_t> held;
  for (const CachedList& l : from) held[l.term] = l.bytes;
  double copy = 0;
  for (const CachedList& l : to) {
    const auto it = held.find(l.term);
    const double have = it == held.end() ? 0.0 : double(it->second);
    if (double(l.bytes) > have) copy += double(l.bytes) - have;
  }
  return copy;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_drift_headroom: what a drifting log leaves an online cache policy to gain"};
  std::string spec, out_file;
  std::filesystem::path index_dir;
  double ratio = 10, share = 0.8;
  unsigned k = 10;
  app.add_option("--spec", spec, "synthetic spec with the drift settings (query_drift, ...)")
      ->required();
  app.add_option(
      "--index", index_dir,
      "the spec's index (built here when it lacks a manifest; default: a temporary one)");
  app.add_option("--ratio", ratio, "postings / M (the cache is share x M)")->capture_default_str();
  app.add_option("--share", share, "S_c / M")->capture_default_str();
  app.add_option("--k", k, "of the simulated AND")->capture_default_str();
  app.add_option("--out", out_file, "JSON report");
  bool online = false;
  OnlinePolicyOptions oo;
  oo.sample_every = 4;  // bench_list_cache's drift comparison on the GPU host (cache-drift)
  oo.half_life_queries = 8000;
  oo.replan_queries = 2000;  // served queries (500 replayed at one in 4)
  oo.max_pending = 4000;
  oo.planner_priority = PlannerPriority::kNormal;
  oo.planner_threads = 4;
  std::size_t call = 1000;
  double swap_fraction = 1.0 / 16;
  bool compaction_copy_limit = false;
  bool own_cadence = false;
  std::string policy_name = "vfb";
  app.add_option("--policy", policy_name, "admission of both plans: vfb (lambda 1), qtf, qtfdf")
      ->capture_default_str();
  app.add_flag("--online", online, "also follow the log with the online policy");
  app.add_option("--sample", oo.sample_every, "online: replay one query in this many")
      ->capture_default_str();
  app.add_option("--half-life", oo.half_life_queries, "online: --cache-half-life")
      ->capture_default_str();
  app.add_option("--replan", oo.replan_queries, "online: --cache-replan")->capture_default_str();
  app.add_option("--replan-backoff", oo.replan_backoff_max, "online: --cache-replan-backoff")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  app.add_flag("--own-cadence", own_cadence,
               "online: plans only every --replan served queries, stretched by the back-off, as "
               "on the GPU host (default: a plan, and a look for the gate, after every call)");
  app.add_option("--max-pending", oo.max_pending, "online: queries queued for replay")
      ->capture_default_str();
  app.add_option("--min-payoff", oo.min_payoff, "online: the gate (0: every plan)")
      ->capture_default_str();
  app.add_option("--min-gain", oo.min_gain, "online: the gate's margin")->capture_default_str();
  app.add_option("--call-size", call, "online: queries per call")->capture_default_str();
  app.add_option("--planner-threads", oo.planner_threads, "online: replay threads (same plans)")
      ->capture_default_str();
  app.add_flag("--compaction-copy-limit", compaction_copy_limit,
               "online: a rebuild's copies from the host keep to --swap-fraction too");
  app.add_option("--swap-fraction", swap_fraction, "online: bytes a change copies, of S_c")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const SyntheticParams params = SyntheticParams::parse(spec);
    if (!(params.query_drift > 0))
      throw InputError("--spec", 0, "no drift: add query_drift=F (0 < F <= 1)");
    const bool temporary = index_dir.empty();
    if (temporary)
      index_dir =
          std::filesystem::temp_directory_path() / fmt::format("gpusearch-headroom-{}", ::getpid());
    if (!std::filesystem::exists(index_dir / "manifest.json")) {
      BuildOptions bo;
      bo.out_dir = index_dir;
      bo.progress = false;
      build_index_synthetic(params, bo);  // the drift settings change no document
    }
    nlohmann::json report;
    {
      const Index index = Index::open(index_dir);
      const ShardIndex& shard = index.shard(0);
      const SyntheticCollection collection(params);
      const Replayed train = replay(shard, collection.queries(true), k);
      const Replayed test = replay(shard, collection.queries(false), k);
      const std::size_t n = test.queries.size(), half = n / 2;
      const std::uint64_t budget =
          std::uint64_t(share * double(shard.postings().size_bytes()) / ratio);
      const AdmissionOptions ao{parse_cache_policy(policy_name), 1.0, budget};
      VisitLog tv = visits_of(train, 0, train.queries.size(), 1);
      // The admission's own cost, by its two orders (vfb: a merge of the lists' candidates, the
      // default, against the sort of them all); the same plan either way.
      VisitLog tv_sorted = tv;
      const auto a0 = std::chrono::steady_clock::now();
      const auto offline = admit_lists(shard, tv, ao);
      const auto a1 = std::chrono::steady_clock::now();
      AdmissionOptions by_sort = ao;
      by_sort.merge_candidates = false;
      const auto offline_sorted = admit_lists(shard, tv_sorted, by_sort);
      const auto a2 = std::chrono::steady_clock::now();
      bool same_plan = offline.size() == offline_sorted.size();
      for (std::size_t i = 0; same_plan && i < offline.size(); ++i)
        same_plan = offline[i].term == offline_sorted[i].term &&
                    offline[i].blocks == offline_sorted[i].blocks;
      const double merge_s = std::chrono::duration<double>(a1 - a0).count(),
                   sort_s = std::chrono::duration<double>(a2 - a1).count();
      fmt::print("  admission of the training log's visits ({} lists admitted): merge {:.4f} s, "
                 "sort {:.4f} s, same plan: {}\n",
                 offline.size(), merge_s, sort_s, same_plan ? "yes" : "NO");
      if (!same_plan) throw Error("the merged and the sorted admission differ");
      VisitLog fv = visits_of(test, half, n, 2);  // the drifted half's even queries
      const auto fitted = admit_lists(shard, fv, ao);
      const Scored off_first = score(shard, offline, test, 0, half, 1),
                   off_second = score(shard, offline, test, half, n, 1),
                   off_odd = score(shard, offline, test, half + 1, n, 2),
                   fit_odd = score(shard, fitted, test, half + 1, n, 2);
      const double saving = fit_odd.hit - off_odd.hit, copy = copy_bytes(offline, fitted);
      report = {{"spec", spec},
                {"docs", shard.num_docs()},
                {"ratio", ratio},
                {"share", share},
                {"budget_bytes", budget},
                {"admission_seconds", {{"merge", merge_s}, {"sort", sort_s}}},
                {"test_queries", n},
                {"offline_hit_first_half", off_first.rate()},
                {"offline_hit_second_half", off_second.rate()},
                {"bytes_per_query_first_half", off_first.read},
                {"bytes_per_query_second_half", off_second.read},
                {"fitted_hit_second_half_out_of_sample", fit_odd.rate()},
                {"offline_hit_second_half_odd", off_odd.rate()},
                {"saving_per_query", saving},
                {"held_bytes_per_query", off_odd.hit},
                {"saving_share_of_held", off_odd.hit > 0 ? saving / off_odd.hit : 0},
                {"copy_bytes", copy},
                {"queries_to_repay_copy", saving > 0 ? copy / saving : -1}};
      fmt::print(
          "{}: offline plan hit (bytes) first / second half {:.3f} / {:.3f} ({:.0f} / {:.0f} B "
          "read per query); a plan fitted on the drifted half, out of sample {:.3f} (offline "
          "{:.3f} on the same queries): saves {:.0f} B/query = {:.1f}% of the {:.0f} the held "
          "cache serves; copies {:.1f} MB, repaid after {:.0f} queries\n",
          spec, off_first.rate(), off_second.rate(), off_first.read, off_second.read,
          fit_odd.rate(), off_odd.rate(), saving,
          off_odd.hit > 0 ? 100 * saving / off_odd.hit : 0.0, off_odd.hit, copy / 1e6,
          saving > 0 ? copy / saving : -1.0);
      if (online) {
        oo.budget_bytes = budget;
        oo.k = k;
        oo.policy = ao.policy;
        const OnlineRun run = follow(shard, train, test, oo, offline, call, swap_fraction,
                                     compaction_copy_limit, /*plan_every_call=*/!own_cadence);
        const auto& st = run.stats;
        report["online"] = {{"hit_second_half", run.second.rate()},
                            {"changes", run.changes},
                            {"used_fraction_at_end", run.used_fraction},
                            {"rebuilds", run.rebuilds},
                            {"lists_skipped", run.lists_skipped},
                            {"bytes_copied", run.bytes_copied},
                            {"bytes_relocated", run.bytes_relocated},
                            {"table_entries", run.table_entries},
                            {"apply_seconds", run.apply_seconds},
                            {"plans_after_every_call", !own_cadence},
                            {"stats", st}};
        fmt::print(
            "  online policy (sample 1/{}, half-life {}, re-plan every {}{}, gate {}:{}, calls of "
            "{}): second half hit {:.3f} against the offline plan's {:.3f}; {} changes, {} "
            "plans withheld (last gate: saves {:.0f} B/query of {:.0f}, copies {:.1f} MB); the "
            "region {:.1f}% full at the end, {} rebuilds, {} lists skipped; {:.1f} MB copied from the "
            "host, {:.1f} MB moved within the region, {} table entries, {:.3f} s in apply()\n",
            oo.sample_every, oo.half_life_queries, oo.replan_queries,
            own_cadence ? fmt::format(" served (back-off up to {}x)", oo.replan_backoff_max)
                        : std::string(" and after every call"),
            oo.min_payoff, oo.min_gain,
            call, run.second.rate(), off_second.rate(), run.changes,
            st["plans_withheld"].get<std::uint64_t>(),
            st["last_gate"]["saving_per_query"].get<double>(),
            st["last_gate"]["held_bytes_per_query"].get<double>(),
            st["last_gate"]["copy_bytes"].get<double>() / 1e6, 100 * run.used_fraction,
            run.rebuilds, run.lists_skipped, run.bytes_copied / 1e6, run.bytes_relocated / 1e6,
            run.table_entries, run.apply_seconds);
      }
    }
    if (temporary) std::filesystem::remove_all(index_dir);
    if (!out_file.empty()) std::ofstream(out_file) << report.dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_drift_headroom: " << e.what() << "\n";
    return 1;
  }
}
