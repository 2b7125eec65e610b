#include "aggregator/aggregator.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "aggregator/admission_resolver.hpp"
#include "aggregator/aggregator_metrics.hpp"
#include "aggregator/batch_merger.hpp"
#include "aggregator/in_flight_batches.hpp"
#include "aggregator/isn_roster.hpp"
#include "aggregator/pipeline_depth_model.hpp"
#include "aggregator/query_source.hpp"
#include "common/index_format.hpp"
#include "common/metrics.hpp"
#include "common/progress.hpp"
#include "common/ranker/ranker_mix.hpp"
#include "common/shard_index.hpp"
#include "common/term_dictionary.hpp"
#include "common/thread_placement.hpp"
#include "common/tokenizer.hpp"
#include "common/wire/mpi_transport.hpp"

namespace gpusearch {

namespace {

using Clock = AggregatorClock;

// The index: its shard count must match the ISNs, and shard 0's lexicon (every shard carries
// the global vocabulary) resolves queries. Checksums are the ISNs' job. Returns null and sets
// `error` when it cannot serve.
std::unique_ptr<Index> open_vocabulary(const AggregatorOptions& options, std::size_t num_isns,
                                       IndexParams& params, std::string& error) {
  try {
    const RootManifest root = read_root_manifest(options.index_dir / kRootManifestName);
    params = root.params;
    if (root.shards.size() != num_isns) {
      error = fmt::format(
          "the index {} has {} shard(s) but the job has {} ISN(s); start one ISN per shard "
          "(launch/cluster.sh --isns {}) or re-shard it (gpusearch partition --shards {})",
          options.index_dir.string(), root.shards.size(), num_isns, root.shards.size(), num_isns);
      return nullptr;
    }
    OpenOptions oo;
    oo.verify_checksums = false;
    return std::make_unique<Index>(Index::open_shard(options.index_dir, 0, oo));
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
}

// The second stage's setup: each query's ranker, and the coordinator of the ISNs' caches when
// the policy is coordinated. Throws InputError naming the flag or store.json.
struct AggregatorSecondStage {
  ranker::RankerAssignment assignment;
  std::unique_ptr<RankerCacheCoordinator> coordinator;  // null: per-ISN LRU
  std::size_t rankers_in_store = 0;
};

std::unique_ptr<AggregatorSecondStage> make_second_stage(const AggregatorRanking& r) {
  if (!r.enabled()) {
    if (!r.ranker.empty() || !std::isnan(r.mix_exponent) || r.candidates > 0)
      throw InputError("--ranker-store", 0,
                       "--ranker, --ranker-mix and --candidates need a ranker store");
    return nullptr;
  }
  if (r.candidates > kMaxCandidates)
    throw InputError("--candidates", 0,
                     fmt::format("{} is above the limit of {}", r.candidates, kMaxCandidates));
  auto s = std::make_unique<AggregatorSecondStage>();
  ranker::StoreIndex store = ranker::read_store_index(r.store_dir);
  s->rankers_in_store = store.rankers.size();
  s->assignment.default_ranker = r.ranker;
  if (!std::isnan(r.mix_exponent)) {
    if (!r.ranker.empty())
      throw InputError("--ranker-mix", 0, "give --ranker or --ranker-mix, not both");
    std::vector<std::string> names;
    for (const auto& e : store.rankers) names.push_back(e.name);
    if (names.empty())
      throw InputError(store.index_file().string(), 0, "--ranker-mix: the store lists no rankers");
    s->assignment.mix = ranker::ZipfRankerMix(std::move(names), r.mix_exponent, r.mix_seed);
  }
  if (r.policy == RankerCachePolicy::kCoordinated)
    s->coordinator = std::make_unique<RankerCacheCoordinator>(std::move(store), r.cache_bytes);
  return s;
}

}  // namespace

ClosedLoopAdmission parse_closed_loop_admission(std::string_view name) {
  if (name == "just-in-time") return ClosedLoopAdmission::kJustInTime;
  if (name == "window") return ClosedLoopAdmission::kWindow;
  throw InputError("--admission", 0,
                   "unknown admission '" + std::string(name) + "' (just-in-time or window)");
}

JustInTimeCut parse_just_in_time_cut(std::string_view name) {
  if (name == "first-answer") return JustInTimeCut::kFirstAnswer;
  if (name == "predicted-finish") return JustInTimeCut::kPredictedFinish;
  if (name == "all-answers") return JustInTimeCut::kAllAnswers;
  throw InputError("--admission-cut-on", 0,
                   "unknown cut '" + std::string(name) +
                       "' (first-answer, predicted-finish or all-answers)");
}
std::string_view to_string(JustInTimeCut c) {
  switch (c) {
    case JustInTimeCut::kFirstAnswer: return "first-answer";
    case JustInTimeCut::kPredictedFinish: return "predicted-finish";
    case JustInTimeCut::kAllAnswers: return "all-answers";
  }
  return "?";
}

std::string_view to_string(ClosedLoopAdmission a) {
  return a == ClosedLoopAdmission::kJustInTime ? "just-in-time" : "window";
}

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
  wire::ProgressPacer pacer(options.pacing);

