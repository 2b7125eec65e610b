#include "aggregator/aggregator.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "aggregator/arrival_order_writer.hpp"
#include "aggregator/kway_merge.hpp"
#include "aggregator/pipeline_depth_model.hpp"
#include "aggregator/query_source.hpp"
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

// A batch's life at one ISN, on the aggregator's clock.
struct IsnTimes {
  Clock::time_point received, start, end, encoded, arrived;
};

struct InFlightBatch {
  std::uint64_t id = 0;
  std::vector<PendingQuery> queries;
  Clock::time_point cut, encoded, sent, deadline, sends_done, complete;
  std::size_t bytes = 0;
  std::vector<PendingSend> sends;
  bool all_sent = false;
  std::vector<std::optional<Received>> messages;  // by ISN (rank - 1), decoded by the merger
  std::vector<ResultHeader> headers;              // read on arrival (O(1))
  std::vector<IsnTimes> times;
  std::size_t received = 0;
};

// What the merge thread gets: a completed batch, or a query answered at admission (result
// cache, no known term) that only needs its place in the run file.
struct MergeJob {
  std::optional<InFlightBatch> batch;
  std::uint64_t sequence = 0;
  std::string qid;
  CachedAnswer answer;
  Clock::time_point arrival, answered;
};

struct IsnBook {
  nlohmann::json hello, stats;
  std::uint64_t batches_answered = 0, batches_missed = 0, errors = 0;
  std::atomic<std::uint64_t> late_results{0};
  std::uint64_t compute_us = 0, idle_us = 0;
  bool fallback_seen = false;
  std::int64_t clock_offset_us = 0;  // ISN steady clock minus the aggregator's
  double clock_rtt_us = -1;          // of the sample the offset came from; < 0: not measured
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
  ProgressPacer pacer(options.pacing);

