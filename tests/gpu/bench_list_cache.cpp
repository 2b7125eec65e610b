// GPU list-cache benchmark (a program writing JSON, not a test; paper 000, 4.2-4.4): one shard
// served from a device budget M (S_c + S_b) smaller than its postings, against the engine
// holding the whole shard and the CPU engine on all host cores, in the same run.
//   sweep    throughput, hit rate (blocks, bytes), post-processed fraction, bytes shipped per
//            batch, for each ratio postings / M, each policy (VFB per lambda, Qtf, QtfDf) and
//            each cache share S_c / M; every row checks its first answers against the reference
//   model    the throughput model (eqs. 6-7) fitted on a policy's sweep at one ratio, its chosen
//            split next to the measured best, without and with a response-time bound
//   online   the online policy against the offline plan on a drifting log
// Flags: see --help. JSON: --out.
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <sys/resource.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_list_cache.hpp"
#include "common/cache_admission.hpp"
#include "common/cache_model.hpp"
#include "common/metrics.hpp"
#include "common/online_cache_policy.hpp"
#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "gpu/device_list_cache.hpp"
#include "gpu/gpu_engine.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "partition/synthetic_collection.hpp"

using namespace gpusearch;
using namespace gpusearch::bench;

namespace gpusearch::bench {

// Declared, with what it measures, in bench_list_cache.hpp.
nlohmann::json timed_run(Bench& b, QueryEngine& engine, const std::vector<Query>& qs,
                         const std::vector<ReferenceAnswer>& refs, std::size_t split,
                         double arrivals_per_s) {
  std::vector<ShardResult> out(qs.size());
  const std::size_t warm = std::min<std::size_t>(qs.size(), 512);
  engine.search(std::span<const Query>(qs.data(), warm), b.params,
                std::span<ShardResult>(out.data(), warm));
  if (auto* g = dynamic_cast<gpu::GpuEngine*>(&engine)) g->clear_stats();
  std::vector<double> call_ms;
  // Per call, from the engine's launch timelines: host time before the first launch is packed
  // (planning the call), and after the last launch is unpacked (post-processing, the online
  // policy's hand-over), so that a slower call can be placed.
  std::vector<double> pre_launch_ms, tail_ms;
  nlohmann::json at_split;  // the list-cache counters at the split (outside the timed calls)
  double split_secs = 0;
  std::size_t split_queries = 0;
  auto* gpu_engine = dynamic_cast<gpu::GpuEngine*>(&engine);
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < qs.size(); i += b.call_size) {
    const std::size_t n = std::min(b.call_size, qs.size() - i);
    if (arrivals_per_s > 0)
      std::this_thread::sleep_until(
          t0 + std::chrono::duration_cast<Clock::duration>(
                   std::chrono::duration<double>(double(i + n) / arrivals_per_s)));
    const std::size_t launches_before = gpu_engine ? gpu_engine->batch_stats().size() : 0;
    const auto c0 = Clock::now();
    engine.search(std::span<const Query>(qs.data() + i, n), b.params,
                  std::span<ShardResult>(out.data() + i, n));
    call_ms.push_back(1e3 * seconds_since(c0));
    if (gpu_engine && gpu_engine->batch_stats().size() > launches_before) {
      const auto& bs = gpu_engine->batch_stats();
      double first = 1e300, last = 0;
      for (std::size_t l = launches_before; l < bs.size(); ++l) {
        first = std::min(first, bs[l].timeline.host_pack_begin);
        last = std::max(last, bs[l].timeline.host_unpack_end);
      }
      pre_launch_ms.push_back(first);
      tail_ms.push_back(std::max(0.0, call_ms.back() - last));
    }
    if (split > 0 && gpu_engine && at_split.is_null() && i + n >= split) {
      const auto s0 = Clock::now();
      const nlohmann::json st = gpu_engine->stats();
      if (st.contains("list_cache")) at_split = st["list_cache"];
      split_queries = i + n;
      split_secs = seconds_since(s0);
    }
  }
  const double secs = seconds_since(t0) - split_secs;
  double busy_ms = 0;
  for (double c : call_ms) busy_ms += c;
  nlohmann::json j = {{"queries", qs.size()},
                      {"seconds", secs},
                      {"queries_per_second", double(qs.size()) / secs},
                      {"arrivals_per_second", arrivals_per_s},
                      {"busy_queries_per_second", busy_ms > 0 ? 1e3 * double(qs.size()) / busy_ms : 0.0},
                      {"call_ms_p50", metrics::percentile(call_ms, 50)},
                      {"call_pre_launch_ms_p50",
                       pre_launch_ms.empty() ? 0.0 : metrics::percentile(pre_launch_ms, 50)},
                      {"call_tail_ms_p50", tail_ms.empty() ? 0.0 : metrics::percentile(tail_ms, 50)},
                      {"wrong", b.wrong(out, refs, qs)},
                      {"checked", std::min(refs.size(), qs.size())}};
  if (auto* g = dynamic_cast<gpu::GpuEngine*>(&engine)) {
    std::vector<double> batch_ms;
    double h2d_ms = 0, kernel_ms = 0;
    for (const auto& s : g->batch_stats()) {
      batch_ms.push_back(s.pack_ms + s.h2d_ms + s.kernel_ms + s.d2h_ms + s.unpack_ms);
      h2d_ms += s.h2d_ms;
      kernel_ms += s.kernel_ms;
    }
    j["batch_ms_p50"] = batch_ms.empty() ? 0.0 : metrics::percentile(batch_ms, 50);
    j["batch_ms_p95"] = batch_ms.empty() ? 0.0 : metrics::percentile(batch_ms, 95);
    j["h2d_seconds"] = h2d_ms / 1e3;
    j["kernel_seconds"] = kernel_ms / 1e3;
    const nlohmann::json stats = g->stats();
    j["call_plan_seconds"] = stats.value("call_plan_seconds", 0.0);
    j["call_finish_seconds"] = stats.value("call_finish_seconds", 0.0);
    for (const char* part : {"call_launch_plan_seconds", "call_list_batches_seconds",
                             "call_buffers_seconds", "pack_ms", "unpack_ms", "d2h_ms"})
      j[part] = stats.value(part, 0.0);
    if (stats.contains("list_cache")) {
      nlohmann::json lc = stats["list_cache"];
      if (lc.contains("online_changes")) {
        // The swaps the online plans caused (the first ones may fall in the warm-up call).
        std::uint64_t copied = 0;
        for (const auto& c : lc["online_changes"]) copied += c.value("bytes_copied", 0ull);
        lc["online_cache_changes"] = lc["online_changes"].size();
        lc["online_bytes_copied"] = copied;
      }
      lc.erase("online_changes");
      if (!at_split.is_null()) {
        auto rate = [](double hit, double shipped) {
          return hit + shipped > 0 ? hit / (hit + shipped) : 0.0;
        };
        const double h1 = at_split["bytes_hit"].get<double>(),
                     s1 = at_split["bytes_shipped"].get<double>();
        lc["split_queries"] = split_queries;
        lc["hit_rate_bytes_first_half"] = rate(h1, s1);
        lc["hit_rate_bytes_second_half"] =
            rate(lc["bytes_hit"].get<double>() - h1, lc["bytes_shipped"].get<double>() - s1);
      }
      j["list_cache"] = lc;
    }
  }
  return j;
}

