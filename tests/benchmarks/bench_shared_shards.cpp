// The node's sharding cost without the cluster (issue 16): one CPU engine over a whole shard
// against N engines over its N shards (`gpusearch partition`) sharing their queries' thresholds
// and unions as a node's ISNs do (isn/shared_thresholds.hpp: slot and union lines per query and
// phase, the collection's combined K-th impact seeds), in one process: no MPI, no wire. The
// shards run in turn (one after another: deterministic, for callgrind's instruction counts) or at
// once (each on its own oneTBB arena of threads / N, as the ISNs of a 16-core node run), or at
// once in lockstep (every shard starts a batch when all have ended the one before: the ISNs of
// a node receive a batch together when the aggregator admits just in time). Queries
// go in batches, as the ISN hands them to the engine (CpuEngine::search with slots: every AND
// phase of the batch, then the OR phases). Every merged answer is checked against the whole
// shard's.
//
//   bench_shared_shards --whole DIR --sharded DIR --queries FILE [--limit Q] [--mode and-or]
//                       [--k 10] [--batch 1024] [--threads T]
//                       [--configs whole,in-turn,at-once,lockstep] [--in-order on|off]
//                       [--reps R] [--out JSON]
//
// Under callgrind: --threads 1 --configs whole (or in-turn), --toggle-collect='*run_config*'.
#include <barrier>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <tbb/task_arena.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/kth_impact_table.hpp"
#include "common/result_compare.hpp"
#include "common/shard_index.hpp"
#include "common/wire/wire.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/cpu_engine/threshold_slot.hpp"
#include "isn/shared_thresholds.hpp"

using namespace gpusearch;
using Clock = std::chrono::steady_clock;

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The slot pairs of every query, laid out as the ISNs' window lays out one batch's
// (SharedThresholdWindow: per phase the slot in a line of its own, its union in the next two).
struct SlotArena {
  static constexpr std::size_t kWordsPerPhase = SharedThresholdWindow::kWordsPerPhase;
  static constexpr std::size_t kSlotWords = SharedThresholdWindow::kSlotWords;
  std::unique_ptr<std::uint64_t[]> storage;
  std::uint64_t* words = nullptr;
  std::vector<cpu::QueryThresholdSlots> slots;
  explicit SlotArena(std::size_t queries) {
    const std::size_t n = queries * 2 * kWordsPerPhase + 8;
    storage.reset(new std::uint64_t[n]());
    words = reinterpret_cast<std::uint64_t*>((reinterpret_cast<std::uintptr_t>(storage.get()) + 63) &
                                             ~std::uintptr_t(63));
    slots.resize(queries);
    for (std::size_t q = 0; q < queries; ++q) {
      auto phase = [&](std::size_t p) {
        std::uint64_t* w = words + (2 * q + p) * kWordsPerPhase;
        return cpu::ThresholdSlot(w, 1, w + kSlotWords, cpu::ThresholdSlot::kUnionCapacity);
      };
      slots[q] = {phase(0), phase(1)};
    }
  }
};

struct ConfigRun {
  std::string config;
  double seconds = 0, cpu_seconds = 0;
  QueryCounters work;
  std::vector<std::vector<ShardResult>> by_shard;  // [shard][query]
};

