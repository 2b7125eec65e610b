// gpusearch: one command with subcommands. Thin mains over the libraries: flags in, a library
// call, a summary out. Errors print one clear line and exit 1.
#include <cmath>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <tbb/global_control.h>
#include <tbb/info.h>

#include "common/error.hpp"
#include "launch/frontend_client.hpp"
#include "common/eval.hpp"
#include "common/forward_index.hpp"
#include "common/progress.hpp"
#include "common/result_compare.hpp"
#include "common/run_file.hpp"
#include "isn/search_session.hpp"
#include "common/shard_index.hpp"
#include "isn/engine_factory.hpp"
#include "isn/ranker/feature_dump.hpp"
#include "isn/ranker/reference_rankers.hpp"
#include "isn/ranker/ranker_store.hpp"
#include "isn/list_cache_flags.hpp"
#include "partition/cache_planner.hpp"
#include "common/byte_size.hpp"
#include "common/cache_plan.hpp"
#include "partition/index_builder.hpp"
#include "partition/repartition.hpp"
#include "partition/synthetic_collection.hpp"

using namespace gpusearch;
namespace fs = std::filesystem;

namespace {

void print_build_report(const nlohmann::json& r, const fs::path& out) {
  const auto& w = r.at("write");
  fmt::print(
      "indexed {} documents, {} terms, {} postings into {} ({} shard{})\n"
      "  index {:.1f} MiB, postings {:.1f} MiB: {:.2f} bits/posting for docIDs, {:.2f} for "
      "frequencies\n"
      "  {:.1f} s: {:.0f} docs/s, {:.3g} postings/s; peak memory {:.0f} MiB\n",
      r.at("docs").get<std::uint64_t>(), r.at("terms").get<std::uint64_t>(),
      r.at("postings").get<std::uint64_t>(), out.string(), w.at("shards").size(),
      w.at("shards").size() == 1 ? "" : "s", w.at("index_bytes").get<double>() / (1 << 20),
      w.at("postings_bytes").get<double>() / (1 << 20),
      w.at("bits_per_posting_docids").get<double>(), w.at("bits_per_posting_freqs").get<double>(),
      r.at("seconds").get<double>(), r.at("docs_per_second").get<double>(),
      r.at("postings_per_second").get<double>(),
      r.at("peak_rss_bytes").get<double>() / (1 << 20));
  if (r.value("skipped_documents", 0) > 0)
    fmt::print("  skipped {} malformed documents (first: {})\n",
               r.at("skipped_documents").get<std::uint64_t>(),
               r.at("skipped_messages").at(0).get<std::string>());
}

void write_json(const fs::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << '\n';
  if (!out) throw Error("cannot write " + path.string());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpusearch: GPU-accelerated distributed query processing (index, search, serve)"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--threads, -q) may follow the subcommand
  app.set_version_flag("--version", "gpusearch 0.1.0");
  int threads = 0;
  app.add_option("--threads", threads, "worker threads (default: all cores)");
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "no progress bars");

  // generate
  auto* gen = app.add_subcommand("generate", "write a synthetic GOV2-like collection (JSONL corpus, train/test query logs)");
  std::uint64_t gen_docs = 20000, gen_seed = 7;
  std::string gen_spec;
  fs::path gen_out;
  bool gen_gzip = false;
  gen->add_option("--docs", gen_docs, "documents")->capture_default_str();
  gen->add_option("--seed", gen_seed, "random seed (same seed, same collection)")->capture_default_str();
  gen->add_option("--params", gen_spec, "more generator parameters: key=value,... (see README)");
  gen->add_option("--out", gen_out, "output directory")->required();
  gen->add_flag("--gzip", gen_gzip, "compress the corpus (corpus.jsonl.gz)");