  // Start: the vocabulary, every ISN's hello, their clocks.
  IsnRoster isns(world, num_isns, pacer, me);
  std::string setup_error;
  IndexParams index_params;
  std::unique_ptr<Index> vocab_index =
      open_vocabulary(options, num_isns, index_params, setup_error);
  std::unique_ptr<AggregatorSecondStage> second;
  try {
    second = make_second_stage(options.ranking);
  } catch (const std::exception& e) {
    if (setup_error.empty()) setup_error = e.what();
  }
  isns.await_hellos(options.start_timeout_ms, setup_error);
  if (!setup_error.empty()) {
    std::cerr << me << ": error: " << setup_error << '\n';
    const auto stuck = isns.shut_down(options.shutdown_grace_ms);
    outcome.exit_code = 1;
    outcome.abort_job = !stuck.empty();
    return outcome;
  }
  isns.print_hellos(std::cerr);
  isns.sync_clocks();
  const double start_seconds = std::chrono::duration<double>(Clock::now() - t_start).count();

  SearchParams params = options.params;
  params.alpha = std::isnan(options.alpha) ? index_params.gs_alpha : options.alpha;
  // With a second stage every ISN's first stage keeps the top `candidates` (wire params).
  if (second)
    params.candidates =
        options.ranking.candidates > 0 ? options.ranking.candidates : kDefaultCandidates;
  const ShardIndex& vocabulary = vocab_index->shard(0);
  // Term IDs on the wire when every ISN's vocabulary is ours.
  const bool send_term_ids = isns.all_share_vocabulary(
      wire::vocabulary_fingerprint(vocabulary.manifest(), vocabulary.num_terms()));
  // Term look-ups in O(1) on the MPI thread (a binary search of the lexicon was a third of it).
  const TermDictionary dictionary(vocabulary);

  std::ofstream run(options.run_path);
  if (!run) throw InputError(options.run_path.string(), 0, "cannot write run file");

  std::unique_ptr<QuerySource> source =
      make_query_source(options, params, [&pacer] { pacer.notify(); });
  Batcher batcher(options.batching);
  RankerCacheCoordinator* coordinator = second ? second->coordinator.get() : nullptr;
  batcher.group_by_ranker(coordinator);
  SharedResultCache cache(options.cache_entries);
  // Term strings travel only to ISNs of another vocabulary, and key the result cache.
  const bool need_term_strings = !send_term_ids || cache.enabled();
  const bool auto_depth = options.max_in_flight == 0;
  Progress bar("cluster", source->total(), "queries", options.progress);
  AdmissionStats admission;
  InFlightBatches in_flight(world, isns, options.deadline_ms, me, options.isn_dead_after);
  const auto t_run = Clock::now();
  // Where the aggregator's CPU goes during the run (the metrics' cpu_seconds).
  const double process_cpu_at_run = metrics::process_cpu_seconds();
  const double main_cpu_at_run = metrics::thread_cpu_seconds();
  const double main_run_delay_at_run = metrics::thread_run_delay_seconds();
  ThreadPlacement merge_placement;  // with the front end's event loop (--rpc-thread CPU)
  if (!options.front_end.listen.empty()) merge_placement.cpu = options.front_end.loop_thread.cpu;
  // Closed-loop replay admits a batch's queries when it is time to cut it (just in time), unless
  // a --window was asked for.
  const bool just_in_time = source->closed_loop() && options.window == 0 &&
                            options.admission == ClosedLoopAdmission::kJustInTime;
  BatchMerger merger({&run, options.run_tag, options.timeline_batches, t_run, me, source.get(),
                      merge_placement, just_in_time ? options.admission_quantile : 0.0,
                      options.pacing.handoff_hot(),
                      just_in_time && options.admission_ahead ? kAdmissionAheadQuantile : 0.0},
                     isns, cache, bar, [&pacer] { pacer.notify(); });
  std::uint64_t next_sequence = 0;

