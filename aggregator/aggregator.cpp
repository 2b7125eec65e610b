#include "aggregator/aggregator.hpp"

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "aggregator/result_cache.hpp"
#include "common/index_format.hpp"
#include "common/metrics.hpp"
#include "common/progress.hpp"
#include "common/run_file.hpp"
#include "common/shard_index.hpp"
#include "common/wire/mpi_transport.hpp"

namespace gpusearch {

namespace {

using Clock = AggregatorClock;
using namespace wire;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Every latency and stage entry: count, mean, min, p50/p95/p99, max and order statistics, with
// the one percentile definition (common/metrics.hpp: nearest rank over the stored samples).
nlohmann::json summary(std::vector<double> v) { return metrics::summarize(std::move(v)); }

// Where queries come from: a file replayed closed-loop or at a rate, or standard input read by
// a thread (std::getline blocks; the MPI loop must not).
class QuerySource {
 public:
  QuerySource(const AggregatorOptions& o) : options_(o) {
    if (o.queries == "-") {
      stdin_ = true;
      reader_ = std::thread([this] { read_stdin(); });
    } else {
      file_ = read_query_file(o.queries);
      problems_ = file_.problems;
    }
  }
  ~QuerySource() {
    if (reader_.joinable()) reader_.detach();  // may sit in a read on a terminal; harmless
  }
  const std::string& name() const { return options_.queries; }
  std::uint64_t total() const { return stdin_ ? 0 : file_.queries.size(); }

  // Queries that have arrived by `now`, at most `room` (closed-loop replay), with arrival times.
  void poll(Clock::time_point start, Clock::time_point now, std::size_t room,
            std::vector<std::pair<QueryText, Clock::time_point>>& out) {
    if (stdin_) {
      std::lock_guard lock(mutex_);
      while (!lines_.empty()) {
        out.push_back(std::move(lines_.front()));
        lines_.pop_front();
      }
      return;
    }
    while (next_ < file_.queries.size()) {
      Clock::time_point arrival = now;
      if (options_.qps > 0) {
        arrival = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(double(next_) / options_.qps));
        if (arrival > now) break;
      } else if (room == 0) {
        break;
      } else {
        --room;
      }
      out.emplace_back(file_.queries[next_++], arrival);
    }
  }
  bool exhausted() const {
    if (!stdin_) return next_ >= file_.queries.size();
    std::lock_guard lock(mutex_);
    return eof_ && lines_.empty();
  }
  std::vector<QueryProblem> take_problems() {
    std::lock_guard lock(mutex_);
    std::vector<QueryProblem> p = std::move(problems_);
    problems_.clear();
    return p;
  }

 private:
  void read_stdin() {
    std::string line;
    std::uint64_t line_no = 0;
    while (std::getline(std::cin, line)) {
      ++line_no;
      if (line.find_first_not_of(" \t\r\n") == std::string::npos) continue;
      QueryText q;
      QueryProblem p;
      const bool ok = parse_tsv_query_line(line, line_no, q, p, "<stdin>");
      std::lock_guard lock(mutex_);
      if (ok)
        lines_.emplace_back(std::move(q), Clock::now());
      else
        problems_.push_back(std::move(p));
    }
    std::lock_guard lock(mutex_);
    eof_ = true;
  }

  const AggregatorOptions& options_;
  bool stdin_ = false;
  QueryFile file_;
  std::size_t next_ = 0;
  mutable std::mutex mutex_;
  std::deque<std::pair<QueryText, Clock::time_point>> lines_;
  std::vector<QueryProblem> problems_;
  bool eof_ = false;
  std::thread reader_;
};

struct InFlightBatch {
  std::uint64_t id = 0;
  std::vector<PendingQuery> queries;
  Clock::time_point cut, sent, deadline, sends_done;
  std::vector<PendingSend> sends;
  bool all_sent = false;
  std::vector<std::optional<ResultBatch>> results;  // by ISN (rank - 1)
  std::vector<Clock::time_point> received_at;
  std::size_t received = 0;
};

struct IsnBook {
  nlohmann::json hello, stats;
  std::uint64_t batches_answered = 0, batches_missed = 0, late_results = 0, errors = 0;
  std::uint64_t compute_us = 0, idle_us = 0;
  bool fallback_seen = false;
};

}  // namespace

