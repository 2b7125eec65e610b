#include "isn/search_session.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>

#include <fmt/format.h>
#include <oneapi/tbb/task_group.h>

#include "common/metrics.hpp"
#include "common/progress.hpp"
#include "common/run_file.hpp"
#include "common/shard_index.hpp"
#include "common/forward_index.hpp"
#include "common/ranker/ranker_mix.hpp"
#include "isn/ranker/ranker_backend.hpp"
#include "isn/ranker/ranker_cache.hpp"
#include "isn/ranker/ranker_store.hpp"
#include "isn/ranker/second_stage.hpp"

namespace gpusearch {

namespace {
using Clock = std::chrono::steady_clock;

using metrics::percentile;  // the one definition: nearest rank (common/metrics.hpp)

// The second stage of every shard: the store, one backend for the process, and per shard its
// forward index, ranker cache and ranker.
struct SecondStage {
  ranker::RankerStore store;
  ranker::RankerAssignment assignment;
  std::unique_ptr<ranker::RankerBackend> backend;
  std::vector<ForwardIndex> forward;
  std::vector<std::unique_ptr<ranker::RankerCache>> caches;
  std::vector<std::unique_ptr<ranker::SecondStageRanker>> rankers;
};

std::unique_ptr<SecondStage> make_second_stage(const SearchSessionOptions& o, const Index& index,
                                               const OpenOptions& oo) {
  const ranker::RankingOptions& r = o.ranking;
  if (!r.enabled()) {
    if (!r.ranker.empty() || !std::isnan(r.mix_exponent) || r.candidates > 0)
      throw InputError("--ranker-store", 0, "--ranker, --ranker-mix and --candidates need a ranker store");
    return nullptr;
  }
  if (r.candidates > kMaxCandidates)
    throw InputError("--candidates", 0, fmt::format("{} is above the limit of {}", r.candidates, kMaxCandidates));
  auto s = std::make_unique<SecondStage>(SecondStage{ranker::RankerStore::open(r.store_dir), {}, {}, {}, {}, {}});
  s->assignment.default_ranker = r.ranker;
  if (!std::isnan(r.mix_exponent)) {
    if (!r.ranker.empty()) throw InputError("--ranker-mix", 0, "give --ranker or --ranker-mix, not both");
    std::vector<std::string> names;
    for (const auto& e : s->store.index().rankers) names.push_back(e.name);
    if (names.empty()) throw InputError(s->store.index().index_file().string(), 0, "--ranker-mix: the store lists no rankers");
    s->assignment.mix = ranker::ZipfRankerMix(std::move(names), r.mix_exponent, r.mix_seed);
  }
  s->backend = ranker::make_ranker_backend(r.backend, o.engine.gpu_device);
  for (std::size_t i = 0; i < index.num_open_shards(); ++i) s->forward.push_back(ForwardIndex::open(index.shard(i), oo));
  for (std::size_t i = 0; i < index.num_open_shards(); ++i) {
    s->caches.push_back(std::make_unique<ranker::RankerCache>(s->store, *s->backend, r.cache_bytes));
    s->rankers.push_back(std::make_unique<ranker::SecondStageRanker>(index.shard(i), s->forward[i], *s->caches[i], *s->backend, r.resident_streams));
  }
  return s;
}
}  // namespace

nlohmann::json run_search_session(const SearchSessionOptions& options, std::ostream& run) {
  const auto t_open = Clock::now();
  OpenOptions oo;
  oo.verify_checksums = !options.skip_checksums;
  const Index index = Index::open(options.index_dir, oo);
  SearchParams params = options.params;
  params.alpha = std::isnan(options.alpha) ? index.params().gs_alpha : options.alpha;
  const std::unique_ptr<SecondStage> second = make_second_stage(options, index, oo);
  // With a second stage, each shard's first stage keeps the top `candidates` (at least k).
  SearchParams first_params = params;
  if (second) {
    params.candidates = options.ranking.candidates_or_default();
    first_params.candidates = params.candidates;
    first_params.k = std::max(params.k, params.candidates);
  }
  const double open_seconds = std::chrono::duration<double>(Clock::now() - t_open).count();

  // Queries: malformed lines and unusable queries are reported and counted, never dropped
  // silently.
  const QueryFile file = read_query_file(options.queries_path);
  std::vector<QueryProblem> problems = file.problems;
  std::vector<Query> queries;
  queries.reserve(file.queries.size());
  std::uint64_t no_known_terms = 0, unknown_tokens = 0;
  for (const QueryText& qt : file.queries) {
    Query q;
    QueryProblem p;
    if (!resolve_query(index.shard(0), qt, options.limits, q, p, options.queries_path.string())) {
      problems.push_back(std::move(p));
      continue;
    }
    unknown_tokens += q.unknown_tokens;
    if (q.terms.empty()) ++no_known_terms;
    if (second) q.ranker = second->assignment.for_query(q.id, q.ranker);
    queries.push_back(std::move(q));
  }
  for (std::size_t i = 0; i < problems.size() && i < 20; ++i)
    std::cerr << "gpusearch: skipped " << problems[i].message() << '\n';
  if (problems.size() > 20) std::cerr << "gpusearch: ... and " << problems.size() - 20 << " more\n";

  std::vector<std::unique_ptr<QueryEngine>> engines;
  EngineOptions engine_options = options.engine;
  engine_options.list_cache.index_dir = options.index_dir;
  engine_options.list_cache.engines_on_device = unsigned(index.num_open_shards());
  for (std::size_t s = 0; s < index.num_open_shards(); ++s)
    engines.push_back(make_engine(engine_options, index.shard(s), index.shard_id(s)));

  Progress bar("search", queries.size(), "queries", options.progress);
  std::vector<std::vector<ShardResult>> shard_results(engines.size());
  std::vector<double> batch_ms;
  double engine_seconds = 0;  // inside the engines' search calls only: query processing
  QueryCounters counters;
  std::uint64_t empty_results = 0, answered_by_or = 0, hits_written = 0, ranker_fallbacks = 0;
  double second_stage_seconds = 0;
  const auto t_search = Clock::now();
  // A batch's answers are merged and written to the run file while the engines search the next
  // batch (a task on oneTBB's pool). With the GPU engine on the H200 host (session 47, 240,000
  // queries, batch 1,024) the engine calls took 0.8 s of 2.9, merging and writing the rest, about
  // 0.9 us a run line, with the host's cores idle. One batch's writing at a time: the counters and
  // the run file see the batches in order, and the bytes are those of a serial loop.
  std::vector<std::vector<ShardResult>> writing(engines.size());
  auto merge_and_write = [&](std::span<const Query> batch) {
    std::vector<const ShardResult*> per_query(engines.size());
    for (std::size_t q = 0; q < batch.size(); ++q) {
      for (std::size_t s = 0; s < engines.size(); ++s) per_query[s] = &writing[s][q];
      const QueryResult r = merge_shard_results(params, per_query);
      counters.add(r.counters);
      if (r.hits.empty()) ++empty_results;
      if (r.answered_by_or) ++answered_by_or;
      if (r.ranker_fallback) ++ranker_fallbacks;
      for (std::size_t i = 0; i < r.hits.size(); ++i) {
        const RankedDoc& h = r.hits[i];
        write_run_line(run, batch[q].id, index.shard(h.shard).external_id(h.doc), int(i + 1),
                       h.score, options.run_tag);
      }
      hits_written += r.hits.size();
    }
  };
  // Declared after what its task uses: an engine's error unwinds through its destructor, which
  // waits for the task.
  tbb::task_group writer;
  for (std::size_t begin = 0; begin < queries.size(); begin += options.batch_size) {
    const std::size_t end = std::min(queries.size(), begin + options.batch_size);
    const std::span<const Query> batch(queries.data() + begin, end - begin);
    const auto t_batch = Clock::now();
    for (std::size_t s = 0; s < engines.size(); ++s) {
      shard_results[s].assign(batch.size(), ShardResult{});
      engines[s]->search(batch, first_params, shard_results[s]);
    }
    if (second) {
      const auto t_rank = Clock::now();
      for (std::size_t s = 0; s < engines.size(); ++s)
        second->rankers[s]->rank(batch, params, shard_results[s]);
      second_stage_seconds += std::chrono::duration<double>(Clock::now() - t_rank).count();
    }
    batch_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t_batch).count());
    engine_seconds += batch_ms.back() / 1e3;
    writer.wait();  // the batch before is written (and its error, if any, thrown here)
    writing.swap(shard_results);
    writer.run([&merge_and_write, batch] { merge_and_write(batch); });
    bar.add(batch.size());
  }
  writer.wait();
  bar.finish();
  const double search_seconds = std::chrono::duration<double>(Clock::now() - t_search).count();

  nlohmann::json engine_stats = nlohmann::json::array();
  for (const auto& e : engines) engine_stats.push_back(e->stats());
  nlohmann::json second_stage = nullptr;
  if (second) {
    nlohmann::json shards = nlohmann::json::array();
    for (const auto& r : second->rankers) shards.push_back(r->stats());
    second_stage = {{"store", options.ranking.store_dir.string()},
                    {"rankers_in_store", second->store.index().rankers.size()},
                    {"ranker", options.ranking.ranker},
                    {"ranker_mix_exponent", std::isnan(options.ranking.mix_exponent)
                                                ? nlohmann::json(nullptr)
                                                : nlohmann::json(options.ranking.mix_exponent)},
                    {"candidates", params.candidates},
                    {"backend", std::string(second->backend->name())},
                    {"cache_budget_bytes", options.ranking.cache_bytes},
                    {"seconds", second_stage_seconds},
                    // Queries answered by the first stage because their ranker failed to load.
                    {"ranker_fallback_queries", ranker_fallbacks},
                    {"shards", shards}};
  }
  nlohmann::json problem_lines = nlohmann::json::array();
  for (std::size_t i = 0; i < problems.size() && i < 100; ++i) problem_lines.push_back(problems[i].message());
  return {
      {"index", options.index_dir.string()},
      {"shards", index.num_open_shards()},
      {"engine", resolve_engine_name(options.engine.engine)},
      {"algorithm", options.engine.algorithm},
      {"mode", std::string(to_string(params.mode))},
      {"scoring", std::string(to_string(params.scoring))},
      {"alpha", params.alpha},
      {"k", params.k},
      {"queries", {{"read", file.queries.size() + file.problems.size()},
                   {"run", queries.size()},
                   {"skipped", problems.size()},
                   {"skipped_messages", problem_lines},
                   {"no_known_terms", no_known_terms},
                   {"unknown_tokens", unknown_tokens},
                   {"empty_results", empty_results},
                   {"answered_by_or", answered_by_or},
                   {"hits_written", hits_written}}},
      {"open_seconds", open_seconds},
      {"search_seconds", search_seconds},
      {"queries_per_second", search_seconds > 0 ? queries.size() / search_seconds : 0.0},
      // Query processing alone (the engines' search calls), without resolving queries, merging
      // shards or writing the run: the figure to compare with another engine's own timer.
      {"engine_seconds", engine_seconds},
      {"engine_queries_per_second", engine_seconds > 0 ? queries.size() / engine_seconds : 0.0},
      {"batch_size", options.batch_size},
      {"batch_ms", {{"count", batch_ms.size()},
                    {"p50", percentile(batch_ms, 50)},
                    {"p99", percentile(batch_ms, 99)},
                    {"max", percentile(batch_ms, 100)}}},
      {"counters", to_json(counters)},
      {"engine_stats", engine_stats},
      {"second_stage", second_stage},
      {"peak_rss_bytes", peak_rss_bytes()}};
}