  // index
  auto* idx = app.add_subcommand("index", "build an index from a corpus or the synthetic generator");
  std::vector<fs::path> corpus;
  std::string synthetic, format = "auto", split = "input-ranges", codec_name = "pfor128";
  BuildOptions bo;
  bool skip_bad = false;
  fs::path report_path;
  auto* corpus_opt = idx->add_option("--corpus", corpus, "corpus files: JSONL or TREC, plain or .gz")
                         ->check(CLI::ExistingFile);
  auto* synth_opt = idx->add_option("--synthetic", synthetic,
                                    "index a synthetic collection straight from the generator: "
                                    "docs=N,seed=S[,key=value...]");
  corpus_opt->excludes(synth_opt);
  idx->add_option("--out", bo.out_dir, "index directory")->required();
  idx->add_option("--shards", bo.num_shards, "docID-range shards, one per ISN")->capture_default_str();
  idx->add_option("--split", split, "input-ranges (default), gs-tiers or round-robin")
      ->capture_default_str();
  idx->add_option("--codec", codec_name, "pfor128 (default) or bp128")->capture_default_str();
  idx->add_option("--alpha", bo.gs_alpha, "alpha of GS(d) and the docID order (paper 000, eq. 4)")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  idx->add_option("--k1", bo.bm25.k1, "BM25 k1")->capture_default_str();
  idx->add_option("--b", bo.bm25.b, "BM25 b")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  idx->add_option("--format", format, "corpus format: auto, jsonl, trec")->capture_default_str();
  idx->add_flag("--skip-bad", skip_bad, "skip and count malformed documents instead of stopping");
  idx->add_flag("--force", bo.force, "replace an existing index in --out");
  idx->add_option("--report", report_path, "also write the build report as JSON here");
  idx->add_flag("--forward-index", bo.forward_index,
                "also store every document's token stream (term IDs in order) for ranker features");

  // partition
  auto* part = app.add_subcommand("partition", "re-shard an existing index (no corpus needed)");
  fs::path part_in, part_out;
  std::uint32_t part_shards = 2;
  std::string part_split = "input-ranges", part_codec;
  bool part_force = false;
  part->add_option("--index", part_in, "input index")->required()->check(CLI::ExistingDirectory);
  part->add_option("--out", part_out, "output index directory")->required();
  part->add_option("--shards", part_shards, "shards")->capture_default_str();
  part->add_option("--split", part_split, "input-ranges, gs-tiers or round-robin")
      ->capture_default_str();
  part->add_option("--codec", part_codec, "re-encode with this codec (default: keep)");
  part->add_flag("--force", part_force, "replace an existing index in --out");

  // plan-cache
  auto* plan = app.add_subcommand(
      "plan-cache", "plan a GPU list cache from a training query log (paper 000: vfb, qtf, qtfdf)");
  fs::path plan_index, plan_queries, plan_out;
  std::string plan_policy = "vfb", plan_budget, plan_scoring = "bm25";
  double plan_lambda = 1.0;
  unsigned plan_k = 10;
  bool plan_no_fill = false;
  plan->add_option("--index", plan_index, "index directory")->required()->check(CLI::ExistingDirectory);
  plan->add_option("--queries", plan_queries, "training query log (TSV or TREC topics)")
      ->required()->check(CLI::ExistingFile);
  plan->add_option("--policy", plan_policy, "vfb, qtf or qtfdf")->capture_default_str();
  plan->add_option("--lambda", plan_lambda, "vfb: largest fraction of a list admitted, (0, 1]")
      ->capture_default_str();
  plan->add_option("--budget", plan_budget, "cache bytes per shard (GPU): e.g. 2G, 512M, 1048576")
      ->required();
  plan->add_option("--k", plan_k, "k of the early-terminating AND that vfb simulates")->capture_default_str();
  plan->add_option("--scoring", plan_scoring, "bm25 or bm25-pr (vfb's simulation)")->capture_default_str();
  plan->add_flag("--no-fill", plan_no_fill,
                 "leave budget the log's lists do not take empty (default: whole lists no training "
                 "query asked for fill it, longest first; qtf, qtfdf, vfb with lambda 1)");
  plan->add_option("--out", plan_out, "plan file to write (JSON)")->required();