AggregatorOutcome run_aggregator(const AggregatorOptions& options, MPI_Comm world) {
  int rank = 0, size = 0;
  GPUSEARCH_MPI_CHECK(MPI_Comm_rank(world, &rank));
  GPUSEARCH_MPI_CHECK(MPI_Comm_size(world, &size));
  {
    MPI_Comm self_group;  // collective with the ISNs' split (they pick their GPUs from it)
    GPUSEARCH_MPI_CHECK(MPI_Comm_split(world, 0, rank, &self_group));
    MPI_Comm_free(&self_group);
  }
  const std::size_t num_isns = std::size_t(size - 1);
  AggregatorOutcome outcome;
  const std::string me = "gpusearch-aggregator";
  const auto t_start = Clock::now();

  std::vector<IsnBook> isns(num_isns);
  auto shut_down_isns = [&](std::uint64_t grace_ms) {
    // Every ISN that said hello without an error gets a shutdown and returns its stats.
    std::vector<PendingSend> sends;
    auto msg = std::make_shared<const WireBytes>(encode(Control{Control::Kind::kShutdown, ""}));
    std::vector<bool> waiting(num_isns, false);
    for (std::size_t i = 0; i < num_isns; ++i) {
      if (isns[i].hello.is_null() || isns[i].hello.contains("error")) continue;
      sends.emplace_back(msg, msg->size() * 8, int(i + 1), kTagControl, world);
      waiting[i] = true;
    }
    const auto until = Clock::now() + std::chrono::milliseconds(grace_ms);
    std::size_t left = std::size_t(std::count(waiting.begin(), waiting.end(), true));
    while (left > 0 && Clock::now() < until) {
      for (auto& s : sends) s.test();
      bool any = false;
      while (auto m = try_receive(world)) {
        any = true;
        const std::size_t i = std::size_t(m->source - 1);
        if (m->tag == kTagResultBatch && i < num_isns) {
          ++isns[i].late_results;  // a batch already answered without it
        } else if (m->tag == kTagControl && m->rejected.empty()) {
          try {
            const Control c = decode_control(m->data());
            if (c.kind == Control::Kind::kStatsReply && i < num_isns && waiting[i]) {
              isns[i].stats = nlohmann::json::parse(c.payload, nullptr, false);
              waiting[i] = false;
              --left;
            }
          } catch (const WireError& e) {
            std::cerr << me << ": " << e.what() << '\n';
          }
        }
      }
      if (!any) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::vector<int> stuck;
    for (std::size_t i = 0; i < num_isns; ++i)
      if (waiting[i]) stuck.push_back(int(i + 1));
    return stuck;
  };

  // The index: its shard count must match the ISNs, and shard 0's lexicon (every shard carries
  // the global vocabulary) resolves queries. Checksums are the ISNs' job.
  std::unique_ptr<Index> vocab_index;
  std::string setup_error;
  IndexParams index_params;
  try {
    const RootManifest root = read_root_manifest(options.index_dir / kRootManifestName);
    index_params = root.params;
    if (root.shards.size() != num_isns)
      setup_error = fmt::format(
          "the index {} has {} shard(s) but the job has {} ISN(s); start one ISN per shard "
          "(launch/cluster.sh --isns {}) or re-shard it (gpusearch partition --shards {})",
          options.index_dir.string(), root.shards.size(), num_isns, root.shards.size(), num_isns);
    else {
      OpenOptions oo;
      oo.verify_checksums = false;
      vocab_index = std::make_unique<Index>(Index::open_shard(options.index_dir, 0, oo));
    }
  } catch (const std::exception& e) {
    setup_error = e.what();
  }

  // Hellos: every ISN reports its shard, range and memory (or why it could not open it).
  {
    std::size_t got = 0;
    const auto until = Clock::now() + std::chrono::milliseconds(options.start_timeout_ms);
    while (got < num_isns && Clock::now() < until) {
      auto m = try_receive(world, MPI_ANY_SOURCE, kTagControl);
      if (!m) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      const std::size_t i = std::size_t(m->source - 1);
      if (!m->rejected.empty() || i >= num_isns) continue;
      const Control c = decode_control(m->data());
      if (c.kind != Control::Kind::kHello) continue;
      isns[i].hello = nlohmann::json::parse(c.payload, nullptr, false);
      ++got;
    }
    if (got < num_isns && setup_error.empty())
      setup_error = fmt::format("only {} of {} ISNs started within {} ms", got, num_isns,
                                options.start_timeout_ms);
    for (std::size_t i = 0; i < num_isns; ++i)
      if (isns[i].hello.is_object() && isns[i].hello.contains("error")) {
        // Every ISN finds a shard-count mismatch too; report it once.
        const std::string e = isns[i].hello.at("error").get<std::string>();
        const bool mismatch_again =
            e.find("shard(s) but the job has") != std::string::npos &&
            setup_error.find("shard(s) but the job has") != std::string::npos;
        if (!mismatch_again)
          setup_error +=
              (setup_error.empty() ? "" : "; ") + fmt::format("ISN rank {}: {}", i + 1, e);
      }
  }
  if (!setup_error.empty()) {
    std::cerr << me << ": error: " << setup_error << '\n';
    const auto stuck = shut_down_isns(options.shutdown_grace_ms);
    outcome.exit_code = 1;
    outcome.abort_job = !stuck.empty();
    return outcome;
  }
  for (std::size_t i = 0; i < num_isns; ++i) {
    const auto& h = isns[i].hello;
    std::cerr << fmt::format(
        "{}: ISN rank {} on {}: shard {}, {} docs, input positions {}..{}, "
        "{:.1f} MiB mapped, RSS {:.1f} MiB, engine {}, GPU ordinal {}\n",
        me, i + 1, h.value("host", "?"), h.value("shard", 0u), h.value("docs", 0u),
        h.at("input_range")[0].get<std::uint32_t>(), h.at("input_range")[1].get<std::uint32_t>(),
        h.value("mapped_bytes", 0.0) / 1048576.0, h.value("rss_bytes", 0.0) / 1048576.0,
        h.value("engine", "?"), h.value("gpu_device", -1));
  }
  const double start_seconds = std::chrono::duration<double>(Clock::now() - t_start).count();

  SearchParams params = options.params;
  params.alpha = std::isnan(options.alpha) ? index_params.gs_alpha : options.alpha;
  const ShardIndex& vocabulary = vocab_index->shard(0);

  std::ofstream run(options.run_path);
  if (!run) throw InputError(options.run_path.string(), 0, "cannot write run file");

  QuerySource source(options);
  Batcher batcher(options.batching);
  ResultCache cache(options.cache_entries);
  const std::size_t window = options.window > 0
                                 ? options.window
                                 : options.batching.batch_size * (options.max_in_flight + 1);
  Progress bar("cluster", source.total(), "queries", options.progress);

  // Counters and samples.
  std::vector<QueryProblem> problems;
  std::uint64_t read = 0, answered = 0, no_known_terms = 0, unknown_tokens = 0, empty_results = 0,
                answered_by_or = 0, partial_answers = 0, cache_hits = 0, hits_written = 0,
                rejected_messages = 0, late_discarded = 0, batches_with_misses = 0;
  QueryCounters counters;
  std::vector<double> latency_ms, wait_ms, broadcast_ms, round_trip_ms, compute_ms, gather_ms,
      merge_ms, isn_idle_ms, batch_sizes;
  std::map<std::uint64_t, InFlightBatch> in_flight;
  std::size_t in_flight_queries = 0;
  std::uint64_t next_batch_id = 1;

  auto answer = [&](const std::string& qid, const std::vector<CachedHit>& hits,
                    Clock::time_point arrival, Clock::time_point now) {
    for (std::size_t i = 0; i < hits.size(); ++i)
      write_run_line(run, qid, hits[i].docid, int(i + 1), hits[i].score, options.run_tag);
    hits_written += hits.size();
    if (hits.empty()) ++empty_results;
    ++answered;
    latency_ms.push_back(ms_between(arrival, now));
    bar.add(1);
  };

  auto finish_batch = [&](InFlightBatch& b, Clock::time_point now) {
    const auto t_merge = Clock::now();
    bool missed = false;
    std::uint64_t max_compute_us = 0, max_idle_us = 0;
    Clock::time_point last_result = b.sent;
    std::vector<std::size_t> present;
    for (std::size_t i = 0; i < num_isns; ++i) {
      if (!b.results[i] || !b.results[i]->error.empty()) {
        missed = true;
        if (!b.results[i]) ++isns[i].batches_missed;
        continue;
      }
      if (b.results[i]->answers.size() != b.queries.size()) {
        ++isns[i].errors;
        missed = true;
        continue;
      }
      present.push_back(i);
      max_compute_us = std::max(max_compute_us, b.results[i]->compute_us);
      max_idle_us = std::max(max_idle_us, b.results[i]->idle_us);
      last_result = std::max(last_result, b.received_at[i]);
    }
    if (missed) ++batches_with_misses;
    std::vector<const ShardResult*> shards(present.size());
    std::vector<std::size_t> cursor(present.size());
    for (std::size_t q = 0; q < b.queries.size(); ++q) {
      for (std::size_t j = 0; j < present.size(); ++j)
        shards[j] = &b.results[present[j]]->answers[q].result;
      QueryResult r = merge_shard_results(params, shards);
      r.partial = r.partial || missed;
      // The merged list interleaves each shard's list in its own order: walk one cursor per
      // shard to find the external ids.
      std::fill(cursor.begin(), cursor.end(), 0);
      CachedAnswer ca;
      ca.answered_by_or = r.answered_by_or;
      for (const RankedDoc& h : r.hits) {
        std::string id;
        for (std::size_t j = 0; j < present.size(); ++j) {
          const ShardAnswer& a = b.results[present[j]]->answers[q];
          if (b.results[present[j]]->shard_id != h.shard) continue;
          const bool use_or = params.mode == Mode::kAndOr && r.answered_by_or;
          const auto& list = use_or ? a.result.or_hits : a.result.hits;
          const auto& ids = use_or ? a.or_hit_ids : a.hit_ids;
          std::size_t& c = cursor[j];
          while (c < list.size() && list[c].doc != h.doc) ++c;  // normally no step
          if (c < list.size() && c < ids.size()) id = ids[c++];
          break;
        }
        ca.hits.push_back({std::move(id), h.score});
      }
      counters.add(r.counters);
      if (r.answered_by_or) ++answered_by_or;
      if (r.partial) ++partial_answers;
      const PendingQuery& pq = b.queries[q];
      answer(pq.id, ca.hits, pq.arrival, now);
      if (!r.partial && cache.enabled()) cache.insert(pq.cache_key, std::move(ca));
    }
    for (std::size_t i : present) {
      ++isns[i].batches_answered;
      isns[i].compute_us += b.results[i]->compute_us;
      isns[i].idle_us += b.results[i]->idle_us;
      isns[i].fallback_seen = isns[i].fallback_seen || b.results[i]->fallback_active;
    }
    batch_sizes.push_back(double(b.queries.size()));
    broadcast_ms.push_back(ms_between(b.cut, b.all_sent ? b.sends_done : now));
    round_trip_ms.push_back(ms_between(b.sent, last_result));
    compute_ms.push_back(double(max_compute_us) / 1000.0);
    gather_ms.push_back(
        std::max(0.0, ms_between(b.sent, last_result) - double(max_compute_us) / 1000.0));
    merge_ms.push_back(ms_between(t_merge, Clock::now()));
    isn_idle_ms.push_back(double(max_idle_us) / 1000.0);
    in_flight_queries -= b.queries.size();
  };

  const auto t_run = Clock::now();
  unsigned idle_rounds = 0;  // polling back-off: 1x, 2x, 4x ... idle_sleep_us, at most 1 ms
  for (;;) {
    bool progress = false;
    const auto now = Clock::now();

    // Admit arrived queries: resolve, answer from the cache, or queue for a batch.
    std::vector<std::pair<QueryText, Clock::time_point>> arrived;
    const std::size_t outstanding = batcher.size() + in_flight_queries;
    source.poll(t_run, now, outstanding < window ? window - outstanding : 0, arrived);
    for (auto& p : source.take_problems()) problems.push_back(std::move(p));
    for (auto& [qt, arrival] : arrived) {
      progress = true;
      ++read;
      Query q;
      QueryProblem problem;
      if (!resolve_query(vocabulary, qt, options.limits, q, problem, source.name())) {
        problems.push_back(std::move(problem));
        continue;
      }
      unknown_tokens += q.unknown_tokens;
      if (q.terms.empty()) {  // matches nothing on any shard: no broadcast needed
        ++no_known_terms;
        answer(q.id, {}, arrival, Clock::now());
        continue;
      }
      PendingQuery pq;
      pq.id = std::move(q.id);
      pq.arrival = arrival;
      pq.cost = std::numeric_limits<double>::max();
      for (TermId t : q.terms) {
        pq.terms.emplace_back(vocabulary.term_string(t));
        pq.cost = std::min(pq.cost, double(vocabulary.term(t).df_global));
      }
      if (cache.enabled()) {
        pq.cache_key = result_cache_key(params, pq.terms);
        if (auto hit = cache.find(pq.cache_key)) {
          ++cache_hits;
          if (hit->answered_by_or) ++answered_by_or;
          answer(pq.id, hit->hits, arrival, Clock::now());
          continue;
        }
      }
      batcher.add(std::move(pq));
    }

    // Cut and broadcast batches while the in-flight window has room.
    while (in_flight.size() < options.max_in_flight &&
           batcher.due(Clock::now(), source.exhausted())) {
      progress = true;
      InFlightBatch b;
      b.id = next_batch_id++;
      b.cut = Clock::now();
      b.queries = batcher.cut();
      QueryBatch qb;
      qb.batch_id = b.id;
      qb.params = params;
      qb.queries.reserve(b.queries.size());
      for (const PendingQuery& pq : b.queries) {
        qb.queries.push_back({pq.id, pq.terms});
        wait_ms.push_back(ms_between(pq.arrival, b.cut));
      }
      auto msg = std::make_shared<const WireBytes>(encode(qb));
      b.sent = Clock::now();
      for (std::size_t i = 0; i < num_isns; ++i)
        b.sends.emplace_back(msg, msg->size() * 8, int(i + 1), kTagQueryBatch, world);
      b.deadline = options.deadline_ms == 0
                       ? Clock::time_point::max()
                       : b.sent + std::chrono::milliseconds(options.deadline_ms);
      b.results.resize(num_isns);
      b.received_at.resize(num_isns);
      in_flight_queries += b.queries.size();
      in_flight.emplace(b.id, std::move(b));
    }

    // Progress of the sends.
    for (auto& [id, b] : in_flight) {
      if (b.all_sent) continue;
      bool all = true;
      for (auto& s : b.sends) all = s.test() && all;
      if (all) b.all_sent = true, b.sends_done = Clock::now(), b.sends.clear();
    }

    // Gather results; a batch already answered without this ISN drops it.
    while (auto m = try_receive(world, MPI_ANY_SOURCE, kTagResultBatch)) {
      progress = true;
      const std::size_t i = std::size_t(m->source - 1);
      if (!m->rejected.empty() || i >= num_isns) {
        ++rejected_messages;
        std::cerr << me << ": " << (m->rejected.empty() ? "message from unknown rank" : m->rejected)
                  << '\n';
        continue;
      }
      ResultBatch rb;
      try {
        rb = decode_result_batch(m->data());
      } catch (const WireError& e) {
        ++rejected_messages;
        std::cerr << me << ": from ISN rank " << m->source << ": " << e.what() << '\n';
        continue;
      }
      const auto it = in_flight.find(rb.batch_id);
      if (it == in_flight.end() || it->second.results[i]) {
        ++late_discarded;
        ++isns[i].late_results;
        continue;
      }
      if (!rb.error.empty()) {
        ++isns[i].errors;
        std::cerr << me << ": ISN rank " << m->source << " could not answer batch " << rb.batch_id
                  << ": " << rb.error << '\n';
      }
      it->second.received_at[i] = Clock::now();
      it->second.results[i] = std::move(rb);
      ++it->second.received;
    }

    // Complete batches: all ISNs answered, or the deadline passed.
    const auto now2 = Clock::now();
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      InFlightBatch& b = it->second;
      if (b.received == num_isns || now2 >= b.deadline) {
        if (b.received < num_isns)
          std::cerr << fmt::format(
              "{}: batch {} missed its deadline of {} ms on {} ISN(s); its "
              "{} queries are answered partially\n",
              me, b.id, options.deadline_ms, num_isns - b.received, b.queries.size());
        finish_batch(b, now2);
        it = in_flight.erase(it);
        progress = true;
      } else {
        ++it;
      }
    }
    run.flush();

    if (source.exhausted() && batcher.empty() && in_flight.empty()) break;
    if (progress) {
      idle_rounds = 0;
    } else {
      const std::uint64_t sleep_us = std::min<std::uint64_t>(
          1000, std::uint64_t(options.idle_sleep_us) << std::min(idle_rounds, 4u));
      ++idle_rounds;
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    }
  }
  bar.finish();
  const double run_seconds = std::chrono::duration<double>(Clock::now() - t_run).count();
  run.close();
  if (!run) throw Error("write failed: " + options.run_path.string());
  for (auto& p : source.take_problems()) problems.push_back(std::move(p));
  for (std::size_t i = 0; i < problems.size() && i < 20; ++i)
    std::cerr << me << ": skipped " << problems[i].message() << '\n';
  if (problems.size() > 20) std::cerr << me << ": ... and " << problems.size() - 20 << " more\n";

  const auto stuck = shut_down_isns(options.shutdown_grace_ms);
  for (int r : stuck)
    std::cerr << fmt::format(
        "{}: ISN rank {} did not answer the shutdown within {} ms; the job "
        "will end with MPI_Abort\n",
        me, r, options.shutdown_grace_ms);

  nlohmann::json isn_json = nlohmann::json::array();
  for (std::size_t i = 0; i < num_isns; ++i)
    isn_json.push_back(
        {{"rank", i + 1},
         {"hello", isns[i].hello},
         {"stats", isns[i].stats},
         {"batches_answered", isns[i].batches_answered},
         {"batches_missed", isns[i].batches_missed},
         {"late_results_discarded", isns[i].late_results},
         {"errors", isns[i].errors},
         {"compute_seconds", isns[i].compute_us / 1e6},
         {"idle_seconds", isns[i].idle_us / 1e6},
         {"fallback_seen", isns[i].fallback_seen},
         {"stuck_at_shutdown", std::find(stuck.begin(), stuck.end(), int(i + 1)) != stuck.end()}});
  nlohmann::json problem_lines = nlohmann::json::array();
  for (std::size_t i = 0; i < problems.size() && i < 100; ++i)
    problem_lines.push_back(problems[i].message());
  outcome.metrics = {
      {"index", options.index_dir.string()},
      {"isns", num_isns},
      {"engine", isns.empty() ? "" : isns[0].hello.value("engine", "")},
      {"mode", std::string(to_string(params.mode))},
      {"scoring", std::string(to_string(params.scoring))},
      {"alpha", params.alpha},
      {"k", params.k},
      {"queries",
       {{"read", answered + problems.size()},
        {"run", answered},
        {"skipped", problems.size()},
        {"skipped_messages", problem_lines},
        {"no_known_terms", no_known_terms},
        {"unknown_tokens", unknown_tokens},
        {"empty_results", empty_results},
        {"answered_by_or", answered_by_or},
        {"partial", partial_answers},
        {"cache_hits", cache_hits},
        {"hits_written", hits_written}}},
      {"start_seconds", start_seconds},
      {"seconds", run_seconds},
      {"queries_per_second", run_seconds > 0 ? double(answered) / run_seconds : 0.0},
      {"latency_ms", summary(latency_ms)},
      {"batch_policy",
       {{"batch_size", options.batching.batch_size},
        {"max_wait_us", options.batching.max_wait_us},
        {"cost_buckets", options.batching.cost_buckets},
        {"max_in_flight", options.max_in_flight},
        {"window", window},
        {"qps", options.qps},
        {"deadline_ms", options.deadline_ms},
        {"cache_entries", options.cache_entries}}},
      {"batches",
       {{"count", batch_sizes.size()},
        {"size", summary(batch_sizes)},
        {"with_missing_isns", batches_with_misses}}},
      {"stages_ms",
       {{"batching_wait_per_query", summary(wait_ms)},
        {"broadcast", summary(broadcast_ms)},
        {"round_trip", summary(round_trip_ms)},
        {"isn_compute_max", summary(compute_ms)},
        {"isn_idle_max", summary(isn_idle_ms)},
        {"gather_overhead", summary(gather_ms)},
        {"merge", summary(merge_ms)}}},
      {"cache",
       {{"entries", cache.size()}, {"evictions", cache.evictions()}, {"hits", cache_hits}}},
      {"messages",
       {{"rejected", rejected_messages},
        {"late_discarded_during_run", late_discarded},
        {"late_discarded", [&] {  // including those drained at shutdown
           std::uint64_t n = 0;
           for (const IsnBook& b : isns) n += b.late_results;
           return n;
         }()}}},
      {"isn", isn_json},
      {"counters", to_json(counters)},
      {"peak_rss_bytes", peak_rss_bytes()}};
  if (!options.metrics_path.empty()) {
    std::ofstream m(options.metrics_path);
    m << outcome.metrics.dump(2) << '\n';
    if (!m) throw Error("cannot write " + options.metrics_path.string());
  }
  outcome.abort_job = !stuck.empty();
  outcome.exit_code = stuck.empty() ? 0 : 3;
  return outcome;
}