// Declared in bench_list_cache.hpp.
PolicyCase PolicyCase::parse(std::string name, const std::string& flag) {
  const std::string given = name;
  const bool tails = name.size() > 6 && name.substr(name.size() - 6) == "+tails";
  if (tails) name.resize(name.size() - 6);
  if (name.rfind("vfb:", 0) != 0) {
    if (name != "qtf" && name != "qtfdf")
      throw InputError(flag, 0, "unknown cache policy '" + given + "' (vfb:LAMBDA, qtf, qtfdf)");
    return {parse_cache_policy(name), 1.0, tails};
  }
  double lambda = 0;
  try {
    lambda = std::stod(name.substr(4));
  } catch (const std::exception&) {
    lambda = -1;
  }
  if (!(lambda > 0 && lambda <= 1))
    throw InputError(flag, 0, "'" + given + "': vfb's lambda must be in (0, 1]");
  return {CachePolicy::kVfb, lambda, tails};
}

std::unique_ptr<gpu::GpuEngine> cached_engine(Bench& b, double memory, double cache_share,
                                              const std::vector<CachedList>& lists,
                                              unsigned batch_size, bool tails) {
  gpu::GpuEngineOptions o;
  o.ship_tails = tails;
  o.list_cache = true;
  o.cache_bytes = std::uint64_t(cache_share * memory);
  o.batch_bytes = std::uint64_t(memory) - o.cache_bytes;
  o.batch_size = batch_size;
  o.postprocess_threads = b.postprocess_threads;
  auto e = std::make_unique<gpu::GpuEngine>(b.shard, 0, o);
  auto cpu = b.cpu;
  e->set_post_processor(
      [cpu](const Query& q, const SearchParams& p, DocId from, const ShardResult& running) {
        return cpu->resume(q, p, from, running);
      });
  e->apply_cache_plan(lists);
  return e;
}

}  // namespace gpusearch::bench