  // search
  auto* srch = app.add_subcommand("search", "answer a query file on an index, write a TREC run");
  SearchSessionOptions so;
  so.engine.engine = "auto";
  std::string mode = "or", scoring = "bm25";
  double alpha = NAN;
  fs::path run_path, metrics_path;
  srch->add_option("--index", so.index_dir, "index directory")->required()->check(CLI::ExistingDirectory);
  srch->add_option("--queries", so.queries_path, "queries: TSV (qid<TAB>text) or TREC topics")
      ->required()->check(CLI::ExistingFile);
  srch->add_option("--mode", mode, "and, or, and-or")->capture_default_str();
  srch->add_option("--k", so.params.k, "results per query")->capture_default_str()->check(CLI::Range(1u, 100000u));
  srch->add_option("--scoring", scoring, "bm25 or bm25-pr")->capture_default_str();
  srch->add_option("--alpha", alpha, "bm25-pr alpha (default: the index's)")->check(CLI::Range(0.0, 1.0));
  srch->add_option("--engine", so.engine.engine,
                   "engine: auto (gpu where a device is present, else cpu), cpu, gpu, or reference "
                   "(the exhaustive oracle)")->capture_default_str();
  srch->add_option("--algorithm", so.engine.algorithm,
                   "engine algorithm (cpu: exhaustive, wand, bmw, maxscore, ...; gpu: auto, warp, window, bmw, exhaustive; default: the engine's best)");
  srch->add_option("--intra-query", so.engine.intra_query_threads,
                   "cpu: threads that split one query's docID range (latency)")->capture_default_str();
  srch->add_option("--gpu", so.engine.gpu_device, "gpu: device ordinal (default: the process's)");
  srch->add_option("--gpu-batch", so.engine.gpu_batch_size, "gpu: queries per kernel launch")
      ->capture_default_str()->check(CLI::Range(1u, 1u << 20));
  srch->add_option("--or-window", so.engine.gpu_or_window,
                   "gpu: OR accumulator window in documents (multiple of 128, 256..65536)")
      ->capture_default_str();
  srch->add_option("--or-warp-window", so.engine.gpu_or_warp_window,
                   "gpu warp kernel (auto, warp): each warp's OR window in documents (multiple of 128, 128..32768)")
      ->capture_default_str();
  srch->add_option("--bmw-threads", so.engine.gpu_bmw_threads,
                   "gpu bmw: threads that split one query's docID space (32..256)")
      ->capture_default_str();
  srch->add_option("--gpu-blocks-per-sm", so.engine.gpu_blocks_per_sm,
                   "gpu: thread blocks a batch aims at per multiprocessor (queries are cut into "
                   "docID segments to reach it; 0: by batch size, 32 / 16 / 8 for batches of at "
                   "most 256 / 2,048 / more queries)")->capture_default_str()->check(CLI::Range(0u, 64u));
  srch->add_option("--gpu-posting-layout", so.engine.gpu_posting_layout,
                   "gpu: how the OR kernel reads postings: auto (decoded where it takes at most "
                   "half of the free device memory), compressed, or decoded (docID + impact, 8 "
                   "bytes a posting)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "compressed", "decoded"}));
  srch->add_option("--gpu-max-segments", so.engine.gpu_max_segments,
                   "gpu: most docID segments per query (1: one thread block per query)")
      ->capture_default_str()->check(CLI::Range(1u, 64u));
  add_list_cache_flags(*srch, so.engine.list_cache);
  srch->add_option("--run", run_path, "TREC run output")->required();
  srch->add_option("--tag", so.run_tag, "run tag (last column)")->capture_default_str();
  srch->add_option("--metrics", metrics_path, "metrics JSON output");
  srch->add_option("--batch-size", so.batch_size, "queries per engine batch")->capture_default_str();
  srch->add_option("--max-query-terms", so.limits.max_terms, "reject longer queries")->capture_default_str();
  srch->add_flag("--no-verify", so.skip_checksums, "skip checksum verification when opening the index");
  // The second stage (issue 12).
  double srch_cache_mb = 0;
  srch->add_option("--ranker-store", so.ranking.store_dir,
                   "ranker store (a folder with store.json): rank each shard's first-stage "
                   "candidates with the query's ranker")->check(CLI::ExistingDirectory);
  srch->add_option("--ranker", so.ranking.ranker,
                   "ranker of every query without its own (the query file's third column)");
  srch->add_option("--ranker-mix", so.ranking.mix_exponent,
                   "draw each query's ranker from a Zipf mix over the store with this exponent "
                   "(e.g. 1.0)")->check(CLI::Range(0.0, 10.0));
  srch->add_option("--ranker-mix-seed", so.ranking.mix_seed, "seed of the mix's draws")->capture_default_str();
  srch->add_option("--candidates", so.ranking.candidates,
                   "first-stage candidates per shard for the second stage (default 1000, at most 10000)")
      ->check(CLI::Range(1u, kMaxCandidates));
  srch->add_option("--ranker-cache-mb", srch_cache_mb,
                   "ranker cache per shard in MiB (LRU; default: unbounded)")->check(CLI::NonNegativeNumber);
  srch->add_option("--ranker-backend", so.ranking.backend, "cpu, gpu or auto")->capture_default_str();
  bool srch_copy_streams = false;
  srch->add_flag("--ranker-copy-streams", srch_copy_streams,
                 "gpu: copy the candidates' token streams with every request instead of keeping "
                 "the forward index on the device");

  // ranker-store: index a folder of ranker files, or generate synthetic rankers into one
  auto* rs = app.add_subcommand("ranker-store", "make a ranker store: index ranker files, generate reference rankers");
  rs->require_subcommand(1);
  auto* rs_index = rs->add_subcommand("index", "validate every NAME.ranker.json in --store and write store.json");
  auto* rs_gen = rs->add_subcommand("generate", "write synthetic rankers (paper 004, Table 4.2 shapes) and index the store");
  fs::path rs_dir;
  std::uint64_t rs_seed = 4;
  std::uint32_t rs_mix = 0, rs_mix_trees = 50, rs_mix_buckets = 20, rs_mix_depth = 6;
  std::string rs_prefix = "mix";
  rs_index->add_option("--store", rs_dir, "ranker store folder")->required()->check(CLI::ExistingDirectory);
  rs_gen->add_option("--store", rs_dir, "ranker store folder (created)")->required();
  rs_gen->add_option("--seed", rs_seed, "seed (same seed, same rankers)")->capture_default_str();
  rs_gen->add_option("--mix", rs_mix, "instead of the three reference rankers: this many rankers PREFIX-000..")
      ->check(CLI::Range(1u, 100000u));
  rs_gen->add_option("--mix-prefix", rs_prefix, "names of the mix's rankers")->capture_default_str();
  rs_gen->add_option("--mix-trees", rs_mix_trees, "trees per mix ranker")->capture_default_str();
  rs_gen->add_option("--mix-buckets", rs_mix_buckets, "bucket inputs per mix ranker")->capture_default_str();
  rs_gen->add_option("--mix-depth", rs_mix_depth, "largest tree depth of the mix's rankers")
      ->capture_default_str()->check(CLI::Range(1u, 32u));

  // features: the rows a second stage sees, for training rankers
  auto* feat = app.add_subcommand("features", "write every first-stage candidate's ranker features as TSV (training data)");
  ranker::FeatureDumpOptions fo;
  fo.engine.engine = "cpu";
  std::string feat_mode = "or", feat_scoring = "bm25";
  fs::path feat_out;
  feat->add_option("--index", fo.index_dir, "index directory (built with --forward-index)")
      ->required()->check(CLI::ExistingDirectory);
  feat->add_option("--queries", fo.queries_path, "queries: TSV or TREC topics")->required()->check(CLI::ExistingFile);
  feat->add_option("--candidates", fo.candidates, "first-stage candidates per shard")
      ->capture_default_str()->check(CLI::Range(1u, kMaxCandidates));
  feat->add_option("--mode", feat_mode, "first stage: and, or, and-or")->capture_default_str();
  feat->add_option("--scoring", feat_scoring, "first stage: bm25 or bm25-pr")->capture_default_str();
  feat->add_option("--alpha", fo.alpha, "bm25-pr alpha (default: the index's)")->check(CLI::Range(0.0, 1.0));
  feat->add_option("--out", feat_out, "TSV output")->required();

  // info
  auto* info = app.add_subcommand("info", "describe an index; --verify checks every file");
  fs::path info_index;
  bool info_verify = false;
  info->add_option("--index", info_index, "index directory")->required()->check(CLI::ExistingDirectory);
  info->add_flag("--verify", info_verify, "open every shard and verify checksums and structure");

  // compare-runs
  auto* cmp = app.add_subcommand("compare-runs", "check that a run equals a reference run (exactness rule)");
  fs::path cmp_ref, cmp_cand;
  double cmp_tol = kScoreRelativeTolerance;
  cmp->add_option("reference", cmp_ref, "reference run")->required()->check(CLI::ExistingFile);
  cmp->add_option("candidate", cmp_cand, "run to check")->required()->check(CLI::ExistingFile);
  cmp->add_option("--tolerance", cmp_tol, "relative score tolerance")->capture_default_str();

  // query: one search against a serving cluster (or its stats, or an operator's shutdown)
  auto* qry = app.add_subcommand("query", "ask a serving cluster (launch/cluster.sh --listen) one query");
  QueryCommand qc;
  qry->add_option("--connect", qc.connect, "the aggregator's ADDR:PORT")->required();
  qry->add_option("text", qc.text, "query text");
  qry->add_option("--id", qc.id, "query id in the cluster's run (default: the server's rpc-N)");
  qry->add_option("--mode", qc.mode, "and, or, and-or (default: the cluster's)");
  qry->add_option("--scoring", qc.scoring, "bm25 or bm25-pr (default: the cluster's)");
  qry->add_option("--k", qc.k, "results (default: the cluster's)")->check(CLI::Range(1u, 100000u));
  qry->add_option("--deadline-ms", qc.deadline_ms, "cut its batch early enough for this deadline");
  qry->add_option("--ranker", qc.ranker, "second-stage ranker of the cluster's store (default: the cluster's)");
  qry->add_flag("--stats", qc.stats, "print the front end's counters (JSON) instead");
  qry->add_flag("--shutdown", qc.shutdown, "end the serving run (needs --token-file)");
  qry->add_option("--token-file", qc.token_file, "the aggregator's operator token file");
  qry->add_option("--rpc-poll", qc.rpc_poll,
                  "how the client waits for its answer: block, adaptive or spin (README)")
      ->capture_default_str();
  qry->add_option("--rpc-spin-us", qc.rpc_spin_us, "adaptive: the longest it polls")
      ->capture_default_str();

  // load: an open-loop load generator against a serving cluster
  auto* load = app.add_subcommand("load", "open-loop load on a serving cluster: throughput, latency percentiles, errors (JSON)");
  LoadCommand lc;
  load->add_option("--connect", lc.connect, "the aggregator's ADDR:PORT")->required();
  load->add_option("--queries", lc.queries, "TSV or TREC topics; cycled (ids of later passes get ~N)")
      ->required()->check(CLI::ExistingFile);
  load->add_option("--qps", lc.qps, "arrival rate")->required();
  load->add_flag("--poisson", lc.poisson, "Poisson arrivals (exponential gaps) instead of uniform");
  load->add_option("--duration", lc.duration_s, "seconds of arrivals")->capture_default_str();
  load->add_option("--limit", lc.limit, "at most this many requests (0: no limit)");
  load->add_option("--mode", lc.mode, "and, or, and-or (default: the cluster's)");
  load->add_option("--scoring", lc.scoring, "bm25 or bm25-pr (default: the cluster's)");
  load->add_option("--k", lc.k, "results (default: the cluster's)")->check(CLI::Range(1u, 100000u));
  load->add_option("--deadline-ms", lc.deadline_ms, "every request's deadline (SLA-driven batching)");
  load->add_option("--ranker", lc.ranker,
                   "second-stage ranker of requests whose query line has no third column");
  load->add_option("--seed", lc.seed, "Poisson arrivals' seed")->capture_default_str();
  load->add_option("--drain", lc.drain_s, "seconds to wait for answers after the last arrival")
      ->capture_default_str();
  load->add_option("--run", lc.run_path, "TREC run of the answers");
  load->add_option("--metrics", lc.metrics_path, "metrics JSON");
  load->add_option("--tag", lc.tag, "run tag")->capture_default_str();
  load->add_option("--id-prefix", lc.id_prefix, "put before every query id");
  load->add_option("--rpc-poll", lc.rpc_poll,
                   "how the client's event loop waits for sends and answers: block (sleep), "
                   "spin (poll all the time: a core), adaptive (poll while answers are awaited, "
                   "up to --rpc-spin-us after the last event)")
      ->capture_default_str();
  load->add_option("--rpc-spin-us", lc.rpc_spin_us,
                   "with --rpc-poll adaptive: the longest it polls after its last event")
      ->capture_default_str();
  load->add_option("--rpc-thread", lc.rpc_thread,
                   "where the client runs: CPU (pinned), rt (SCHED_FIFO 1) or CPU,rt (e.g. on "
                   "the CPU of the aggregator's --rpc-thread)");

  // eval
  auto* ev = app.add_subcommand("eval", "judge a run against TREC qrels: nDCG@k, MAP, P@k as JSON");
  fs::path ev_qrels, ev_run;
  int ev_k = 10;
  bool ev_per_query = false;
  ev->add_option("--qrels", ev_qrels, "TREC qrels: qid 0 docid grade")->required()->check(CLI::ExistingFile);
  ev->add_option("--run", ev_run, "TREC run: qid Q0 docid rank score tag")->required()->check(CLI::ExistingFile);
  ev->add_option("--k", ev_k, "cut-off of nDCG and P")->capture_default_str()->check(CLI::PositiveNumber);
  ev->add_flag("--per-query", ev_per_query, "also print every query's metrics");

  CLI11_PARSE(app, argc, argv);
  std::unique_ptr<tbb::global_control> thread_limit;
  if (threads > 0)
    thread_limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, threads);
  const bool progress = !quiet;

