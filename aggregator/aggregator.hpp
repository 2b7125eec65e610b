// The aggregator process (rank 0 of the cluster): reads queries (a file, or standard input),
// resolves them against the index's vocabulary, forms batches by size and wait time (optionally
// by cost bucket), broadcasts each batch to every ISN with nonblocking sends while keeping
// several batches in flight, gathers each ISN's per-query top-k, merges them exactly as the
// in-process path does (merge_shard_results), answers repeats from an LRU result cache, and
// writes a TREC run and a metrics JSON.
//
// Deadlines: an ISN that has not answered a batch by --deadline-ms after its broadcast is left
// out of it: the batch's queries are answered from the other ISNs, marked partial, counted and
// never cached; its late message is received and dropped by batch id. Nothing waits on an MPI
// call that a stuck peer could block: every receive is polled (MPI_Iprobe), paced by
// common/wire/progress_pacer.hpp. At shutdown the ISNs get --shutdown-grace-ms to return their
// stats; a rank that does not is reported and the job ends with MPI_Abort (exit code 3) after
// the run and metrics are written.
//
// Threads: the main thread does every MPI call (admission, batching, encoding once, the
// broadcast, receiving and routing results by their O(1) header); a merge thread decodes the
// results of each completed batch, merges them (aggregator/kway_merge.hpp), fills the result
// cache and writes answers in arrival order (aggregator/arrival_order_writer.hpp), off the
// receive path. Pipeline depth: with --max-in-flight 0 (the default) the number of batches in
// flight follows the measured latencies (enough that an ISN has its next batch before it
// finishes the current one), between 1 and --max-depth; a closed-loop replay admits each
// batch's queries just in time (ClosedLoopAdmission below) unless --admission window or --window
// asks for a window of queries admitted ahead. Every batch's life (cut, encoded, sent,
// at each ISN received / started / finished / encoded, back, merged) goes into the metrics'
// timeline on the aggregator's clock; ISN clocks are mapped onto it with an offset measured at
// start (ping-pong, the sample of least round trip).
#pragma once

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "aggregator/batcher.hpp"
#include "aggregator/front_end_options.hpp"
#include "aggregator/ranker_cache_coordinator.hpp"
#include "common/query.hpp"
#include "common/search_result.hpp"
#include "common/wire/progress_pacer.hpp"