  std::size_t depth = auto_depth ? 2 : options.max_in_flight;
  std::vector<Clock::time_point> sent_times;  // of the batches in flight, oldest first
  // Just in time: what admitting a query costs (reading, resolving, queueing it; an exponential
  // mean, us): a batch's queries are admitted that much before it should leave, so that the
  // ISN does not wait for their admission (about 2 us a query on the H100 host: 2 ms for 1,024).
  double admission_us_per_query = 0;
  AdmissionResolver resolver(
      dictionary, options.limits,
      options.admission_threads > 0
          ? options.admission_threads
          : AdmissionResolver::auto_threads(options.batching.batch_size, allowed_cpus().size()));
  std::vector<ArrivedQuery> arrived;     // each round's, reused
  std::vector<ResolvedQuery> resolved;  // theirs, resolved
  double resolve_seconds = 0;           // in resolver.resolve (the metrics' resolve_us_per_query)
  // Just in time: how far apart the ISNs' answers to a batch come back (the first to the last;
  // an exponential mean, us): the next batch's cut can fire at the first (JustInTimeCut).
  double answer_spread_us = 0;
  // The main thread's own work between polls, by kind (seconds over the run; the metrics'
  // main_thread_work_seconds): how long it could not pick up an answer, and doing what.
  struct {
    double admission = 0, cut_and_send = 0, receive = 0, complete = 0;
  } work;
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  std::size_t batches_done = 0;
  for (;;) {
    bool progress = false;
    const auto now = Clock::now();
    // Just in time: when the next batch should leave (now or earlier: at once).
    auto next_cut = Clock::time_point::min();
    auto admission_target = Clock::time_point::min();  // when the next batch's queries are due
    {
      const LatencyModel model = merger.model();
      if (auto_depth) depth = model.depth(options.max_depth);
      // SLA-driven cuts: a batch takes about the slowest ISN's compute plus the round trip's
      // overhead from its cut to its answers.
      batcher.set_service_time(
          std::chrono::microseconds(std::int64_t(model.compute_us + model.overhead_us)));
      if (just_in_time) {
        in_flight.sent_times(sent_times);
        const double offset_us = options.admission_lag * model.compute_us;
        const auto last_done = in_flight.last_batch_done();
        next_cut = model.just_in_time_cut<Clock::time_point>(now, last_done, sent_times, offset_us);
        const Clock::time_point aimed_cut = next_cut;
        // predicted-finish: the cut that lands the batch at the slowest ISN as it finishes at
        // its mean compute, not its quantile.
        auto landing_at_mean = Clock::time_point::min();
        if (options.cut_on == JustInTimeCut::kPredictedFinish) {
          LatencyModel at_mean = model;
          at_mean.compute_aim_us = 0;
          landing_at_mean =
              at_mean.just_in_time_cut<Clock::time_point>(now, last_done, sent_times, offset_us);
        }
        // Some ISN has answered every batch in flight and idles from now on (JustInTimeCut).
        if (options.cut_on != JustInTimeCut::kAllAnswers && in_flight.newest_answered_by_one())
          next_cut = options.cut_on == JustInTimeCut::kFirstAnswer
                         ? now
                         : std::min(next_cut, landing_at_mean);
        // --admission-ahead: the queries are due by the earliest the cut can fire (the answers'
        // early return, LatencyModel::expected_cut), not by the aim's cut, which comes later than
        // the answers in most batches.
        admission_target = next_cut;
        if (options.admission_ahead)
          admission_target = std::min(
              next_cut,
              model.expected_cut<Clock::time_point>(
                  now, last_done, sent_times, aimed_cut,
                  options.cut_on == JustInTimeCut::kAllAnswers ? 0.0 : answer_spread_us,
                  landing_at_mean));
      }
    }
    std::size_t room = 0;
    auto admit_at = Clock::time_point::min();
    if (just_in_time) {
      // One batch's queries, once it is time to admit them and the pipeline has room.
      const std::size_t missing = batcher.size() < options.batching.batch_size
                                      ? options.batching.batch_size - batcher.size()
                                      : 0;
      admit_at =
          admission_target -
          std::chrono::duration_cast<Clock::duration>(
              std::chrono::duration<double, std::micro>(admission_us_per_query * double(missing)));
      // The merge thread must keep up too: answered batches it has not merged yet count
      // against the depth. Without that, a starved merge thread (a loaded 2-core machine) let
      // admission run ahead of the result cache: a repeat arrived before its original's answer
      // was cached (mpi.cluster.exact_1_isn saw 0 cache hits where 60-81 are usual).
      const bool merger_keeps_up = merger.queries() < options.batching.batch_size * depth;
      const bool pipeline_has_room = in_flight.size() < depth && merger_keeps_up;
      if (admit_at <= now && pipeline_has_room) room = missing;
      // The resolver's helpers wake shortly before (aggregator/admission_resolver.hpp): only
      // for a batch that is missing queries and has room to go. A full pipeline's next
      // admission waits for an answer, not for admit_at; expecting it at admit_at had the
      // helpers poll until they gave up.
      if (missing > 0 && pipeline_has_room && !source->exhausted())
        resolver.expect_batch_at(std::max(admit_at, now));
    } else {
      const std::size_t window =
          options.window > 0 ? options.window : options.batching.batch_size * (depth + 1);
      const std::size_t outstanding = batcher.size() + in_flight.queries() + merger.queries();
      room = outstanding < window ? window - outstanding : 0;
    }

    // Admit arrived queries: resolve, answer from the cache, or queue for a batch.
    arrived.clear();
    const auto t_admit = Clock::now();
    source->poll(t_run, now, room, arrived);
    for (auto& p : source->take_problems()) admission.skip(std::move(p));
    // Resolving (the dictionary's look-ups, the terms' dfs) on --admission-threads threads;
    // the rest in arrival order here.
    const auto t_resolve = Clock::now();
    resolver.resolve(arrived, source->name(), resolved);
    if (!arrived.empty()) resolve_seconds += seconds_since(t_resolve);
    for (std::size_t i = 0; i < arrived.size(); ++i) {
      ArrivedQuery& a = arrived[i];
      progress = true;
      ++admission.read;
      const Clock::time_point arrival = a.arrival;
      if (!resolved[i].ok) {
        if (a.ticket != 0) source->rejected(a.ticket, resolved[i].problem);
        admission.skip(std::move(resolved[i].problem));
        continue;
      }
      Query& q = resolved[i].query;
      // The query's ranker: its own (third column), else --ranker, else the mix's draw.
      std::string ranker = second ? second->assignment.for_query(q.id, q.ranker) : std::string();
      const std::uint64_t seq = next_sequence++;
      admission.unknown_tokens += q.unknown_tokens;
      if (q.terms.empty()) {  // matches nothing on any shard: no broadcast needed
        ++admission.no_known_terms;
        merger.submit_answer(seq, a.ticket, std::move(q.id), {}, arrival);
        continue;
      }
      PendingQuery pq;
      pq.id = std::move(q.id);
      pq.arrival = arrival;
      pq.sequence = seq;
      pq.params = a.params.value_or(params);
      pq.params.candidates = params.candidates;  // the cluster's second stage, whatever the source
      pq.deadline = a.deadline;
      pq.ticket = a.ticket;
      pq.ranker = std::move(ranker);
      pq.cost = resolved[i].cost;
      if (need_term_strings)
        for (TermId t : q.terms) pq.terms.emplace_back(vocabulary.term_string(t));
      if (send_term_ids) pq.term_ids = std::move(q.terms);  // TermId is the wire's uint32
      if (cache.enabled()) {
        pq.cache_key = result_cache_key(pq.params, pq.terms, pq.ranker);
        if (std::optional<CachedAnswer> hit = cache.find(pq.cache_key)) {
          ++admission.cache_hits;
          if (hit->answered_by_or) ++admission.cache_hits_by_or;
          hit->answered_by_or = false;  // counted here, not again by the merger
          merger.submit_answer(seq, pq.ticket, std::move(pq.id), std::move(*hit), arrival);
          continue;
        }
      }
      batcher.add(std::move(pq));
    }

    if (!arrived.empty()) {
      const double admitted_in = seconds_since(t_admit);
      work.admission += admitted_in;
      if (just_in_time) {
        const double us = 1e6 * admitted_in / double(arrived.size());
        admission_us_per_query =
            admission_us_per_query == 0 ? us : 0.8 * admission_us_per_query + 0.2 * us;
      }
    }

    // Cut, encode once and broadcast batches while the pipeline has room (just in time: once
    // it is time for the batch to leave).
    while (in_flight.size() < depth && batcher.due(Clock::now(), source->exhausted()) &&
           (!just_in_time || Clock::now() >= next_cut)) {
      progress = true;
      const auto cut = Clock::now();
      std::vector<PendingQuery> batch = batcher.cut();
      RankerCachePlan plan;
      if (coordinator) {
        // The batch's rankers in the order the ISNs rank them (first appearance).
        std::vector<std::string> rankers;
        for (const PendingQuery& q : batch)
          if (!q.ranker.empty()) rankers.push_back(q.ranker);
        plan =
            coordinator->plan(rankers, [&](std::string_view r) { return batcher.waiting_for(r); });
      }
      in_flight.broadcast(std::move(batch), cut, send_term_ids, plan);
      work.cut_and_send += seconds_since(cut);
      admission.depth_samples.add(double(depth));
    }

    bool sends_pending = false;
    progress = in_flight.test_sends(sends_pending) || progress;
    const auto t_receive = Clock::now();
    if (in_flight.receive()) {
      progress = true;
      work.receive += seconds_since(t_receive);
    }

    // Complete batches: all ISNs answered, or the deadline passed. They go to the merge thread
    // at once, which frees their place in the pipeline.
    auto due = Clock::time_point::max();
    progress = in_flight.complete(
                   Clock::now(),
                   [&](InFlightBatch&& b) {
                     const double spread = answer_spread_us_of(b);
                     answer_spread_us = batches_done++ == 0
                                            ? spread
                                            : 0.8 * answer_spread_us + 0.2 * spread;
                     const auto t_complete = Clock::now();
                     merger.submit(std::move(b));
                     work.complete += seconds_since(t_complete);
                   },
                   due) ||
               progress;
    merger.rethrow_if_failed();

    if (source->exhausted() && batcher.empty() && in_flight.empty()) break;
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
    // Just in time there is at most about one batch queued per ISN, and a late receive delays
    // the answer's merge: wake for the oldest answer at any depth.
    if (in_flight.size() == 1 || (just_in_time && !in_flight.empty())) {
      const double service_us = merger.model().service_us;
      const InFlightBatch& oldest = in_flight.oldest();
      const auto service = std::chrono::microseconds(std::int64_t(service_us));
      // A quarter of a service time early: answers come with the service time's variance, and
      // hot polling until then costs a few wake-ups, not a core.
      // Just in time, up to half of one (at most 1 ms more): a late receive there is the next
      // batch's late send, and a batch's compute varies by about +-50% (the CPU engine's
      // batches of 64 on the H100 host); the bound keeps large batches' hot polling from taking
      // a small machine's cores.
      const auto predicted =
          std::max(oldest.sent, in_flight.last_batch_done()) +
          (just_in_time ? std::max(service / 2, service * 3 / 4 - std::chrono::microseconds(1000))
                        : service * 3 / 4);
      // Overdue by more than two service times: a slow ISN; poll like an idle rank until its
      // answer or its deadline.
      const auto give_up = predicted + 2 * service + std::chrono::milliseconds(1);
      if (now3 < give_up) due = std::min(due, predicted);
      // The merge thread polls for them too, from a little before their expected time (not
      // this thread's early start: on a small machine a poller takes an engine's core).
      const auto expected = std::max(oldest.sent, in_flight.last_batch_done()) + service;
      const auto lead = std::min<Clock::duration>(
          service / 4, std::chrono::microseconds(options.pacing.spin_us));
      merger.expect_answers(std::max(predicted, expected - lead), give_up);
    } else {
      merger.expect_answers(Clock::time_point::max(), Clock::time_point::min());
    }
    // A cut by wait or deadline needs room (just in time, the batch's time to leave decides).
    if (!just_in_time && !batcher.empty() && in_flight.size() < depth)
      due = std::min(due, batcher.next_due());
    if (just_in_time && in_flight.size() < depth) {  // the next batch's admission, or its cut
      if (!source->exhausted() && batcher.size() < options.batching.batch_size)
        due = std::min(due, std::max(admit_at, now3));
      else if (!batcher.empty())
        due = std::min(due, std::max(next_cut, now3));
    }
    due = std::min(due, source->next_arrival(t_run));
    pacer.idle(now3, due, sends_pending, sends_pending);
  }
  merger.stop();
  bar.finish();
  const double run_seconds = std::chrono::duration<double>(Clock::now() - t_run).count();
  run.close();
  if (!run) throw Error("write failed: " + options.run_path.string());
  if (merger.writer().waiting() > 0)
    throw Error(fmt::format("{} answers never reached the run file (a sequence gap)",
                            merger.writer().waiting()));
  for (auto& p : source->take_problems()) admission.skip(std::move(p));
  const auto& problems = admission.problems;
  for (std::size_t i = 0; i < problems.size() && i < 20; ++i)
    std::cerr << me << ": skipped " << problems[i].message() << '\n';
  if (admission.skipped > 20)
    std::cerr << me << ": ... and " << admission.skipped - 20 << " more\n";