  std::vector<IsnBook> isns(num_isns);
  auto shut_down_isns = [&](std::uint64_t grace_ms) {
    // Every ISN that said hello without an error gets a shutdown and returns its stats.
    std::vector<PendingSend> sends;
    auto msg = std::make_shared<const OutgoingMessage>(
        encode_message(Control{Control::Kind::kShutdown, ""}));
    std::vector<bool> waiting(num_isns, false);
    for (std::size_t i = 0; i < num_isns; ++i) {
      if (isns[i].hello.is_null() || isns[i].hello.contains("error")) continue;
      sends.emplace_back(msg, int(i + 1), kTagControl, world);
      waiting[i] = true;
    }
    const auto until = Clock::now() + std::chrono::milliseconds(grace_ms);
    std::size_t left = std::size_t(std::count(waiting.begin(), waiting.end(), true));
    while (left > 0 && Clock::now() < until) {
      bool all_sent = true;
      for (auto& s : sends) all_sent = s.test() && all_sent;
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
      const auto now = Clock::now();
      any ? pacer.activity(now) : pacer.idle(now, until, !all_sent);
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
        pacer.idle(Clock::now(), until, false);
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

  // One clock: each ISN's steady clock against ours, from ping-pongs (NTP's estimate: the pong
  // carries the ISN's time at arrival, taken as the middle of the round trip; the sample of
  // least round trip bounds the error by half of it). Equal clocks on one host give ~0.
  for (std::size_t i = 0; i < num_isns; ++i) {
    for (std::uint64_t ping = 0; ping < 8; ++ping) {
      const auto t0 = Clock::now();
      send_blocking(encode_message(Control{Control::Kind::kClockPing, "", ping}), int(i + 1),
                    kTagControl, world);
      std::optional<Received> m;
      const auto give_up = t0 + std::chrono::seconds(2);
      while (!(m = try_receive(world, int(i + 1), kTagControl)) && Clock::now() < give_up)
        std::this_thread::yield();  // a few microseconds, and the round trip is what we measure
      const auto t2 = Clock::now();
      if (!m || !m->rejected.empty()) break;
      const Control c = decode_control(m->data());
      if (c.kind != Control::Kind::kClockPong) continue;
      const double rtt = std::chrono::duration<double, std::micro>(t2 - t0).count();
      if (isns[i].clock_rtt_us >= 0 && rtt >= isns[i].clock_rtt_us) continue;
      const double mid_us =
          std::chrono::duration<double, std::micro>((t0 + (t2 - t0) / 2).time_since_epoch())
              .count();
      isns[i].clock_offset_us = std::int64_t(double(c.value) - mid_us);
      isns[i].clock_rtt_us = rtt;
    }
  }
  auto isn_time = [&](std::size_t i, std::uint64_t isn_us) {
    return Clock::time_point(std::chrono::microseconds(std::int64_t(isn_us) - isns[i].clock_offset_us));
  };
  const double start_seconds = std::chrono::duration<double>(Clock::now() - t_start).count();

  SearchParams params = options.params;
  params.alpha = std::isnan(options.alpha) ? index_params.gs_alpha : options.alpha;
  const ShardIndex& vocabulary = vocab_index->shard(0);
  // Term IDs on the wire when every ISN's vocabulary is ours.
  const std::string our_vocabulary =
      vocabulary_fingerprint(vocabulary.manifest(), vocabulary.num_terms());
  bool send_term_ids = true;
  for (const IsnBook& b : isns)
    send_term_ids = send_term_ids && b.hello.value("vocabulary", "") == our_vocabulary;

  std::ofstream run(options.run_path);
  if (!run) throw InputError(options.run_path.string(), 0, "cannot write run file");

  QuerySource source(options, [&pacer] { pacer.notify(); });
  Batcher batcher(options.batching);
  std::mutex cache_mutex;  // admission looks up, the merge thread inserts
  ResultCache cache(options.cache_entries);
  const bool auto_depth = options.max_in_flight == 0;
  Progress bar("cluster", source.total(), "queries", options.progress);

  // Main thread's counters and samples.
  std::vector<QueryProblem> problems;
  std::uint64_t read = 0, no_known_terms = 0, unknown_tokens = 0, cache_hits = 0,
                cache_hits_by_or = 0, rejected_messages = 0, late_discarded = 0, bytes_sent = 0,
                messages_sent = 0, bytes_received = 0;
  std::vector<double> wait_ms, encode_ms, depth_samples;
  std::map<std::uint64_t, InFlightBatch> in_flight;
  std::size_t in_flight_queries = 0;
  std::atomic<std::size_t> merging_queries{0};
  std::uint64_t next_batch_id = 1, next_sequence = 0;
  LatencyModel model;
  std::mutex model_mutex;  // the merge thread measures, the main thread reads
  Clock::time_point last_batch_done{};

  // The merge thread's state: answers, stage samples, the timeline.
  std::mutex merge_mutex;
  std::condition_variable merge_ready;
  std::deque<MergeJob> merge_queue;
  bool merge_stop = false;
  std::exception_ptr merge_error;
  const auto t_run = Clock::now();
  ArrivalOrderWriter writer(run, options.run_tag);
  std::uint64_t answered = 0, empty_results = 0, answered_by_or = 0, partial_answers = 0,
                hits_written = 0, batches_with_misses = 0;
  QueryCounters counters;
  std::vector<double> latency_ms, broadcast_ms, round_trip_ms, compute_ms, gather_ms, merge_ms,
      isn_idle_ms, batch_sizes, to_isn_ms, isn_queue_ms, isn_encode_ms, from_isn_ms,
      merge_wait_ms, decode_ms, overhead_ms;
  nlohmann::json timeline = nlohmann::json::array();
  Clock::time_point previous_last_answer{};
  auto rel_ms = [&](Clock::time_point t) { return std::round(ms_between(t_run, t) * 1000) / 1000; };

  auto record_answer = [&](std::uint64_t seq, const std::string& qid, CachedAnswer&& a,
                           Clock::time_point arrival, Clock::time_point at) {
    hits_written += a.hits.size();
    if (a.hits.empty()) ++empty_results;
    ++answered;
    latency_ms.push_back(ms_between(arrival, at));
    writer.add(seq, qid, std::move(a.hits));
    bar.add(1);
  };

  auto merge_batch = [&](InFlightBatch& b) {
    const auto t_merge = Clock::now();
    bool missed = false;
    std::vector<ResultBatch> results(num_isns);
    std::vector<std::size_t> present;
    for (std::size_t i = 0; i < num_isns; ++i) {
      if (!b.messages[i] || !b.headers[i].error.empty()) {
        missed = true;
        if (!b.messages[i]) ++isns[i].batches_missed;
        continue;
      }
      try {
        results[i] = decode_result_batch(b.messages[i]->data());
      } catch (const WireError& e) {
        ++isns[i].errors;
        missed = true;
        std::cerr << me << ": from ISN rank " << i + 1 << ": " << e.what() << '\n';
        continue;
      }
      if (results[i].answers.size() != b.queries.size()) {
        ++isns[i].errors;
        missed = true;
        continue;
      }
      present.push_back(i);
    }
    const auto t_decoded = Clock::now();
    if (missed) ++batches_with_misses;
    std::vector<const ShardAnswer*> shards(present.size());
    const auto now = Clock::now();
    for (std::size_t q = 0; q < b.queries.size(); ++q) {
      for (std::size_t j = 0; j < present.size(); ++j)
        shards[j] = &results[present[j]].answers[q];
      MergedAnswer m = merge_answers(params, shards);
      const bool partial = m.partial || missed;
      counters.add(m.counters);
      if (m.answer.answered_by_or) ++answered_by_or;
      if (partial) ++partial_answers;
      const PendingQuery& pq = b.queries[q];
      if (!partial && cache.enabled()) {
        std::lock_guard lock(cache_mutex);
        cache.insert(pq.cache_key, m.answer);
      }
      record_answer(pq.sequence, pq.id, std::move(m.answer), pq.arrival, now);
    }
    const auto t_done = Clock::now();
    run.flush();

    // Stages and the timeline.
    std::uint64_t max_compute_us = 0, max_idle_us = 0;
    Clock::time_point last_result = b.sent;
    std::size_t critical = num_isns;  // the ISN whose answer came last
    double to_isn = 0, isn_queue = 0, isn_encode = 0, from_isn = 0;
    for (std::size_t i : present) {
      const ResultHeader& h = b.headers[i];
      ++isns[i].batches_answered;
      isns[i].compute_us += h.compute_us;
      isns[i].idle_us += h.idle_us;
      isns[i].fallback_seen = isns[i].fallback_seen || h.fallback_active;
      max_compute_us = std::max(max_compute_us, h.compute_us);
      max_idle_us = std::max(max_idle_us, h.idle_us);
      const IsnTimes& t = b.times[i];
      if (t.arrived >= last_result) last_result = t.arrived, critical = i;
      to_isn = std::max(to_isn, ms_between(b.sent, t.received));
      isn_queue = std::max(isn_queue, ms_between(t.received, t.start));
      isn_encode = std::max(isn_encode, ms_between(t.end, t.encoded));
      from_isn = std::max(from_isn, ms_between(t.encoded, t.arrived));
    }
    batch_sizes.push_back(double(b.queries.size()));
    broadcast_ms.push_back(ms_between(b.cut, b.all_sent ? b.sends_done : b.complete));
    round_trip_ms.push_back(ms_between(b.sent, last_result));
    compute_ms.push_back(double(max_compute_us) / 1000.0);
    gather_ms.push_back(
        std::max(0.0, ms_between(b.sent, last_result) - double(max_compute_us) / 1000.0));
    merge_ms.push_back(ms_between(t_merge, t_done));
    decode_ms.push_back(ms_between(t_merge, t_decoded));
    merge_wait_ms.push_back(ms_between(b.complete, t_merge));
    isn_idle_ms.push_back(double(max_idle_us) / 1000.0);
    if (!present.empty()) {
      to_isn_ms.push_back(to_isn);
      isn_queue_ms.push_back(isn_queue);
      isn_encode_ms.push_back(isn_encode);
      from_isn_ms.push_back(from_isn);
    }
    if (critical < num_isns) {
      // The cluster's own cost for this batch: from the cut to the merged answers, less the
      // critical ISN's compute and the time the batch queued there behind earlier batches
      // (the pipeline's overlap, not a cost).
      const IsnTimes& t = b.times[critical];
      const double own = ms_between(b.cut, t_done) - ms_between(t.start, t.end) -
                         std::max(0.0, ms_between(t.received, t.start));
      overhead_ms.push_back(std::max(0.0, own));
      // The depth model: the slowest compute, and the wire both ways without the ISN queue.
      const double service_ms = ms_between(std::max(b.sent, previous_last_answer), t.arrived);
      previous_last_answer = std::max(previous_last_answer, t.arrived);
      std::lock_guard lock(model_mutex);
      model.add(double(max_compute_us),
                1000.0 * (ms_between(b.cut, t.received) + ms_between(t.end, t.arrived) +
                          ms_between(t.arrived, t_done)),
                1000.0 * std::max(0.0, service_ms));
    }
    if (timeline.size() < options.timeline_batches) {
      nlohmann::json per_isn = nlohmann::json::array();
      for (std::size_t i = 0; i < num_isns; ++i) {
        if (!b.messages[i]) {
          per_isn.push_back({{"rank", i + 1}, {"missing", true}});
          continue;
        }
        const IsnTimes& t = b.times[i];
        per_isn.push_back({{"rank", i + 1},
                           {"received", rel_ms(t.received)},
                           {"start", rel_ms(t.start)},
                           {"end", rel_ms(t.end)},
                           {"encoded", rel_ms(t.encoded)},
                           {"arrived", rel_ms(t.arrived)}});
      }
      timeline.push_back({{"batch", b.id},
                          {"queries", b.queries.size()},
                          {"bytes_sent", b.bytes},
                          {"cut", rel_ms(b.cut)},
                          {"encoded", rel_ms(b.encoded)},
                          {"sent", rel_ms(b.sent)},
                          {"sends_done", b.all_sent ? nlohmann::json(rel_ms(b.sends_done)) : nlohmann::json()},
                          {"complete", rel_ms(b.complete)},
                          {"merge_start", rel_ms(t_merge)},
                          {"merged", rel_ms(t_done)},
                          {"isn", per_isn}});
    }
  };

  std::thread merger([&] {
    try {
      for (;;) {
        MergeJob job;
        {
          std::unique_lock lock(merge_mutex);
          merge_ready.wait(lock, [&] { return merge_stop || !merge_queue.empty(); });
          if (merge_queue.empty()) return;
          job = std::move(merge_queue.front());
          merge_queue.pop_front();
        }
        if (job.batch) {
          const std::size_t n = job.batch->queries.size();
          merge_batch(*job.batch);
          merging_queries -= n;
        } else {
          if (job.answer.answered_by_or) ++answered_by_or;
          record_answer(job.sequence, job.qid, std::move(job.answer), job.arrival, job.answered);
        }
        pacer.notify();  // the window has room again
      }
    } catch (...) {
      std::lock_guard lock(merge_mutex);
      merge_error = std::current_exception();
    }
  });
  auto to_merger = [&](MergeJob job) {
    {
      std::lock_guard lock(merge_mutex);
      merge_queue.push_back(std::move(job));
    }
    merge_ready.notify_one();
  };
  auto stop_merger = [&] {
    {
      std::lock_guard lock(merge_mutex);
      merge_stop = true;
    }
    merge_ready.notify_one();
    if (merger.joinable()) merger.join();
  };
  struct StopOnExit {
    std::function<void()> stop;
    ~StopOnExit() { stop(); }
  } stop_on_exit{stop_merger};

  auto answer_now = [&](std::uint64_t seq, std::string qid, CachedAnswer a,
                        Clock::time_point arrival) {
    MergeJob job;
    job.sequence = seq;
    job.qid = std::move(qid);
    job.answer = std::move(a);
    job.arrival = arrival;
    job.answered = Clock::now();
    to_merger(std::move(job));
  };

  std::size_t depth = auto_depth ? 2 : options.max_in_flight;
  for (;;) {
    bool progress = false;
    const auto now = Clock::now();
    if (auto_depth) {
      std::lock_guard lock(model_mutex);
      depth = model.depth(options.max_depth);
    }
    const std::size_t window = options.window > 0 ? options.window
                                                  : options.batching.batch_size * (depth + 1);

    // Admit arrived queries: resolve, answer from the cache, or queue for a batch.
    std::vector<std::pair<QueryText, Clock::time_point>> arrived;
    const std::size_t outstanding = batcher.size() + in_flight_queries + merging_queries;
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
      const std::uint64_t seq = next_sequence++;
      unknown_tokens += q.unknown_tokens;
      if (q.terms.empty()) {  // matches nothing on any shard: no broadcast needed
        ++no_known_terms;
        answer_now(seq, std::move(q.id), {}, arrival);
        continue;
      }
      PendingQuery pq;
      pq.id = std::move(q.id);
      pq.arrival = arrival;
      pq.sequence = seq;
      pq.cost = std::numeric_limits<double>::max();
      for (TermId t : q.terms) {
        pq.terms.emplace_back(vocabulary.term_string(t));
        pq.cost = std::min(pq.cost, double(vocabulary.term(t).df_global));
      }
      if (send_term_ids) pq.term_ids.assign(q.terms.begin(), q.terms.end());
      if (cache.enabled()) {
        pq.cache_key = result_cache_key(params, pq.terms);
        std::optional<CachedAnswer> hit;
        {
          std::lock_guard lock(cache_mutex);
          hit = cache.find(pq.cache_key);
        }
        if (hit) {
          ++cache_hits;
          if (hit->answered_by_or) ++cache_hits_by_or;
          hit->answered_by_or = false;  // counted here, not again by the merger
          answer_now(seq, std::move(pq.id), std::move(*hit), arrival);
          continue;
        }
      }
      batcher.add(std::move(pq));
    }

    // Cut, encode once and broadcast batches while the pipeline has room.
    while (in_flight.size() < depth && batcher.due(Clock::now(), source.exhausted())) {
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
        if (send_term_ids)
          qb.queries.push_back({pq.id, {}, pq.term_ids});
        else
          qb.queries.push_back({pq.id, pq.terms, {}});
        wait_ms.push_back(ms_between(pq.arrival, b.cut));
      }
      auto msg = std::make_shared<const OutgoingMessage>(encode_message(qb));
      b.encoded = Clock::now();
      encode_ms.push_back(ms_between(b.cut, b.encoded));
      b.bytes = msg->bytes();
      for (std::size_t i = 0; i < num_isns; ++i)
        b.sends.emplace_back(msg, int(i + 1), kTagQueryBatch, world);
      b.sent = Clock::now();
      bytes_sent += msg->bytes() * num_isns;
      messages_sent += num_isns;
      b.deadline = options.deadline_ms == 0
                       ? Clock::time_point::max()
                       : b.sent + std::chrono::milliseconds(options.deadline_ms);
      b.messages.resize(num_isns);
      b.headers.resize(num_isns);
      b.times.resize(num_isns);
      in_flight_queries += b.queries.size();
      depth_samples.push_back(double(depth));
      in_flight.emplace(b.id, std::move(b));
    }

    // Progress of the sends.
    bool sends_pending = false;
    for (auto& [id, b] : in_flight) {
      if (b.all_sent) continue;
      bool all = true;
      for (auto& s : b.sends) all = s.test() && all;
      if (all) {
        b.all_sent = true, b.sends_done = Clock::now(), b.sends.clear();
        progress = true;
      } else {
        sends_pending = true;
      }
    }

    // Receive results and route them by their header; the merge thread decodes the rest. A
    // batch already answered without this ISN drops it.
    while (auto m = try_receive(world, MPI_ANY_SOURCE, kTagResultBatch)) {
      progress = true;
      const auto arrived_at = Clock::now();
      const std::size_t i = std::size_t(m->source - 1);
      if (!m->rejected.empty() || i >= num_isns) {
        ++rejected_messages;
        std::cerr << me << ": " << (m->rejected.empty() ? "message from unknown rank" : m->rejected)
                  << '\n';
        continue;
      }
      bytes_received += m->bytes;
      ResultHeader h;
      try {
        h = decode_result_header(m->data());
      } catch (const WireError& e) {
        ++rejected_messages;
        std::cerr << me << ": from ISN rank " << m->source << ": " << e.what() << '\n';
        continue;
      }
      const auto it = in_flight.find(h.batch_id);
      if (it == in_flight.end() || it->second.messages[i]) {
        ++late_discarded;
        ++isns[i].late_results;
        continue;
      }
      if (!h.error.empty()) {
        ++isns[i].errors;
        std::cerr << me << ": ISN rank " << m->source << " could not answer batch " << h.batch_id
                  << ": " << h.error << '\n';
      }
      InFlightBatch& b = it->second;
      b.times[i] = {isn_time(i, h.received_us), isn_time(i, h.start_us), isn_time(i, h.end_us),
                    isn_time(i, h.encoded_us), arrived_at};
      b.headers[i] = std::move(h);
      b.messages[i] = std::move(*m);
      ++b.received;
    }

    // Complete batches: all ISNs answered, or the deadline passed. They go to the merge thread
    // at once, which frees their place in the pipeline.
    const auto now2 = Clock::now();
    auto due = Clock::time_point::max();
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      InFlightBatch& b = it->second;
      if (b.received == num_isns || now2 >= b.deadline) {
        if (b.received < num_isns)
          std::cerr << fmt::format(
              "{}: batch {} missed its deadline of {} ms on {} ISN(s); its "
              "{} queries are answered partially\n",
              me, b.id, options.deadline_ms, num_isns - b.received, b.queries.size());
        b.complete = now2;
        b.sends.clear();  // a send to an ISN that missed the deadline stays with MPI
        in_flight_queries -= b.queries.size();
        merging_queries += b.queries.size();
        last_batch_done = now2;
        MergeJob job;
        job.batch = std::move(b);
        to_merger(std::move(job));
        it = in_flight.erase(it);
        progress = true;
      } else {
        due = std::min(due, b.deadline);
        ++it;
      }
    }
    {
      std::lock_guard lock(merge_mutex);
      if (merge_error) std::rethrow_exception(merge_error);
    }

