// An online GPU list-cache policy (beyond paper 000, whose VFB plan is static; its section 5
// asks for a dynamic one): the cache follows the live query stream. The served queries are
// handed over in batches (observe: cheap, never blocks the engine); a background thread
// replays a sample of them the way the offline planner replays a training log
// (simulate_and_reads: the engine's early-terminating AND), adds their block reads to visiting
// frequencies that decay exponentially with the stream position (half-life half_life_queries
// served queries), and every replan_queries served queries admits a new plan with the
// offline policy's admission (admit_lists). The engine takes the newest plan between batches
// (take_plan) and moves its cache toward it, copying at most a bounded number of bytes.
//
// Keeping up with a fast engine: a GPU serves a call of a few thousand queries in a few ms,
// faster than a host replays them. So the queue is bounded and keeps the newest queries (the
// oldest are dropped: under drift they are the least useful), and the thread replays at most
// the sampled share of replan_queries before it plans, so plans come at a steady cadence
// whatever the backlog (before, one pass replayed the whole backlog and planned once, and a
// fast run ended with one plan and thousands of queries pending).
//
// Sharing the host with serving (the H100 run: the planning's CPU slowed the calls by 16%):
// the thread and its replay helpers run at SCHED_IDLE (planner_priority), on threads of their
// own (not TBB's workers, which the engine's post-processing uses), so planning only takes
// cycles the serving leaves idle; under full load it starves and the cache stays as it is. And a
// plan reaches the engine only when it pays (min_payoff): the bytes its queries would read from
// the cache rather than ship, per served query, predicted from the decayed visits, times
// payoff_horizon_queries, against the bytes the change copies in. The saving is measured out of
// sample: a plan fitted on the seed and every other served query is scored on the other served
// queries, against the held cache (a plan fitted and scored on the same visits always looks
// better than the held one: on an unchanged mix by the sample's noise, and the CPU twin at 200k
// documents lost hit rate to such plans); the plan handed over is the one fitted on all.
//
// Planning only between calls (pause_while_serving, on by default): SCHED_IDLE was not enough
// on the H100 (the gated policy, every plan withheld, still cost 3-5% of the busy rate: the
// planner's threads ran beside the post-processing). The engine marks its calls (ServingCall),
// and the replay and the planning stop at their next pause point while a call is in flight
// (common/serving_gaps.hpp): a replayed query, or a few thousand steps of an admission. A call
// never waits for the planner; under back-to-back calls the planner waits and the cache stays.
//
// With a whole-list policy (qtf, qtfdf) there is nothing to replay: a query adds its terms'
// frequencies and its lists whole, so the policy follows the stream at the cost of counting.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/cache_admission.hpp"
#include "common/cache_plan.hpp"
#include "common/query.hpp"
#include "common/serving_gaps.hpp"