namespace {


std::vector<Query> read_queries(const ShardIndex& shard, const std::filesystem::path& file,
                                std::size_t limit) {
  std::vector<Query> out;
  for (const QueryText& qt : read_query_file(file).queries) {
    if (out.size() >= limit) break;
    Query q;
    QueryProblem p;
    if (resolve_query(shard, qt, {}, q, p, file.string()) && !q.terms.empty()) out.push_back(q);
  }
  return out;
}





nlohmann::json sweep_row(Bench& b, double ratio, double memory, const PolicyCase& pc, double share,
                         unsigned batch_size) {
  VisitLog visits = b.visits;
  const auto lists = admit_lists(b.shard, visits,
                                 {.policy = pc.policy,
                                  .lambda = pc.lambda,
                                  .budget_bytes = std::uint64_t(share * memory),
                                  .fill_spare = b.fill_spare});
  auto e = cached_engine(b, memory, share, lists, batch_size, pc.tails);
  nlohmann::json row = timed_run(b, *e, b.test, b.refs);
  row["ratio"] = ratio;
  row["memory_bytes"] = memory;
  row["policy"] = pc.name();
  row["cache_share"] = share;
  row["fill_spare"] = b.fill_spare;
  row["cache_bytes"] = std::uint64_t(share * memory);
  row["batch_bytes"] = std::uint64_t(memory) - std::uint64_t(share * memory);
  row["batch_cap"] = batch_size;
  const auto& lc = row["list_cache"];
  fmt::print(
      "{:>5.1f}x {:>9} S_c {:>4.2f} cap {:>5}: {:>9.0f} q/s  hit {:>5.3f} blocks {:>5.3f} bytes"
      "  post {:>5.3f}  shipped/batch {:>8.2f} MB  batches {:>5}  wrong {}\n",
      ratio, pc.name(), share, batch_size, row["queries_per_second"].get<double>(),
      lc["hit_rate_blocks"].get<double>(), lc["hit_rate_bytes"].get<double>(),
      lc["post_processed_fraction"].get<double>(),
      lc["bytes_shipped_per_batch"].get<double>() / 1e6, lc["batches"].get<std::uint64_t>(),
      row["wrong"].get<std::size_t>());
  std::fflush(stdout);
  return row;
}

// The model's choice against the measured rows, printed and as JSON, without and with a bound.
nlohmann::json model_comparisons(const ThroughputModel& model,
                                 const std::vector<nlohmann::json>& rows, double memory,
                                 double max_queries, double theta) {
  nlohmann::json cmp = nlohmann::json::array();
  for (double bound : {0.0, theta}) {
    nlohmann::json c = compare_with_measured(model, rows, memory, max_queries, bound);
    fmt::print(
        "model ({:.3g} ms bound): predicted S_c/M {:.2f} (n {:.0f}, {:.0f} q/s); of the measured "
        "splits it ranks {} first; measured best {}\n",
        bound, c["predicted_cache_share"].get<double>(), c["predicted_batch_queries"].get<double>(),
        c["predicted_queries_per_second"].get<double>(),
        c["model_ranks_first_cache_share"].get<double>() < 0
            ? std::string("none (no row meets the bound)")
            : fmt::format("S_c/M {:.2f} cap {}", c["model_ranks_first_cache_share"].get<double>(),
                          c["model_ranks_first_batch_cap"].get<unsigned>()),
        c["measured_cache_share"].get<double>() < 0
            ? std::string("none")
            : fmt::format("{:.2f} cap {} ({:.0f} q/s)", c["measured_cache_share"].get<double>(),
                          c["measured_batch_cap"].get<unsigned>(),
                          c["measured_queries_per_second"].get<double>()));
    cmp.push_back(std::move(c));
  }
  return cmp;
}

void print_fit(const ThroughputModel& m) {
  fmt::print("model fit: c(n) = {:.3g} + {:.3g} / n s, copy {:.3g} s + {:.3g} s/B; dq:", m.c0, m.c1,
             m.t_fixed_s, m.t_per_byte);
  for (const auto& [c, d] : m.dq_points) fmt::print(" ({:.0f} B: {:.0f} B/q)", c, d);
  fmt::print("\n");
  for (const auto& n : m.fit_notes) fmt::print("  fit: {}\n", n);
}

// --refit: the model again from a report's measured rows, offline (no GPU, no index).
int refit(const std::filesystem::path& file, std::string policy, double ratio, double theta,
          const std::filesystem::path& model_out) {
  std::ifstream in(file);
  if (!in) throw InputError(file.string(), 0, "cannot read the bench_list_cache report");
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file.string(), 0, fmt::format("malformed JSON: {}", e.what()));
  }
  // Default: what the run fitted (its model note "POLICY at RATIOx of INDEX").
  if (report.contains("model") && report["model"].contains("fit")) {
    const std::string note = report["model"]["fit"].value("note", "");
    const auto at = note.find(" at ");
    const auto x = note.find("x of ");
    if (policy.empty() && at != std::string::npos) policy = note.substr(0, at);
    if (ratio <= 0 && at != std::string::npos && x != std::string::npos)
      ratio = std::stod(note.substr(at + 4, x - at - 4));
    if (theta <= 0 && report["model"].contains("comparison") &&
        report["model"]["comparison"].size() > 1)
      theta = report["model"]["comparison"][1].value("max_response_ms", 0.0);
  }
  if (policy.empty() || ratio <= 0)
    throw InputError(file.string(), 0,
                     "no model in the report: name --refit-policy and --refit-ratio");
  const std::vector<nlohmann::json> rows = bench_rows(report, ratio, policy);
  if (rows.empty())
    throw InputError(file.string(), 0,
                     fmt::format("no measured rows for {} at {}x", policy, ratio));
  std::vector<CacheRunSample> samples;
  double max_cap = 0;
  for (const auto& row : rows) {
    samples.push_back(CacheRunSample::from_bench_row(row));
    max_cap = std::max(max_cap, samples.back().max_batch_queries);
  }
  ThroughputModel model = ThroughputModel::fit(samples);
  model.note = fmt::format("{} at {}x of {} (refit from {})", policy, ratio,
                           report.value("index", std::string("?")), file.string());
  fmt::print("refit: {} rows of {} at {}x\n", rows.size(), policy, ratio);
  print_fit(model);
  const double memory = rows.front().at("memory_bytes").get<double>();
  const double cap = report.contains("model") && !report["model"]["rows"].empty()
                         ? report["model"]["rows"][0].value("batch_cap", max_cap)
                         : max_cap;
  if (theta <= 0) theta = 10.0;
  nlohmann::json cmp = model_comparisons(model, rows, memory, cap, theta);
  for (const auto& c : cmp)
    for (const auto& r : c["rows"])
      if (c["max_response_ms"].get<double>() == 0)
        fmt::print("  S_c/M {:.2f} cap {:>5.0f}: measured {:>8.0f} q/s, model {:>8.0f} q/s\n",
                   r["cache_share"].get<double>(), r["batch_cap"].get<double>(),
                   r["measured_queries_per_second"].get<double>(),
                   r["predicted_queries_per_second"].get<double>());
  if (!model_out.empty()) model.write(model_out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GPU list-cache benchmark (paper 000): JSON out"};
  std::filesystem::path index_dir, train_file, test_file, out_file, model_out;
  std::string mode = "and", scoring = "bm25-pr", ratios = "2.5,10", shares = "0.5,0.7,0.8,0.9,0.95";
  std::string policies = "vfb:0.75,vfb:1,vfb:1+tails,qtf,qtfdf", caps = "4096,1024,256";
  std::size_t limit = 10000, train_limit = 10000, cpu_limit = 4000;
  double theta_ms = 0;
  unsigned k = 10;
  bool skip_sweep = false, skip_model = false;
  std::filesystem::path refit_file;
  std::string refit_policy, model_shares = "0.1,0.3";
  double refit_ratio = 0, model_ratio = 0;
  app.add_option(
      "--model-ratio", model_ratio,
      "the ratio (one of --ratios) the model is fitted and compared at (default: the first)");
  app.add_option("--refit", refit_file,
                 "offline: fit the model again from this report's rows (no GPU, no index)");
  app.add_option("--refit-policy", refit_policy, "--refit: the policy (default: the report's)");
  app.add_option("--refit-ratio", refit_ratio, "--refit: the ratio (default: the report's)");
  app.add_option("--model-shares", model_shares,
                 "extra S_c / M measured for the model only (small caches: dq below the sweep)")
      ->capture_default_str();
  app.add_option("--index", index_dir, "index directory (one shard; not with --refit)");
  app.add_option("--train", train_file, "training log (default INDEX/queries.train.tsv)");
  app.add_option("--test", test_file, "test log (default INDEX/queries.test.tsv)");
  app.add_option("--out", out_file, "JSON output (not with --refit)");
  app.add_option("--mode", mode, "and, or, and-or")->capture_default_str();
  app.add_option("--scoring", scoring, "bm25 or bm25-pr")->capture_default_str();
  app.add_option("--k", k, "results per query")->capture_default_str();
  app.add_option("--limit", limit, "test queries")->capture_default_str();
  app.add_option("--train-limit", train_limit, "training queries")->capture_default_str();
  app.add_option("--cpu-limit", cpu_limit, "test queries for the CPU engine")
      ->capture_default_str();
  app.add_option("--ratios", ratios, "postings / M for each memory budget")->capture_default_str();
  app.add_option("--shares", shares, "S_c / M of the sweep")->capture_default_str();
  app.add_option("--policies", policies, "vfb:LAMBDA, qtf, qtfdf; +tails: cut lists ship whole")
      ->capture_default_str();
  app.add_option("--caps", caps, "queries per launch tried for the model (first: the sweep's)")
      ->capture_default_str();
  app.add_option("--theta-ms", theta_ms,
                 "response bound for the model comparison (0: the p50 "
                 "batch time of the sweep's best row)");
  DriftOptions drift;
  add_drift_options(app, drift);
  app.add_option("--model-out", model_out, "write the fitted throughput model (--cache-model)");
  app.add_flag("--skip-sweep", skip_sweep, "only the baselines and the online comparison");
  app.add_flag("--skip-model", skip_model, "no model runs");
  bool no_fill = false;
  app.add_flag("--no-fill", no_fill,
               "plans leave the budget their lists do not take empty (default: filled with "
               "unqueried lists, longest first)");
  unsigned postprocess_threads = 0;
  app.add_option("--postprocess-threads", postprocess_threads, "0: cores - 1")
      ->capture_default_str();
  std::size_t check = 200, call_size = 4096;
  app.add_option("--check", check, "answers checked against the reference per row")
      ->capture_default_str();
  app.add_option("--call-size", call_size, "queries per search() call")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    if (!refit_file.empty())
      return refit(refit_file, refit_policy, refit_ratio, theta_ms, model_out);
    if (index_dir.empty() || out_file.empty())
      throw InputError("bench_list_cache", 0, "--index and --out are required (or --refit)");
    if (!gpu::gpu_available()) {
      std::cerr << "bench_list_cache: NO CUDA DEVICE\n";
      return 2;
    }
    const Index index = Index::open(index_dir);
    if (index.num_open_shards() != 1) throw InputError("--index", 0, "one shard, please");
    const ShardIndex& shard = index.shard(0);
    Bench b{index, shard, {parse_mode(mode), parse_scoring(scoring), index.params().gs_alpha, k}};
    b.check = check;
    b.call_size = call_size;
    b.postprocess_threads = postprocess_threads;
    b.fill_spare = !no_fill;
    b.train = read_queries(shard, train_file.empty() ? index_dir / "queries.train.tsv" : train_file,
                           train_limit);
    b.test =
        read_queries(shard, test_file.empty() ? index_dir / "queries.test.tsv" : test_file, limit);
    b.cpu = std::make_shared<const cpu::CpuEngine>(shard, 0);
    const double postings = double(shard.postings().size_bytes());
    nlohmann::json report = {{"index", index_dir.string()},
                             {"docs", shard.num_docs()},
                             {"posting_bytes", postings},
                             {"resident_bytes", gpu::list_cache_resident_bytes(shard)},
                             {"mode", mode},
                             {"scoring", scoring},
                             {"k", k},
                             {"test_queries", b.test.size()},
                             {"train_queries", b.train.size()},
                             {"host_threads", std::thread::hardware_concurrency()}};
    const auto t_ref = Clock::now();
    b.refs.resize(std::min(check, b.test.size()));
    tbb::parallel_for(std::size_t(0), b.refs.size(), [&](std::size_t i) {
      b.refs[i] = reference_answer(index, b.test[i], b.params, 2 * k + 20);
    });
    const auto t_plan = Clock::now();
    {
      std::vector<std::vector<ListRead>> reads(b.train.size());
      tbb::parallel_for(std::size_t(0), b.train.size(), [&](std::size_t i) {
        reads[i] = simulate_and_reads(shard, b.train[i], k, b.params.scoring);
      });
      for (std::size_t i = 0; i < b.train.size(); ++i) {
        for (TermId t : b.train[i].terms) b.visits[t].query_frequency += 1;
        for (const ListRead& r : reads[i]) b.visits[r.term].prefixes.push_back({r.blocks, 1.0});
      }
    }
    report["reference_seconds"] = seconds_since(t_ref) - seconds_since(t_plan);
    report["training_replay_seconds"] = seconds_since(t_plan);

    // Baselines: the CPU engine on every host core, the GPU engine holding the whole shard.
    {
      cpu::CpuEngine cpu(shard, 0);
      std::vector<Query> qs(b.test.begin(),
                            b.test.begin() + std::ptrdiff_t(std::min(cpu_limit, b.test.size())));
      report["cpu"] = timed_run(b, cpu, qs, b.refs);
      gpu::GpuEngine whole(shard, 0, gpu::GpuEngineOptions{});
      report["gpu_all_resident"] = timed_run(b, whole, b.test, b.refs);
      fmt::print("baselines: CPU engine {:.0f} q/s ({} threads), GPU all resident {:.0f} q/s\n",
                 report["cpu"]["queries_per_second"].get<double>(),
                 std::thread::hardware_concurrency(),
                 report["gpu_all_resident"]["queries_per_second"].get<double>());
    }
    std::vector<PolicyCase> cases;
    for (const std::string& p : split(policies)) cases.push_back(PolicyCase::parse(p, "--policies"));
    std::vector<double> share_list, ratio_list;
    for (const auto& s : split(shares)) share_list.push_back(std::stod(s));
    for (const auto& r : split(ratios)) ratio_list.push_back(std::stod(r));
    if (model_ratio > 0 &&
        std::find(ratio_list.begin(), ratio_list.end(), model_ratio) == ratio_list.end())
      throw InputError("--model-ratio", 0,
                       fmt::format("{} is not one of --ratios {}", model_ratio, ratios));
    std::vector<unsigned> cap_list;
    for (const auto& c : split(caps)) cap_list.push_back(unsigned(std::stoul(c)));
    if (!cap_list.empty()) b.batch_size = cap_list.front();

    // The sweep, and per ratio and policy the best share.
    nlohmann::json sweep = nlohmann::json::array(), best = nlohmann::json::object();
    if (!skip_sweep) {
      for (double ratio : ratio_list) {
        const double memory = postings / ratio;
        for (const PolicyCase& pc : cases) {
          nlohmann::json top;
          for (double share : share_list) {
            nlohmann::json row = sweep_row(b, ratio, memory, pc, share, b.batch_size);
            if (top.is_null() || row["queries_per_second"] > top["queries_per_second"]) top = row;
            sweep.push_back(std::move(row));
          }
          best[fmt::format("{}x {}", ratio, pc.name())] = top;
        }
      }
    }
    report["sweep"] = sweep;
    report["best"] = best;
    // Targets: VFB (its best lambda and share) against the whole-shard GPU engine and the CPU
    // engine, and the policies' order.
    {
      nlohmann::json targets = nlohmann::json::object();
      const double all = report["gpu_all_resident"]["queries_per_second"].get<double>();
      const double cpu_qps = report["cpu"]["queries_per_second"].get<double>();
      for (double ratio : ratio_list) {
        double vfb = 0, qtf = 0, qtfdf = 0;
        for (const PolicyCase& pc : cases) {
          const auto key = fmt::format("{}x {}", ratio, pc.name());
          if (!best.contains(key)) continue;
          const double q = best[key]["queries_per_second"].get<double>();
          if (pc.policy == CachePolicy::kVfb) vfb = std::max(vfb, q);
          if (pc.policy == CachePolicy::kQtf) qtf = q;
          if (pc.policy == CachePolicy::kQtfDf) qtfdf = q;
        }
        targets[fmt::format("{}x", ratio)] = {{"vfb_qps", vfb},
                                              {"vfb_over_all_resident", all > 0 ? vfb / all : 0},
                                              {"vfb_over_cpu", cpu_qps > 0 ? vfb / cpu_qps : 0},
                                              {"vfb_over_qtf", qtf > 0 ? vfb / qtf : 0},
                                              {"vfb_over_qtfdf", qtfdf > 0 ? vfb / qtfdf : 0}};
        fmt::print(
            "{}x: VFB {:.0f} q/s = {:.2f} x all-resident, {:.2f} x CPU; over Qtf {:.2f}, "
            "over QtfDf {:.2f}\n",
            ratio, vfb, all > 0 ? vfb / all : 0, cpu_qps > 0 ? vfb / cpu_qps : 0,
            qtf > 0 ? vfb / qtf : 0, qtfdf > 0 ? vfb / qtfdf : 0);
      }
      report["targets"] = targets;
    }
    if (!skip_sweep && !skip_model && !ratio_list.empty()) {
      // The model on the model ratio's best VFB case: the sweep's rows plus rows at small caches
      // and at smaller batch caps (so that dq and c(n) see several S_c and n), fitted; its
      // choice against the measured best.
      const double ratio = model_ratio > 0 ? model_ratio : ratio_list.front();
      const double memory = postings / ratio;
      PolicyCase pc = cases.front();
      double top = -1;
      for (const PolicyCase& c : cases) {
        const auto key = fmt::format("{}x {}", ratio, c.name());
        if (c.policy == CachePolicy::kVfb && best.contains(key) &&
            best[key]["queries_per_second"].get<double>() > top) {
          top = best[key]["queries_per_second"].get<double>();
          pc = c;
        }
      }
      std::vector<nlohmann::json> rows;
      for (const auto& row : sweep)
        if (row["ratio"] == ratio && row["policy"] == pc.name()) rows.push_back(row);
      // Small caches, measured for the model only (dq where the sweep does not reach), then
      // every share at the other launch caps.
      for (const auto& s : split(model_shares))
        rows.push_back(sweep_row(b, ratio, memory, pc, std::stod(s), cap_list.front()));
      for (std::size_t c = 1; c < cap_list.size(); ++c)
        for (double share : share_list)
          rows.push_back(sweep_row(b, ratio, memory, pc, share, cap_list[c]));
      std::vector<CacheRunSample> samples;
      for (const auto& row : rows) samples.push_back(CacheRunSample::from_bench_row(row));
      ThroughputModel model = ThroughputModel::fit(samples);
      model.note = fmt::format("{} at {}x of {}", pc.name(), ratio, index_dir.string());
      print_fit(model);
      if (!model_out.empty()) model.write(model_out);
      double theta = theta_ms;
      if (theta <= 0)
        theta = best[fmt::format("{}x {}", ratio, pc.name())].value("batch_ms_p50", 10.0);
      const nlohmann::json cmp = model_comparisons(model, rows, memory, cap_list.front(), theta);
      report["model"] = {{"fit", model.to_json()}, {"rows", rows}, {"comparison", cmp}};
    }
    if (!drift.spec.empty()) report["online"] = run_drift_comparison(b, drift, postings);
    std::ofstream out(out_file);
    out << report.dump(2) << '\n';
    if (!out) throw Error("cannot write " + out_file.string());
    std::size_t wrong = 0;
    auto count_wrong = [&](const nlohmann::json& j, auto&& self) -> void {
      if (j.is_object()) {
        if (j.contains("wrong") && j["wrong"].is_number()) wrong += j["wrong"].get<std::size_t>();
        for (const auto& [key, v] : j.items())
          if (key != "wrong" && key != "best") self(v, self);  // "best" repeats sweep rows
      } else if (j.is_array()) {
        for (const auto& v : j) self(v, self);
      }
    };
    count_wrong(report, count_wrong);
    fmt::print("wrong answers in all rows: {}\nJSON: {}\n", wrong, out_file.string());
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "bench_list_cache: " << e.what() << '\n';
    return 2;
  }
}