    if (source.exhausted() && batcher.empty() && in_flight.empty()) break;
    const auto now3 = Clock::now();
    if (progress) {
      pacer.activity(now3);
      continue;
    }
    // Nothing happened: when is something next due? The oldest batch's answers (the ISNs work
    // in order: one service time after the later of its send and the previous batch's
    // answers), a batch to cut by wait time, a scheduled arrival, a deadline.
    // Only while the pipeline is thin: with two or more batches in flight every ISN has work
    // queued, a late receive costs nothing, and each early wake-up takes a core from the
    // engines (measured on 2 cores; NOTES-cluster.md). The automatic depth is chosen from
    // latencies that include these late receives.
    if (in_flight.size() == 1) {
      double service_us = 0;
      {
        std::lock_guard lock(model_mutex);
        service_us = model.service_us;
      }
      const InFlightBatch& oldest = in_flight.begin()->second;
      const auto service = std::chrono::microseconds(std::int64_t(service_us));
      // A quarter of a service time early: answers come with the service time's variance, and
      // hot polling until then costs a few wake-ups, not a core.
      const auto predicted = std::max(oldest.sent, last_batch_done) + service * 3 / 4;
      // Overdue by more than two service times: a slow ISN; poll like an idle rank until its
      // answer or its deadline.
      const auto give_up = predicted + 2 * service + std::chrono::milliseconds(1);
      if (now3 < give_up) due = std::min(due, predicted);
    }
    if (!batcher.empty() && in_flight.size() < depth)  // a cut by wait time needs room
      due = std::min(due, batcher.oldest_arrival() +
                              std::chrono::microseconds(options.batching.max_wait_us));
    due = std::min(due, source.next_arrival(t_run));
    pacer.idle(now3, due, sends_pending);
  }
  stop_merger();
  {
    std::lock_guard lock(merge_mutex);
    if (merge_error) std::rethrow_exception(merge_error);
  }
  bar.finish();
  const double run_seconds = std::chrono::duration<double>(Clock::now() - t_run).count();
  run.close();
  if (!run) throw Error("write failed: " + options.run_path.string());
  if (writer.waiting() > 0)
    throw Error(fmt::format("{} answers never reached the run file (a sequence gap)",
                            writer.waiting()));
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

  answered_by_or += cache_hits_by_or;
  nlohmann::json isn_json = nlohmann::json::array();
  nlohmann::json offsets = nlohmann::json::array();
  for (std::size_t i = 0; i < num_isns; ++i) {
    offsets.push_back({{"rank", i + 1},
                       {"offset_us", isns[i].clock_offset_us},
                       {"rtt_us", isns[i].clock_rtt_us}});
    const double isn_compute = isns[i].compute_us / 1e6;
    isn_json.push_back(
        {{"rank", i + 1},
         {"hello", isns[i].hello},
         {"stats", isns[i].stats},
         {"batches_answered", isns[i].batches_answered},
         {"batches_missed", isns[i].batches_missed},
         {"late_results_discarded", isns[i].late_results.load()},
         {"errors", isns[i].errors},
         {"compute_seconds", isn_compute},
         {"idle_seconds", isns[i].idle_us / 1e6},
         {"busy_fraction", run_seconds > 0 ? isn_compute / run_seconds : 0.0},
         {"fallback_seen", isns[i].fallback_seen},
         {"stuck_at_shutdown", std::find(stuck.begin(), stuck.end(), int(i + 1)) != stuck.end()}});
  }
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
        {"depth", auto_depth ? "auto" : "fixed"},
        {"max_depth", options.max_depth},
        {"window", options.window},
        {"qps", options.qps},
        {"deadline_ms", options.deadline_ms},
        {"cache_entries", options.cache_entries}}},
      {"pipeline_depth", summary(depth_samples)},
      {"depth_model_us",
       {{"isn_compute", model.compute_us},
        {"overhead", model.overhead_us},
        {"service", model.service_us}}},
      {"batches",
       {{"count", batch_sizes.size()},
        {"size", summary(batch_sizes)},
        {"with_missing_isns", batches_with_misses}}},
      {"stages_ms",
       {{"batching_wait_per_query", summary(wait_ms)},
        {"encode", summary(encode_ms)},
        {"broadcast", summary(broadcast_ms)},
        {"to_isn", summary(to_isn_ms)},
        {"isn_queue", summary(isn_queue_ms)},
        {"isn_compute_max", summary(compute_ms)},
        {"isn_idle_max", summary(isn_idle_ms)},
        {"isn_encode", summary(isn_encode_ms)},
        {"from_isn", summary(from_isn_ms)},
        {"round_trip", summary(round_trip_ms)},
        {"gather_overhead", summary(gather_ms)},
        {"merge_wait", summary(merge_wait_ms)},
        {"decode", summary(decode_ms)},
        {"merge", summary(merge_ms)},
        {"aggregator_overhead", summary(overhead_ms)}}},
      {"wire",
       {{"term_ids", send_term_ids},
        {"messages_sent", messages_sent},
        {"bytes_sent", bytes_sent},
        {"bytes_received", bytes_received}}},
      {"progress", pacer.stats()},
      {"run_file_order", {{"order", "arrival"}, {"max_answers_waiting", writer.max_waiting()}}},
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
      {"timeline",
       {{"clock", "aggregator steady clock, ms since the run started"},
        {"isn_clocks", offsets},
        {"batches", timeline}}},
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