namespace gpusearch {

class ShardIndex;

// The scheduling class of the planning threads.
enum class PlannerPriority {
  kNormal,  // as the serving threads
  kIdle,    // SCHED_IDLE (Linux; nice 19 where refused): only cycles nothing else wants
};
const char* to_string(PlannerPriority p);
PlannerPriority parse_planner_priority(const std::string& s);  // "normal" | "idle"

struct OnlinePolicyOptions {
  CachePolicy policy = CachePolicy::kVfb;
  double lambda = 1.0;
  bool fill_spare = true;  // AdmissionOptions::fill_spare
  std::uint64_t budget_bytes = 0;  // the cache region
  unsigned k = 10;                 // of the simulated AND
  Scoring scoring = Scoring::kBm25;
  double half_life_queries = 20000;     // a visit's weight halves after this many served queries
  // A new plan after this many served queries (replan_queries / sample_every replayed ones):
  // the sample is a cost knob and leaves the cadence, like the half-life, in served queries.
  std::uint64_t replan_queries = 2000;
  unsigned sample_every = 1;            // replay one served query of this many
  std::size_t max_pending = 4096;       // queries waiting for the thread; the oldest are dropped
  PlannerPriority planner_priority = PlannerPriority::kIdle;
  unsigned planner_threads = 1;  // replay threads (the policy's thread and helpers), >= 1
  // The gate: a plan goes to the engine when the bytes saved (out of sample: a plan fitted on
  // one half of the replayed queries, scored on the other) over payoff_horizon_queries served
  // queries (0: half_life_queries) are at least min_payoff times the bytes the plan copies, and
  // the saving per query is more than min_gain of the bytes the held cache serves per query.
  // min_payoff 0: every plan goes (no gate). min_gain is a margin: on the CPU twin an unchanged
  // mix still scored up to +0.8% (repeated queries fall in both halves) and a change made at 1%
  // lost hit rate, where a switch to another mix scored +5% (online_cache_gate_test).
  double min_payoff = 1.0;
  double payoff_horizon_queries = 0;
  double min_gain = 0.02;
  // The replay and planning pause while the engine serves a call (call_begins/call_ends).
  bool pause_while_serving = true;
  // Each plan the gate withholds doubles the queries served before the next one, up to this
  // many times replan_queries; a plan that goes in brings it back to replan_queries (1: never
  // stretched). On a mix the cache already serves, planning (two admissions a plan: 4.7 s of CPU
  // in a 6 s H200 run, every plan withheld but one) is the policy's whole cost.
  unsigned replan_backoff_max = 8;
  // vfb: the simulated reads of up to this many distinct queries (their terms in order) kept
  // for repeats of them (0: none). A query's reads are a function of its terms, so a repeat
  // adds the same visits without replaying; about half of a synthetic log's queries repeat
  // one before them. The memo is emptied when full.
  std::size_t replay_memo_entries = 1 << 16;
};

// The gate's arithmetic for one candidate plan against the cache the engine holds, in bytes per
// served query (decayed visits over their total weight).
struct PlanPayoff {
  double held_bytes_per_query = 0;  // read from the held cache (the scoring half's visits)
  double saving_per_query = 0;      // more read from the cache under the fitting half's plan
  double copy_bytes = 0;            // the plan's blocks the cache lacks
  bool pays = false;
};

class OnlineCachePolicy {
 public:
  OnlineCachePolicy(const ShardIndex& shard, OnlinePolicyOptions options);
  ~OnlineCachePolicy();  // stops and joins the thread
  OnlineCachePolicy(const OnlineCachePolicy&) = delete;
  OnlineCachePolicy& operator=(const OnlineCachePolicy&) = delete;

  // Start-up, before serving (blocks; the caller's thread and TBB): the training log replayed as
  // the stream's past, every query weighing alike and together as much as one half-life of
  // served queries, then a plan from it (take_plan returns it). Not sampled, nothing dropped.
  void seed(std::span<const Query> training);
  // Served queries (copied; sampled; the oldest pending dropped past max_pending). Never waits
  // for the thread.
  void observe(std::span<const Query> queries);
  // The newest plan not yet taken (lists most valuable first), if any.
  std::optional<std::vector<CachedList>> take_plan();
  // The same, waiting up to `timeout` for one (nullopt: none came, or the policy stops). For a
  // thread that applies plans in the gaps between calls (common/cache_swapper.hpp). `taken`, if
  // given, is set under the policy's lock when a plan is returned, so that a reader of
  // has_plan() then `taken` never misses a plan in hand.
  std::optional<std::vector<CachedList>> wait_plan(std::chrono::milliseconds timeout,
                                                   std::atomic<bool>* taken = nullptr);
  bool has_plan() const;  // a plan waits to be taken
  // The engine's calls (never block): with pause_while_serving, the planner runs only between
  // them. ServingCall marks one for its scope.
  void call_begins() noexcept { gaps_.call_begins(); }
  void call_ends() noexcept { gaps_.call_ends(); }
  using ServingCall = ServingGaps::Call;
  ServingGaps* serving_gaps() { return &gaps_; }
  // What the engine's cache holds now (after a change, or at the start): the gate's baseline.
  // Until it is told, the baseline is the last plan taken (none before the first: every plan
  // goes).
  void report_cache(std::span<const CachedList> held);
  // The scheduling policy (SCHED_OTHER, SCHED_IDLE, ...) of the policy's thread, read from
  // outside it (tests).
  int planner_sched_policy() const;
  // Blocks until every query observed so far has been replayed and, with plan_the_rest and any
  // replayed since the last plan, a plan made from them is ready (tests, benchmarks). Without
  // plan_the_rest, plans come only at the policy's own cadence (replan_queries).
  void drain(bool plan_the_rest = true);
  nlohmann::json stats() const;

