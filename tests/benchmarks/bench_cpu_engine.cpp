// CPU engine benchmark (a program, not a test): per algorithm and k, single-thread latency (mean,
// p50, p99), throughput with every core (queries in parallel under oneTBB), the work done as a
// fraction of exhaustive OR (postings decoded, documents scored, blocks skipped), and a
// correctness column: every answer is checked against exhaustive ranked OR/AND (compare_top_k).
// Also times plain block decoding (docIDs and frequencies) of the queries' lists, in integers
// per second on one core.
//
//   bench_cpu_engine --index DIR --queries FILE --out JSON [--k 10,100,1000]
//                    [--algorithms exhaustive,wand,bmw,maxscore,maxscore-daat] [--threads N]
//                    [--limit Q]
//                    [--mode or] [--scoring bm25] [--shard 0] [--intra-query N]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>

#include <fmt/format.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/task_arena.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/block_codec.hpp"
#include "common/metrics.hpp"
#include "common/result_compare.hpp"
#include "common/shard_index.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"

using namespace gpusearch;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Decodes every block (docIDs, then frequencies) of the lists; returns integers decoded and a
// checksum so that nothing is optimized away.
std::pair<std::uint64_t, std::uint64_t> decode_lists(const ShardIndex& shard,
                                                     const std::vector<TermId>& terms) {
  alignas(64) DocId docs[kBlockSize];
  alignas(64) std::uint32_t freqs[kBlockSize];
  std::uint64_t ints = 0, sum = 0;
  for (TermId t : terms) {
    const TermInfo& ti = shard.term(t);
    for (std::uint64_t b = ti.first_block; b < ti.first_block + ti.num_blocks; ++b) {
      const std::uint32_t* fp =
          codec::decode_docids(shard.block_data(b), shard.block_floor(ti, b), docs);
      codec::decode_freqs(fp, freqs);
      const unsigned n = codec::read_header(shard.block_data(b)[0]).count;
      sum += docs[n - 1] + freqs[0];
      ints += 2 * n;
    }
  }
  return {ints, sum};
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = s.find(',', start);
    const std::string part =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_cpu_engine: CPU query algorithms, latency, throughput and work"};
  std::string index_dir, queries_path, out_path,
      ks_arg = "10,100,1000", algorithms_arg = "exhaustive,wand,bmw,maxscore,maxscore-daat",
      mode_arg = "or", scoring_arg = "bm25";
  unsigned threads = 0, intra_query = 0, profile_repeat = 0;
  bool profile_queries = false;
  std::size_t limit = 2000;
  unsigned seed_blocks = cpu::CpuEngineOptions{}.seed_blocks_per_term;
  unsigned window_docs = cpu::CpuEngineOptions{}.window_docs;
  bool seed_table = cpu::CpuEngineOptions{}.seed_from_kth_impacts;
  unsigned daat_docs_per_posting = cpu::CpuEngineOptions{}.daat_docs_per_posting;
  std::uint32_t shard_id = 0;
  app.add_option("--index", index_dir, "index directory")->required();
  app.add_option("--queries", queries_path, "queries (TSV or TREC topics)")->required();
  app.add_option("--out", out_path, "JSON output")->required();
  app.add_option("--k", ks_arg, "comma-separated k values")->capture_default_str();
  app.add_option("--algorithms", algorithms_arg, "comma-separated algorithms")
      ->capture_default_str();
  app.add_option("--threads", threads, "threads for the throughput run (0: all cores)");
  app.add_option("--limit", limit, "queries used (the first ones with a known term)")
      ->capture_default_str();
  app.add_option("--mode", mode_arg, "and, or, and-or")->capture_default_str();
  app.add_option("--scoring", scoring_arg, "bm25, bm25-pr")->capture_default_str();
  app.add_option("--shard", shard_id, "shard to query")->capture_default_str();
  app.add_option("--intra-query", intra_query,
                 "also time each query split over N threads (0: off)");
  app.add_option("--profile-repeat", profile_repeat,
                 "profiling: only run each algorithm's queries N times, single thread (no "
                 "checks, no JSON)");
  app.add_flag("--profile-queries", profile_queries,
               "with --profile-repeat: one line per query run on stderr (time, df, work)");
  app.add_option("--seed-blocks", seed_blocks,
                 "blocks per list decoded for the starting threshold of the pruning algorithms "
                 "(CpuEngineOptions::seed_blocks_per_term; 0: no seed)")
      ->capture_default_str();
  app.add_option("--seed-table", seed_table,
                 "whole-shard queries with k <= 1000 take the seed from each term's K-th largest "
                 "impact, a table built once per engine (CpuEngineOptions::seed_from_kth_impacts; "
                 "0: the blocks of --seed-blocks per query)")
      ->capture_default_str();
  app.add_option("--window-docs", window_docs,
                 "documents per window of the windowed MaxScore (CpuEngineOptions::window_docs; "
                 "0: by the shard's size)")
      ->capture_default_str();
  app.add_option("--daat-docs-per-posting", daat_docs_per_posting,
                 "maxscore runs document at a time below one posting per this many documents "
                 "(CpuEngineOptions::daat_docs_per_posting; 0: always windowed)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const auto engine_options = [&](const std::string& name) {
    cpu::CpuEngineOptions o;
    o.algorithm = cpu::parse_algorithm(name);
    o.seed_blocks_per_term = seed_blocks;
    o.window_docs = window_docs;
    o.seed_from_kth_impacts = seed_table;
    o.daat_docs_per_posting = daat_docs_per_posting;
    return o;
  };
  try {
    if (threads == 0) threads = unsigned(tbb::info::default_concurrency());
    const Index index = Index::open_shard(index_dir, shard_id);
    const ShardIndex& shard = index.shard(0);
    const std::vector<Query> queries = read_known_queries(shard, queries_path, limit);
    if (queries.empty()) throw Error("no query with a known term");
    double mean_terms = 0;
    for (const Query& q : queries) mean_terms += double(q.terms.size()) / double(queries.size());

    if (profile_repeat > 0) {
      SearchParams pp;
      pp.mode = parse_mode(mode_arg);
      pp.scoring = parse_scoring(scoring_arg);
      pp.alpha = index.params().gs_alpha;
      for (const std::string& kstr : split(ks_arg)) {
        pp.k = unsigned(std::stoul(kstr));
        for (const std::string& name : split(algorithms_arg)) {
          cpu::CpuEngine engine(shard, shard_id, engine_options(name));
          QueryCounters total;
          const double c0 = thread_cpu_seconds();
          for (unsigned r = 0; r < profile_repeat; ++r)
            for (const Query& q : queries) {
              const double q0 = thread_cpu_seconds();
              const auto res = engine.search_one(q, pp);
              total.add(res.counters);
              if (profile_queries) {
                std::uint64_t df_sum = 0;
                for (TermId t : q.terms) df_sum += shard.term(t).df_shard;
                fmt::print(stderr,
                           "query {} {} terms {} df {} cpu_ms {:.4f} postings {} scored {}\n", name,
                           q.id, q.terms.size(), df_sum, (thread_cpu_seconds() - q0) * 1e3,
                           res.counters.postings_decoded, res.counters.docs_scored);
              }
            }
          const double per_query =
              (thread_cpu_seconds() - c0) * 1e3 / double(profile_repeat * queries.size());
          fmt::print("{:<13} k {:>5}: {:.4f} cpu ms/query, postings {}, scored {}\n", name, pp.k,
                     per_query, total.postings_decoded / profile_repeat,
                     total.docs_scored / profile_repeat);
        }
      }
      return 0;
    }
    // Decoding speed: every block of every query term, one core, best of 3.
    std::vector<TermId> all_terms;
    for (const Query& q : queries)
      all_terms.insert(all_terms.end(), q.terms.begin(), q.terms.end());
    std::sort(all_terms.begin(), all_terms.end());
    all_terms.erase(std::unique(all_terms.begin(), all_terms.end()), all_terms.end());
    double decode_best = 1e30;
    std::uint64_t decoded_ints = 0, checksum = 0;
    for (int r = 0; r < 3; ++r) {
      const auto t0 = Clock::now();
      std::tie(decoded_ints, checksum) = decode_lists(shard, all_terms);
      decode_best = std::min(decode_best, seconds_since(t0));
    }
    const double decode_ints_per_s = double(decoded_ints) / decode_best;
    fmt::print("{}: {} docs, {} queries ({:.2f} terms), mode {}, scoring {}, {} threads\n",
               index_dir, shard.num_docs(), queries.size(), mean_terms, mode_arg, scoring_arg,
               threads);
    fmt::print("block decoding (docIDs + freqs, one core): {:.3g} ints/s (checksum {})\n",
               decode_ints_per_s, checksum % 1000);

    SearchParams params;
    params.mode = parse_mode(mode_arg);
    params.scoring = parse_scoring(scoring_arg);
    params.alpha = index.params().gs_alpha;
    const Mode exact_mode = params.mode == Mode::kAnd ? Mode::kAnd : Mode::kOr;

    nlohmann::json results = nlohmann::json::array();
    fmt::print("{:<11} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>6}\n",
               "algorithm", "k", "mean ms", "p50 ms", "p99 ms", "cpu ms", "QPS", "postings",
               "scored", "speedup", "cpu x", "wrong");
    for (const std::string& kstr : split(ks_arg)) {
      const unsigned k = unsigned(std::stoul(kstr));
      params.k = k;
      // The exact answers, deep enough to recognize ties at the cut-off, and the exhaustive
      // work the fractions are taken against.
      cpu::CpuEngine exact_engine(shard, shard_id, {cpu::Algorithm::kExhaustive, 1, false});
      SearchParams deep_params = params;
      deep_params.k = k + 20;
      deep_params.mode = params.mode == Mode::kAndOr ? Mode::kAndOr : exact_mode;
      std::vector<ShardResult> deep(queries.size());
      exact_engine.search(queries, deep_params, deep);
      double exhaustive_postings = 0, exhaustive_scored = 0, exhaustive_mean = 0,
             exhaustive_cpu = 0;
      // Latency: every query runs under every algorithm back to back (interleaved, in rotated
      // order), so that load
      // from other processes on a shared machine hits all algorithms alike; wall and thread CPU
      // time are both kept (CPU time leaves out time the thread spent preempted).
      const std::vector<std::string> names = split(algorithms_arg);
      const std::size_t A = names.size(), Q = queries.size();
      std::vector<std::unique_ptr<cpu::CpuEngine>> engines;
      for (const std::string& name : names)
        engines.push_back(std::make_unique<cpu::CpuEngine>(shard, shard_id, engine_options(name)));
      std::vector<std::vector<double>> wall_ms(A, std::vector<double>(Q)),
          cpu_ms(A, std::vector<double>(Q));
      std::vector<QueryCounters> totals(A);
      std::vector<std::size_t> wrongs(A, 0);
      for (std::size_t i = 0; i < Q; ++i) {
        // Rotated start, so that no algorithm always finds the query's lists cached by another.
        for (std::size_t r = 0; r < A; ++r) {
          const std::size_t j = (i + r) % A;
          const double c0 = thread_cpu_seconds();
          const auto t0 = Clock::now();
          const ShardResult got_result = engines[j]->search_one(queries[i], params);
          wall_ms[j][i] = seconds_since(t0) * 1e3;
          cpu_ms[j][i] = (thread_cpu_seconds() - c0) * 1e3;
          totals[j].add(got_result.counters);
          // Correctness against exhaustive (and-or: the list the shard result would answer with).
          const ShardResult& d = deep[i];
          const bool use_or =
              params.mode == Mode::kOr || (params.mode == Mode::kAndOr && d.and_matches < k);
          const auto& ref = params.mode == Mode::kAndOr && use_or ? d.or_hits : d.hits;
          const auto& got = params.mode == Mode::kAndOr && got_result.and_matches < k
                                ? got_result.or_hits
                                : got_result.hits;
          const std::uint64_t matches =
              params.mode == Mode::kAndOr
                  ? (use_or ? d.counters.docs_scored - d.and_matches : d.and_matches)
                  : d.counters.docs_scored;
          if (compare_top_k(ref, matches >= ref.size() ? matches : ref.size(), k, got)) ++wrongs[j];
        }
      }
      for (std::size_t j = 0; j < A; ++j) {
        const std::string& name = names[j];
        const cpu::Algorithm a = cpu::parse_algorithm(name);
        cpu::CpuEngine& engine = *engines[j];
        const QueryCounters& total = totals[j];
        const std::size_t wrong = wrongs[j];
        std::vector<double> sorted = wall_ms[j];
        std::sort(sorted.begin(), sorted.end());
        const double mean =
            std::accumulate(sorted.begin(), sorted.end(), 0.0) / double(sorted.size());
        const double p50 = metrics::percentile_of_sorted(sorted, 50);
        const double p99 = metrics::percentile_of_sorted(sorted, 99);
        std::vector<double> sorted_cpu = cpu_ms[j];
        std::sort(sorted_cpu.begin(), sorted_cpu.end());
        const double cpu_mean =
            std::accumulate(sorted_cpu.begin(), sorted_cpu.end(), 0.0) / double(Q);
        const double cpu_p99 = metrics::percentile_of_sorted(sorted_cpu, 99);
        // Throughput: the whole batch, queries in parallel on `threads` cores.
        double qps = 0;
        {
          tbb::task_arena arena{static_cast<int>(threads)};
          std::vector<ShardResult> batch(queries.size());
          double best = 1e30;
          for (int r = 0; r < 2; ++r) {
            const auto t0 = Clock::now();
            arena.execute([&] { engine.search(queries, params, batch); });
            best = std::min(best, seconds_since(t0));
          }
          qps = double(queries.size()) / best;
        }
        // Latency with one query's docID range split over intra_query threads.
        double intra_mean = NAN;
        if (intra_query > 1) {
          cpu::CpuEngine split_engine(shard, shard_id, {a, intra_query, true});
          tbb::task_arena arena{static_cast<int>(intra_query)};
          double sum = 0;
          arena.execute([&] {
            for (const Query& q : queries) {
              const auto t0 = Clock::now();
              split_engine.search_one(q, params);
              sum += seconds_since(t0) * 1e3;
            }
          });
          intra_mean = sum / double(Q);
          fmt::print(
              "{:<11} {:>5} intra-query {} threads: mean {:.3f} ms ({:.2f}x its single-thread "
              "mean)\n",
              name, k, intra_query, intra_mean, mean / intra_mean);
        }
        if (a == cpu::Algorithm::kExhaustive) {
          exhaustive_postings = double(total.postings_decoded);
          exhaustive_scored = double(total.docs_scored);
          exhaustive_mean = mean;
          exhaustive_cpu = cpu_mean;
        }
        const double f_postings =
            exhaustive_postings > 0 ? double(total.postings_decoded) / exhaustive_postings : NAN;
        const double f_scored =
            exhaustive_scored > 0 ? double(total.docs_scored) / exhaustive_scored : NAN;
        const double speedup = exhaustive_mean > 0 ? exhaustive_mean / mean : NAN;
        const double cpu_speedup = exhaustive_cpu > 0 ? exhaustive_cpu / cpu_mean : NAN;
        fmt::print(
            "{:<11} {:>5} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.1f} {:>9.4f} {:>9.4f} {:>8.2f} "
            "{:>8.2f} {:>6}\n",
            name, k, mean, p50, p99, cpu_mean, qps, f_postings, f_scored, speedup, cpu_speedup,
            wrong);
        results.push_back({{"algorithm", name},
                           {"k", k},
                           {"latency_ms", {{"mean", mean}, {"p50", p50}, {"p99", p99}}},
                           {"thread_cpu_ms", {{"mean", cpu_mean}, {"p99", cpu_p99}}},
                           {"cpu_speedup_vs_exhaustive", cpu_speedup},
                           {"throughput_qps", qps},
                           {"threads", threads},
                           {"counters", to_json(total)},
                           {"fraction_of_exhaustive",
                            {{"postings_decoded", f_postings}, {"docs_scored", f_scored}}},
                           {"speedup_vs_exhaustive", speedup},
                           {"wrong_answers", wrong},
                           {"intra_query_threads", intra_query},
                           {"intra_query_mean_ms",
                            intra_query > 1 ? nlohmann::json(intra_mean) : nlohmann::json()}});
      }
    }
    nlohmann::json report = {
        {"benchmark", "cpu_engine"},
        {"date_utc", utc_now()},
        {"machine", {{"cpu", cpu_model()}, {"cores", tbb::info::default_concurrency()}}},
        {"index", index_dir},
        {"shard", shard_id},
        {"num_docs", shard.num_docs()},
        {"queries", queries_path},
        {"num_queries", queries.size()},
        {"mean_terms", mean_terms},
        {"mode", mode_arg},
        {"scoring", scoring_arg},
        {"decode_ints_per_s_per_core", decode_ints_per_s},
        {"decoded_ints", decoded_ints},
        {"results", results}};
    std::ofstream(out_path) << report.dump(2) << "\n";
    fmt::print("wrote {}\n", out_path);
  } catch (const std::exception& e) {
    std::cerr << "bench_cpu_engine: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