  const auto stuck = isns.shut_down(options.shutdown_grace_ms);
  for (int r : stuck)
    std::cerr << fmt::format(
        "{}: ISN rank {} did not answer the shutdown within {} ms; the job "
        "will end with MPI_Abort\n",
        me, r, options.shutdown_grace_ms);

  outcome.metrics = aggregator_metrics({options, params, admission, in_flight, merger, isns, cache,
                                        pacer.stats(), send_term_ids, start_seconds, run_seconds,
                                        stuck, batcher.deadline_cuts(), source->stats()});
  outcome.metrics["merge_handoff"] = merger.handoff_stats();  // the thread has stopped
  {
    const double process = metrics::process_cpu_seconds() - process_cpu_at_run;
    const double main_thread = metrics::thread_cpu_seconds() - main_cpu_at_run;
    const double merge_thread = merger.thread_cpu_seconds();
    outcome.metrics["cpu_seconds"] = {
        {"process", process},
        {"main_thread", main_thread},  // admission, batching and MPI progress
        // ... and its time runnable without a core (a late receive that was not its own work)
        {"main_thread_run_delay", metrics::thread_run_delay_seconds() - main_run_delay_at_run},
        {"merge_thread", merge_thread},
        {"other_threads", std::max(0.0, process - main_thread - merge_thread)},
        {"run_seconds", run_seconds}};
    // Wall seconds of the main thread's own work: admitting queries (reading, resolving,
    // batching), cutting and posting batches, receiving answers (rounds that received one),
    // handing complete batches to the merge thread. The rest of the run it polled or slept.
    outcome.metrics["main_thread_work_seconds"] = {{"admission", work.admission},
                                                   {"cut_and_send", work.cut_and_send},
                                                   {"receive", work.receive},
                                                   {"complete", work.complete}};
  }
  outcome.metrics["admission"] = {
      {"mode", just_in_time            ? std::string(to_string(ClosedLoopAdmission::kJustInTime))
               : source->closed_loop() ? std::string(to_string(ClosedLoopAdmission::kWindow))
                                       : std::string("on arrival")},
      {"lag", options.admission_lag},
      {"cut_on", std::string(to_string(options.cut_on))},
      {"ahead", options.admission_ahead},
      {"ahead_quantile", options.admission_ahead ? kAdmissionAheadQuantile : 0.0},
      {"answer_spread_us", answer_spread_us},
      {"threads", resolver.threads()},
      {"threads_auto", options.admission_threads == 0},
      {"quantile", just_in_time ? options.admission_quantile : 0.0},
      {"us_per_query", admission_us_per_query},
      {"resolve_us_per_query",
       admission.read > 0 ? 1e6 * resolve_seconds / double(admission.read) : 0.0},
      {"helpers", [&] {
         const AdmissionResolver::HelperStats h = resolver.helper_stats();
         return nlohmann::json{{"split_batches", h.split_batches},
                               {"chunks", h.chunks},
                               {"helper_chunks", h.helper_chunks},
                               {"batches_helped", h.batches_helped},
                               {"poll_seconds", h.helper_poll_seconds},
                               {"wakeups", h.helper_wakeups}};
       }()}};
  if (second)
    outcome.metrics["second_stage"] =
        ranker_cache_metrics(options.ranking, params.candidates, second->rankers_in_store,
                             coordinator, in_flight, isns, merger.stats().ranker_fallbacks);
  if (!options.metrics_path.empty()) {
    std::ofstream m(options.metrics_path);
    m << outcome.metrics.dump(2) << '\n';
    if (!m) throw Error("cannot write " + options.metrics_path.string());
  }
  // A rank still dead at the end did not answer the shutdown either: it is among `stuck`, and
  // the job ends with MPI_Abort (exit 3), as for a stuck ISN.
  outcome.abort_job = !stuck.empty();
  outcome.exit_code = stuck.empty() ? 0 : 3;
  return outcome;
}

}  // namespace gpusearch