void print_search_summary(const nlohmann::json& m, const std::string& run_path, std::ostream& out) {
  const auto& q = m.at("queries");
  out << fmt::format(
      "searched {} queries ({} skipped, {} with no known terms, {} with no results) on {} "
      "shard(s) with the {} engine, mode {}, k {}, {}\n"
      "  {:.3f} s: {:.0f} queries/s ({:.0f} queries/s in query processing alone, {:.3f} s); {} "
      "postings decoded, {} documents scored\n"
      "  run written to {}\n",
      q.at("run").get<std::uint64_t>(), q.at("skipped").get<std::uint64_t>(),
      q.at("no_known_terms").get<std::uint64_t>(), q.at("empty_results").get<std::uint64_t>(),
      m.at("shards").get<std::size_t>(), m.at("engine").get<std::string>(),
      m.at("mode").get<std::string>(), m.at("k").get<unsigned>(),
      m.at("scoring").get<std::string>(), m.at("search_seconds").get<double>(),
      m.at("queries_per_second").get<double>(), m.value("engine_queries_per_second", 0.0),
      m.value("engine_seconds", 0.0), m.at("counters").at("postings_decoded").get<std::uint64_t>(),
      m.at("counters").at("docs_scored").get<std::uint64_t>(), run_path);
}

}  // namespace gpusearch