  try {
    if (*gen) {
      SyntheticParams p = SyntheticParams::parse(gen_spec);
      if (gen_spec.find("docs=") == std::string::npos) p.num_docs = gen_docs;
      if (gen_spec.find("seed=") == std::string::npos) p.seed = gen_seed;
      SyntheticCollection c(p);
      c.write(gen_out, gen_gzip, progress);
      fmt::print("generated {} documents ({} sites, vocabulary of {} ranks), {} train and {} test "
                 "queries in {}\n",
                 p.num_docs, c.num_sites(), c.vocabulary_size(), p.train_queries, p.test_queries,
                 gen_out.string());
    } else if (*idx) {
      if (corpus.empty() && synthetic.empty())
        throw InputError("index", 0, "give --corpus FILE... or --synthetic docs=N,seed=S");
      bo.split = parse_split_mode(split);
      bo.codec = codec::parse_codec(codec_name);
      bo.progress = progress;
      if (bo.num_shards == 0) throw InputError("--shards", 0, "must be at least 1");
      nlohmann::json r;
      if (!synthetic.empty()) {
        r = build_index_synthetic(SyntheticParams::parse(synthetic), bo);
      } else {
        CorpusReadOptions ro;
        ro.format = parse_corpus_format(format);
        ro.skip_bad = skip_bad;
        r = build_index_from_corpus(corpus, ro, bo);
      }
      print_build_report(r, bo.out_dir);
      if (!report_path.empty()) write_json(report_path, r);
    } else if (*part) {
      std::optional<codec::Codec> c;
      if (!part_codec.empty()) c = codec::parse_codec(part_codec);
      const auto r = repartition_index(part_in, part_out, part_shards, parse_split_mode(part_split),
                                       c, progress, part_force);
      fmt::print("wrote {} shards ({}) to {}: {:.1f} MiB in {:.1f} s\n", part_shards, part_split,
                 part_out.string(), r.at("index_bytes").get<double>() / (1 << 20),
                 r.at("seconds").get<double>());
    } else if (*srch) {
      so.ranking.cache_bytes = std::uint64_t(srch_cache_mb * 1048576.0);
      so.ranking.resident_streams = !srch_copy_streams;
      so.params.mode = parse_mode(mode);
      so.params.scoring = parse_scoring(scoring);
      so.alpha = alpha;
      so.progress = progress;
      std::ofstream run(run_path);
      if (!run) throw InputError(run_path.string(), 0, "cannot write run file");
      const nlohmann::json m = run_search_session(so, run);
      run.close();
      if (!run) throw Error("write failed: " + run_path.string());
      if (!metrics_path.empty()) write_json(metrics_path, m);
      print_search_summary(m, run_path.string(), std::cout);
    } else if (*rs) {
      if (*rs_index) {
        const ranker::StoreIndex si = ranker::index_ranker_store(rs_dir);
        fmt::print("indexed {} ranker(s) in {}\n", si.rankers.size(), si.index_file().string());
      } else if (rs_mix > 0) {
        ranker::RankerShape shape{rs_prefix, rs_mix_buckets, 0, 0, rs_mix_trees, rs_mix_depth, {}};
        ranker::write_ranker_mix(rs_dir, rs_mix, shape, rs_prefix, rs_seed);
        fmt::print("wrote {} rankers {}-000.. ({} trees, {} buckets each) into {}\n", rs_mix,
                   rs_prefix, rs_mix_trees, rs_mix_buckets, rs_dir.string());
      } else {
        ranker::write_reference_rankers(rs_dir, rs_seed);
        fmt::print("wrote the reference rankers R-S-BLG, R-M-BGD, R-L-D into {}\n", rs_dir.string());
      }
    } else if (*feat) {
      fo.params.mode = parse_mode(feat_mode);
      fo.params.scoring = parse_scoring(feat_scoring);
      std::ofstream out(feat_out);
      if (!out) throw InputError(feat_out.string(), 0, "cannot write");
      const nlohmann::json r = ranker::dump_features(fo, out);
      out.close();
      if (!out) throw Error("write failed: " + feat_out.string());
      fmt::print("wrote {} feature rows of {} queries to {}\n", r.at("rows").get<std::uint64_t>(),
                 r.at("queries").get<std::uint64_t>(), feat_out.string());
    } else if (*plan) {
      CachePlanOptions po;
      po.policy = parse_cache_policy(plan_policy);
      po.lambda = plan_lambda;
      po.fill_spare = !plan_no_fill;
      po.budget_bytes = parse_byte_size(plan_budget, "--budget");
      po.k = plan_k;
      po.scoring = parse_scoring(plan_scoring);
      po.progress = progress;
      const Index index = Index::open(plan_index);
      const CachePlan p = make_cache_plan(index, plan_queries, po);
      p.write(plan_out);
      for (const ShardCachePlan& sp : p.shards)
        fmt::print("shard {}: {} lists, {} blocks, {:.1f} MiB of {:.1f} MiB; training block reads "
                   "served from the cache: {} of {} ({:.1f}%)\n",
                   sp.shard, sp.lists.size(), sp.blocks, double(sp.bytes) / (1 << 20),
                   double(p.budget_bytes) / (1 << 20), sp.training_block_reads_cached,
                   sp.training_block_reads,
                   sp.training_block_reads ? 100.0 * double(sp.training_block_reads_cached) /
                                                 double(sp.training_block_reads)
                                           : 0.0);
      for (const ShardCachePlan& sp : p.shards)
        if (sp.unqueried_lists > 0)
          fmt::print("shard {}: of those, {} lists ({:.1f} MiB) no training query asked for fill "
                     "the budget the log's lists leave (--no-fill: leave it empty)\n",
                     sp.shard, sp.unqueried_lists, double(sp.unqueried_bytes) / (1 << 20));
      fmt::print("wrote the {} cache plan ({} training queries, lambda {}) to {}\n",
                 to_string(p.policy), p.training_queries, p.lambda, plan_out.string());
    } else if (*qry) {
      return run_query_command(qc);
    } else if (*load) {
      return run_load_command(lc);
    } else if (*cmp) {
      const RunComparison c = compare_runs(read_run_file(cmp_ref), read_run_file(cmp_cand), cmp_tol);
      for (const std::string& d : c.differences) fmt::print("  {}\n", d);
      if (!c.equal()) {
        fmt::print("runs differ: {} of {} queries ({} vs reference {})\n", c.differing_queries,
                   c.queries, cmp_cand.string(), cmp_ref.string());
        return 1;
      }
      fmt::print("runs equal: {} queries, {} documents ({} vs reference {})\n", c.queries,
                 c.documents, cmp_cand.string(), cmp_ref.string());
    } else if (*ev) {
      const EvalSummary e = evaluate_run(read_eval_run(ev_run), read_qrels(ev_qrels), ev_k);
      std::cout << to_json(e, ev_per_query).dump(2) << '\n';
    } else if (*info) {
      const RootManifest m = read_root_manifest(info_index / kRootManifestName);
      const IndexParams& p = m.params;
      fmt::print("index {}: format {}, codec {}, {} shard(s) ({})\n", info_index.string(),
                 p.format_version, codec::to_string(p.codec), p.num_shards, to_string(p.split));
      fmt::print("  {} documents, {} terms, {} postings, avgdl {:.2f}, gs alpha {}, pagerank {}\n",
                 p.collection.num_docs, p.num_terms, p.num_postings_total,
                 p.collection.avg_doc_length, p.gs_alpha,
                 p.has_links ? fmt::format("{} iterations", p.pagerank_iterations) : "uniform (no links)");
      const auto forward = read_forward_index_record(info_index / m.shards.at(0).dir / kShardManifestName);
      fmt::print("  forward index: {}\n",
                 forward ? fmt::format("yes ({}, version {}, {} tokens in shard 0)", forward->encoding,
                                       forward->format_version, forward->num_tokens)
                         : std::string("none (build the index with --forward-index)"));
      for (const auto& s : m.shards)
        fmt::print("  {}: {} documents, {} postings\n", s.dir, s.num_docs, s.num_postings);
      if (info_verify) {
        OpenOptions oo;
        oo.verify_checksums = true;
        const Index index = Index::open(info_index, oo);
        if (forward)
          for (std::size_t i = 0; i < index.num_open_shards(); ++i)
            ForwardIndex::open(index.shard(i), oo);  // verifies sizes, checksums and streams
        fmt::print("  verified: every file of {} shard(s) matches its checksum and structure\n",
                   index.num_open_shards());
      }
    }
  } catch (const Error& e) {
    std::cerr << "gpusearch: error: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "gpusearch: unexpected error: " << e.what() << '\n';
    return 2;
  }
  return 0;
}