// One engine per shard of `index`, batch by batch over `queries`.
ConfigRun run_config(const std::string& config, const Index& index,
                     std::vector<std::unique_ptr<cpu::CpuEngine>>& engines,
                     const std::vector<Query>& queries, const SearchParams& p, std::size_t batch,
                     unsigned threads) {
  ConfigRun r;
  r.config = config;
  const std::size_t shards = engines.size();
  r.by_shard.assign(shards, std::vector<ShardResult>(queries.size()));
  SlotArena arena(shards > 1 ? queries.size() : 0);
  const auto search = [&](std::size_t s, std::size_t from, std::size_t n) {
    std::span<const Query> qs(queries.data() + from, n);
    std::span<ShardResult> out(r.by_shard[s].data() + from, n);
    if (shards > 1)
      engines[s]->search(qs, p, out,
                         std::span<const cpu::QueryThresholdSlots>(arena.slots.data() + from, n));
    else
      engines[s]->search(qs, p, out);
  };
  const auto t0 = Clock::now();
  const double c0 = process_cpu_seconds();
  if (config == "at-once" || config == "lockstep") {
    std::barrier batch_done{std::ptrdiff_t(shards)};
    std::vector<std::thread> workers;
    for (std::size_t s = 0; s < shards; ++s)
      workers.emplace_back([&, s] {
        tbb::task_arena a{int(std::max<unsigned>(1, threads / unsigned(shards)))};
        a.execute([&] {
          for (std::size_t from = 0; from < queries.size(); from += batch) {
            search(s, from, std::min(batch, queries.size() - from));
            if (config == "lockstep") batch_done.arrive_and_wait();
          }
        });
      });
    for (auto& w : workers) w.join();
  } else {
    tbb::task_arena a{int(threads)};
    a.execute([&] {
      for (std::size_t from = 0; from < queries.size(); from += batch)
        for (std::size_t s = 0; s < shards; ++s)
          search(s, from, std::min(batch, queries.size() - from));
    });
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu_seconds = process_cpu_seconds() - c0;
  for (const auto& shard : r.by_shard)
    for (const ShardResult& x : shard) r.work.add(x.counters);
  (void)index;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One engine on a whole shard against N sharing engines on its shards, in process"};
  std::filesystem::path whole_dir, sharded_dir, queries_path, out_path;
  std::size_t limit = 20000, k = 10, batch = 1024;
  unsigned threads = 0, reps = 1;
  std::string mode_arg = "and-or", configs_arg = "whole,in-turn,at-once";
  bool in_order = false;
  app.add_option("--whole", whole_dir, "the whole index (one shard)")->required();
  app.add_option("--sharded", sharded_dir, "the same index split into N shards")->required();
  app.add_option("--queries", queries_path, "queries (TSV or TREC topics)")->required();
  app.add_option("--limit", limit, "queries used")->capture_default_str();
  app.add_option("--mode", mode_arg, "and, or, and-or")->capture_default_str();
  app.add_option("--k", k, "answers per query")->capture_default_str();
  app.add_option("--batch", batch, "queries per engine call")->capture_default_str();
  app.add_option("--threads", threads, "threads in all (0: every core)")->capture_default_str();
  app.add_option("--configs", configs_arg, "whole, in-turn, at-once, lockstep")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--in-order", [&in_order](const std::string& s) { in_order = s == "on"; },
         "the sharing engines' threads take a batch's queries in batch order (the ISN's "
         "--share-in-order; off: oneTBB's recursive split)")
      ->check(CLI::IsMember({"on", "off"}))
      ->default_str("off");
  app.add_option("--reps", reps, "repetitions of each config")->capture_default_str();
  app.add_option("--out", out_path, "JSON output");
  CLI11_PARSE(app, argc, argv);
  try {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    const Index whole = Index::open(whole_dir);
    const Index sharded = Index::open(sharded_dir);
    if (whole.num_open_shards() != 1)
      throw InputError(whole_dir.string(), 0, "--whole needs an index of one shard");
    // The queries' term ids are resolved once, on the whole shard: every shard must share its
    // vocabulary (`gpusearch partition` of that index).
    const std::string vocabulary =
        wire::vocabulary_fingerprint(whole.shard(0).manifest(), whole.shard(0).num_terms());
    for (std::size_t s = 0; s < sharded.num_open_shards(); ++s)
      if (wire::vocabulary_fingerprint(sharded.shard(s).manifest(), sharded.shard(s).num_terms()) !=
          vocabulary)
        throw InputError(sharded_dir.string(), 0,
                         fmt::format("shard {} does not share the vocabulary of {} (not a "
                                     "partition of it: gpusearch partition --index {})",
                                     sharded.shard_id(s), whole_dir.string(), whole_dir.string()));
    const std::vector<Query> queries = read_known_queries(whole.shard(0), queries_path, limit);
    if (queries.empty()) throw Error("no query with a known term");
    SearchParams p;
    p.mode = parse_mode(mode_arg);
    p.k = k;
    p.alpha = whole.params().gs_alpha;

    std::vector<std::unique_ptr<cpu::CpuEngine>> whole_engine, shard_engines;
    whole_engine.push_back(std::make_unique<cpu::CpuEngine>(whole.shard(0), whole.shard_id(0),
                                                            cpu::CpuEngineOptions{}));
    std::vector<const KthImpactTable*> tables;
    for (std::size_t s = 0; s < sharded.num_open_shards(); ++s) {
      cpu::CpuEngineOptions options;
      options.sharing_in_batch_order = in_order;
      shard_engines.push_back(
          std::make_unique<cpu::CpuEngine>(sharded.shard(s), sharded.shard_id(s), options));
      tables.push_back(shard_engines.back()->kth_impacts());
    }
    // The node's ISNs seed from their tables combined (SharedThresholdWindow::combine_seed_tables).
    if (std::all_of(tables.begin(), tables.end(), [](const KthImpactTable* t) { return t; })) {
      auto combined = std::make_shared<const KthImpactTable>(KthImpactTable::combine(tables));
      for (auto& e : shard_engines) e->set_collection_seeds(combined);
    }
    std::cerr << fmt::format("{} queries, mode {}, k {}, batch {}, {} threads; {} shards\n",
                             queries.size(), mode_arg, k, batch, threads, shard_engines.size());

    nlohmann::json out = {{"whole", whole_dir.string()},   {"sharded", sharded_dir.string()},
                          {"queries", queries.size()},     {"mode", mode_arg},
                          {"k", k},                        {"batch", batch},
                          {"threads", threads},            {"shards", shard_engines.size()},
                          {"in_order", in_order},
                          {"runs", nlohmann::json::array()}};
    std::vector<ShardResult> reference;  // the whole shard's answers
    std::string configs = configs_arg + ",";
    for (unsigned rep = 1; rep <= reps; ++rep)
      for (std::size_t at = 0, comma; (comma = configs.find(',', at)) != std::string::npos;
           at = comma + 1) {
        const std::string config = configs.substr(at, comma - at);
        if (config.empty()) continue;
        if (config != "whole" && config != "in-turn" && config != "at-once" &&
            config != "lockstep")
          throw InputError("--configs", 0, "unknown config '" + config + "'");
        ConfigRun r = config == "whole"
                          ? run_config(config, whole, whole_engine, queries, p, batch, threads)
                          : run_config(config, sharded, shard_engines, queries, p, batch, threads);
        std::size_t wrong = 0;
        if (config == "whole") {
          if (reference.empty()) reference = r.by_shard[0];
        } else if (!reference.empty()) {
          for (std::size_t q = 0; q < queries.size(); ++q) {
            std::vector<const ShardResult*> ptrs;
            for (const auto& shard : r.by_shard) ptrs.push_back(&shard[q]);
            const QueryResult got = merge_shard_results(p, ptrs);
            const std::vector<const ShardResult*> one = {&reference[q]};
            const QueryResult want = merge_shard_results(p, one);
            // The same documents (global ranks) in the same order, scores within the contract's
            // tolerance: both sides break ties on the global rank.
            bool same = got.hits.size() == want.hits.size() &&
                        got.answered_by_or == want.answered_by_or;
            for (std::size_t i = 0; same && i < got.hits.size(); ++i)
              same = got.hits[i].rank == want.hits[i].rank &&
                     std::abs(got.hits[i].score - want.hits[i].score) <=
                         kScoreRelativeTolerance * std::abs(want.hits[i].score);
            wrong += !same;
          }
        }
        const double nq = double(queries.size());
        std::cerr << fmt::format(
            "{:8s} rep {}: {:8.0f} q/s, {:7.3f} s, cpu {:7.3f} s ({:6.1f} us a query), "
            "{:7.1f} docs, {:8.1f} postings a query, {} answers differ{}\n",
            config, rep, nq / r.seconds, r.seconds, r.cpu_seconds, 1e6 * r.cpu_seconds / nq,
            double(r.work.docs_scored) / nq, double(r.work.postings_decoded) / nq, wrong,
            reference.empty() ? " (no whole run to check against)" : "");
        out["runs"].push_back({{"config", config},
                               {"rep", rep},
                               {"seconds", r.seconds},
                               {"cpu_seconds", r.cpu_seconds},
                               {"queries_per_second", nq / r.seconds},
                               {"docs_scored", r.work.docs_scored},
                               {"postings_decoded", r.work.postings_decoded},
                               {"or_phases_stopped", r.work.or_phases_stopped},
                               {"answers_differ", wrong}});
        if (wrong > 0) std::cerr << "bench_shared_shards: answers differ from the whole shard's\n";
      }
    if (!out_path.empty()) std::ofstream(out_path) << out.dump(1) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_shared_shards: " << e.what() << "\n";
    return 1;
  }
}