namespace gpusearch {

// Two-stage ranking (issue 12): which ranker each query gets, and how the ISNs' ranker caches
// are run. The ISNs get the same flags (launch/cluster.sh passes them to both).
struct AggregatorRanking {
  std::filesystem::path store_dir;  // empty: one stage
  std::string ranker;               // every query without its own (the TSV's third column)
  double mix_exponent = NAN;        // a Zipf mix over the store's rankers (NaN: none)
  std::uint64_t mix_seed = 1;
  std::uint32_t candidates = 0;   // per shard; 0: kDefaultCandidates
  std::uint64_t cache_bytes = 0;  // each ISN's ranker cache (0: unbounded)
  RankerCachePolicy policy = RankerCachePolicy::kCoordinated;
  bool enabled() const { return !store_dir.empty(); }
};

// How a closed-loop replay (a query file without --qps) admits its queries. Either way a query's
// latency runs from its admission.
enum class ClosedLoopAdmission {
  // A batch's queries are admitted when it is cut, and it is cut so that it reaches the
  // slowest ISN as that ISN finishes the batches ahead of it (LatencyModel::just_in_time_cut),
  // or earlier once answers come back (JustInTimeCut): the ISNs stay busy and few batches wait
  // behind another.
  kJustInTime,
  // Up to --window queries admitted ahead; batches cut whenever the pipeline has room (they
  // queue at the ISNs: the most throughput for a fixed depth, each query waits for those ahead).
  kWindow,
};
ClosedLoopAdmission parse_closed_loop_admission(std::string_view name);  // throws InputError
std::string_view to_string(ClosedLoopAdmission a);

// Just in time, once some ISNs have answered the batches ahead and others not: when the next
// batch is cut. An ISN that has answered idles until the next batch reaches it; one still
// computing finds it queued and starts it without idling, but its queries then wait behind the
// batch ahead. So cutting at the first answer gives throughput (a node's ISNs finish a batch
// about 0.8 ms apart at batch 1,024: 5% of a cycle) and costs latency where the round trip is
// short against that spread (batch 64). NOTES-cluster.md, session 43.
enum class JustInTimeCut {
  kFirstAnswer,      // at the first ISN's answer
  kPredictedFinish,  // from the first answer on, timed to reach the slowest ISN as it is
                     // predicted to finish (its mean compute), not its high quantile
  kAllAnswers,       // only once every ISN has answered (or at the aim)
};
JustInTimeCut parse_just_in_time_cut(std::string_view name);  // throws InputError
std::string_view to_string(JustInTimeCut c);

// --admission-ahead on: the next batch's queries are ready by the answers' return at this low
// quantile of the slowest ISN's compute over the last batches (at the mean, about half of the
// batches came back before their queries were admitted: session 45, call C).
inline constexpr double kAdmissionAheadQuantile = 0.1;

struct AggregatorOptions {
  std::filesystem::path index_dir;
  std::string queries = "-";  // a file (TSV or TREC topics), or "-" for TSV on standard input
  std::filesystem::path run_path;
  std::filesystem::path metrics_path;  // empty: none
  std::string run_tag = "gpusearch";
  SearchParams params;
  double alpha = NAN;  // NaN: the index's GS alpha
  QueryLimits limits;
  BatchPolicy batching;
  std::size_t max_in_flight = 0;  // batches broadcast and unanswered; 0: chosen from latencies
  std::size_t max_depth = 8;      // the most that automatic choice goes to
  std::size_t window =
      0;  // replay without --qps: queries admitted ahead; 0: batch_size * (max_in_flight + 1)
  double qps = 0;  // replay at this arrival rate; 0: closed loop (as fast as answered)
  // Closed loop: just in time unless --window is given (then the window).
  ClosedLoopAdmission admission = ClosedLoopAdmission::kJustInTime;
  // Just in time: the next batch is aimed behind the batches ahead as if the last of them took
  // this quantile of the slowest ISN's compute over the last 64 batches (0: its mean), and is
  // cut at once whenever their answers come back earlier. A batch's compute varies by +-50%
  // around the mean (the CPU engine's batches of 64): aimed at the mean plus 0.2 of it, a
  // fifth of the batches queued behind a slower one, and an ISN with the next batch waiting
  // delivered its answer 2x later (its engine took the cores its progress needed); aimed at
  // the 95th percentile, the ISN idles about one round trip per batch instead
  // (NOTES-cluster.md, session 30: p50 latency 1.25-1.29x compute against 1.30-1.38x, 1-4% less
  // throughput at batch 64). Since the ISN's MPI thread decodes a waiting batch and encodes the
  // answers (session 49), a batch that arrives early costs its queries only the wait for the
  // compute ahead, and the 0.7 quantile keeps the ISN busier. One ISN on the H100 host, two
  // loans (NOTES-cluster.md, session 49): GPU engine, batch 64, 90-91% of in process at p50
  // 1.28-1.33x compute (0.95: 83% at 1.28-1.30x); CPU engine, batch 64, 85-104% at 1.25-1.26x
  // (0.95: 89-91% at 1.17x); batch 1,024, 90% (0.95: 85%). 0.5 gave 1.32-1.39x.
  double admission_quantile = 0.7;
  // Just in time: how long after the aim the next batch should reach the slowest ISN, as a
  // share of the mean compute (negative: before). Session 29's aim was the mean with 0.2.
  double admission_lag = 0.0;
  // Just in time: what the next batch's cut waits for besides its aim (below), when the answers
  // of the batches ahead come back before it. With one ISN all three are the same.
  JustInTimeCut cut_on = JustInTimeCut::kPredictedFinish;
  // Just in time: the next batch's queries are admitted to be ready when the answers ahead could
  // come back (kAdmissionAheadQuantile; the cut's moment by cut_on), so that their admission
  // runs while the ISNs compute. Off (the default): to be ready at the aim's cut, which most batches'
  // answers come back before, so that the admission follows the answers (1.0-1.5 ms of a
  // 15-17 ms cycle at batch 1,024 on the 16-core host) and no query waits for a batch that
  // leaves later than expected. Measured (NOTES-cluster.md, session 45): on, one ISN gains 4%
  // at batch 1,024, and its p50 latency at batch 64 rises from 1.21 to 1.33 of compute.
  bool admission_ahead = false;
  // Threads that resolve a round's arrived queries (aggregator/admission_resolver.hpp); 1: the
  // MPI thread alone; 0 (auto, the default): AdmissionResolver::auto_threads of the batch size
  // and this process's usable cores.
  unsigned admission_threads = 0;
  std::size_t cache_entries = 0;
  std::uint64_t deadline_ms = 60000;  // 0: none (wait for every ISN)
  std::uint64_t shutdown_grace_ms = 30000;
  // An ISN missing this many batch deadlines in a row is declared dead (0: never): sent nothing
  // more, its shard's answers partial at once, until it answers again (it was slow). One still
  // silent at shutdown ends the job with MPI_Abort (exit 3) after the run and metrics are
  // written, as a stuck ISN does.
  std::uint64_t isn_dead_after = 3;
  std::uint64_t start_timeout_ms = 600000;  // ISNs opening their shards
  wire::ProgressOptions pacing;             // how the MPI thread waits (--progress)
  std::size_t timeline_batches = 100000;    // batches kept in the metrics' timeline
  bool progress = true;
  FrontEndOptions front_end;  // listen empty: no RPC front end (replay `queries`)
  AggregatorRanking ranking;
};

struct AggregatorOutcome {
  int exit_code = 0;
  bool abort_job = false;  // a stuck ISN: the caller should MPI_Abort after this returns
  nlohmann::json metrics;
};

// Runs the aggregator on `world` (this rank is 0, ranks 1.. are ISNs). Collective with
// run_isn's start (MPI_Comm_split).
AggregatorOutcome run_aggregator(const AggregatorOptions& options, MPI_Comm world);
void print_aggregator_summary(const nlohmann::json& metrics, std::ostream& out);

}  // namespace gpusearch