 private:
  struct Pending {
    Query query;
    std::uint64_t position;  // in the served stream
  };
  void run();
  void add_reads(const Query& q, double log2_weight, const std::vector<ListRead>& reads,
                 bool served);
  // false: stopped part-way (nothing added).
  bool replay(std::span<const Pending> work);
  // What a query reads, for the admission: vfb the engine's early-terminating AND replayed
  // (simulate_and_reads); qtf and qtfdf rank whole lists by query frequency alone, so each of
  // the query's lists counts whole and nothing is replayed (the gate's payoff then weighs the
  // bytes of whole lists, what an uncached list ships).
  std::vector<ListRead> reads_of(const Query& q) const;
  // A pause point of the planner's work: blocks while a call is in flight (pause_while_serving);
  // false once the policy stops.
  bool pause_point() { return !options_.pause_while_serving || gaps_.pause_point(); }
  ServingGaps* gaps_if_pausing() { return options_.pause_while_serving ? &gaps_ : nullptr; }
  // Decayed visits and their total weight (in the same scale as the visits).
  struct Visits {
    VisitLog log;
    double total_weight = 0;
    void add(const Query& q, double w, const std::vector<ListRead>& reads);
    void scale(double s);
    // Equal prefix lengths merged, visits under floor forgotten; a pause point per term.
    void compact(double floor, ServingGaps* gaps);
  };
  std::vector<CachedList> make_plan(Visits& v);
  std::vector<CachedList> make_plan() { return make_plan(visits_); }
  // The gate's figures for `plan` (copy bytes) whose saving is scored by `fitted` (a plan
  // fitted on the other half) on `scoring`'s visits.
  PlanPayoff payoff(const std::vector<CachedList>& plan, const std::vector<CachedList>& fitted,
                    const Visits& scoring, const std::unordered_map<TermId, std::uint32_t>& held);
  const ShardIndex& shard_;
  OnlinePolicyOptions options_;
  ServingGaps gaps_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_, plan_ready_;
  // take_plan's body, under mutex_.
  std::optional<std::vector<CachedList>> take_plan_locked();
  std::deque<Pending> pending_;
  std::optional<std::vector<CachedList>> plan_;
  bool stop_ = false, busy_ = false, plan_requested_ = false, started_ = false;
  // The gate's baseline (guarded by mutex_): the engine's cache, or the last plan taken.
  std::unordered_map<TermId, std::uint32_t> held_;
  bool has_baseline_ = false, cache_reported_ = false;
  std::uint64_t plans_withheld_ = 0;
  PlanPayoff last_payoff_;
  std::string planner_priority_;  // as achieved: "idle", "nice 19", "normal"
  std::uint64_t observed_ = 0, sampled_ = 0, dropped_ = 0, replayed_ = 0, plans_ = 0;
  // Replayed reads by query terms (vfb), under memo_mutex_; hits and clears under mutex_.
  struct TermsHash {
    std::size_t operator()(const std::vector<TermId>& terms) const noexcept;
  };
  std::unordered_map<std::vector<TermId>, std::vector<ListRead>, TermsHash> memo_;
  std::mutex memo_mutex_;
  std::uint64_t memo_hits_ = 0, memo_clears_ = 0;
  // The reads of `queries` (vfb: from the memo where it has them, repeats in the batch once);
  // the misses through `replay_misses`, which fills the given slots. Records what it replayed.
  template <typename ReplayMisses>
  void reads_with_memo(std::span<const Query* const> queries,
                       std::vector<std::vector<ListRead>>& reads, ReplayMisses&& replay_misses);
  std::uint64_t since_plan_ = 0, last_plan_position_ = 0;
  unsigned replan_scale_ = 1;  // the interval's multiple now (replan_backoff_max), under mutex_
  // The replayed queries between plans: replan_queries served, of which one in sample_every is
  // replayed (at least one).
  std::uint64_t replayed_per_plan() const {
    return std::max<std::uint64_t>(
        1, (options_.replan_queries + options_.sample_every - 1) / options_.sample_every);
  }
  double replay_seconds_ = 0, plan_seconds_ = 0;
  // Owned by the thread: decayed visits; a visit's weight is 2^((position - base) / half-life),
  // the base moved up now and then (every stored weight rescaled), so older visits weigh less
  // relative to newer ones and doubles never overflow.
  Visits visits_;     // every replayed query: the plans handed over
  Visits halves_[2];  // the gate's fit (the seed, even served queries) and score (odd ones)
  std::uint64_t added_ = 0;
  double base_position_ = 0, newest_log2_weight_ = 0;
  std::thread thread_;
};

}  // namespace gpusearch