void print_aggregator_summary(const nlohmann::json& m, std::ostream& out) {
  const auto& q = m.at("queries");
  const auto& lat = m.at("latency_ms");
  out << fmt::format(
      "cluster: {} queries ({} skipped, {} cache hits, {} partial, {} with no results) on {} "
      "ISN(s) with the {} engine, mode {}, k {}, {}\n"
      "  {:.3f} s: {:.0f} queries/s; latency p50 {:.2f} ms, p95 {:.2f} ms, p99 {:.2f} ms, max "
      "{:.2f} ms\n"
      "  {} batches (mean size {:.1f}); {} postings decoded, {} documents scored\n",
      q.at("run").get<std::uint64_t>(), q.at("skipped").get<std::uint64_t>(),
      q.at("cache_hits").get<std::uint64_t>(), q.at("partial").get<std::uint64_t>(),
      q.at("empty_results").get<std::uint64_t>(), m.at("isns").get<std::size_t>(),
      m.at("engine").get<std::string>(), m.at("mode").get<std::string>(), m.at("k").get<unsigned>(),
      m.at("scoring").get<std::string>(), m.at("seconds").get<double>(),
      m.at("queries_per_second").get<double>(), lat.value("p50", 0.0), lat.value("p95", 0.0),
      lat.value("p99", 0.0), lat.value("max", 0.0), m.at("batches").at("count").get<std::size_t>(),
      m.at("batches").at("size").value("mean", 0.0),
      m.at("counters").at("postings_decoded").get<std::uint64_t>(),
      m.at("counters").at("docs_scored").get<std::uint64_t>());
}

}  // namespace gpusearch
