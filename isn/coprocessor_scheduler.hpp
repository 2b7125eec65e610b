// The ISN's CPU+GPU co-processor scheduler: the CPU engine and the GPU engine run at the same
// time, and each query goes to one of them (paper 001, section 9; paper 002, LBD).
//
// Policies (--scheduler):
//   cpu, gpu     every query on one processor (the other idles): the baselines.
//   lbd          paper 002's length-based distribution: a query whose lists hold fewer than S
//                blocks in total goes to one processor (the GPU in the paper), the rest to the
//                other; static, no stealing.
//   queues       paper 001's three queues: CPU-preferred, GPU-preferred and either. An idle
//                processor takes, in order: the oldest job near its deadline that prefers it (a
//                job older than urgent_fraction of its deadline goes first to its preferred
//                processor), the oldest of its own queue, the oldest of the either queue, and
//                then steals the oldest of the other's queue when every worker of the other is
//                busy. Which queue a job joins (QueuesRouting):
//                  capacity   (default) the processor expected to finish it first given the work
//                             queued there and each processor's measured capacity, and where
//                             that is close, by relative advantage (isn/capacity_router.hpp);
//                             the either queue stays empty.
//                  lone-cost  paper 001's rule: the processor predicted at least
//                             preference_ratio times cheaper for the query alone, else either.
//                  specialize the CPU when the query's cost to the CPU's throughput (its
//                             predicted cost times the CPU's measured seconds per predicted
//                             second, over the CPU's workers) is below theta times its cost to
//                             the GPU's (by default flat: the GPU's seconds per query in its
//                             recent calls, isn/batch_cost_model.hpp; until then its predicted
//                             lone cost times the GPU's seconds per predicted second), else the
//                             GPU: the CPU answers the queries it is best at.
//                             theta follows the load at each GPU call: down a step
//                             when the GPU had to steal from the CPU's queue, or the CPU's
//                             queue has waited longer than the GPU's (the CPU was given more
//                             than it can answer), up a step when a CPU worker had found
//                             nothing of its own to do since the last call (waited, or stole
//                             from the GPU's queue: it can take more).
//   best-serial  paper 001 Figure 7's third line: one query at a time, on the processor
//                predicted cheaper for it (a benchmark baseline).
//
// A processor is a QueryEngine with `workers` threads, each taking up to `max_batch` jobs of
// equal search parameters per call (the CPU engine: one worker per core, one query each; the GPU
// engine: one worker, batches of whatever waits). A worker of a one-query processor may take
// several jobs at once under load and answer them one call each (lone_jobs_per_take). Every
// answer is the engine's, so every answer is exact whichever processor computed it. Nothing here
// knows which engine is which: tests drive the scheduler with two CPU-side engines.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/query_engine.hpp"
#include "common/shard_index.hpp"
#include "isn/batch_cost_model.hpp"
#include "isn/capacity_router.hpp"
#include "isn/cost_predictor.hpp"

namespace gpusearch {

enum class SchedulerPolicy { kCpu, kGpu, kLbd, kQueues, kBestSerial };
// Throws InputError naming --scheduler and the valid names.
SchedulerPolicy parse_scheduler_policy(std::string_view name);
std::string_view to_string(SchedulerPolicy p);
std::vector<std::string> scheduler_policy_names();

// How `queues` picks a job's queue (see above). Throws InputError naming --scheduler-routing.
enum class QueuesRouting : std::uint8_t { kCapacity, kLoneCost, kSpecialize };
QueuesRouting parse_queues_routing(std::string_view name);
std::string_view to_string(QueuesRouting r);

enum class JobQueue : std::uint8_t { kCpuPreferred = 0, kGpuPreferred = 1, kEither = 2 };
std::string_view to_string(JobQueue q);

using CostEstimator = std::function<CostEstimate(const QueryFeatures&)>;
// A job's cost as its processor's worker measured it: called after every call of one job (the
// CPU worker's always are), from the worker thread (isn/online_cost_predictor.hpp refits on them).
using CostObserver = std::function<void(Processor, const QueryFeatures&, double seconds)>;
// How a cost is timed: the wall clock, or the calling thread's CPU time (the work of an engine
// that answers a lone query on the calling thread, as the CPU engine does, without the time
// other processes take).
enum class CostClock : std::uint8_t { kWall, kThreadCpu };

struct ProcessorSlot {
  QueryEngine* engine = nullptr;  // not owned
  unsigned workers = 1;
  unsigned max_batch = 1;
};

struct SchedulerOptions {
  SchedulerPolicy policy = SchedulerPolicy::kQueues;
  std::uint64_t lbd_threshold_blocks = 30000;  // paper 002's S (its best value)
  Processor lbd_short_on = Processor::kGpu;    // where queries below S go (paper 002: the GPU)
  // specialize: 1.15-1.22x the GPU alone against lone-cost's 1.06x, paired, H200 (NOTES-scheduler.md,
  // session 34)
  QueuesRouting routing = QueuesRouting::kSpecialize;
  // and-or: the cost features probe whether the AND phase reaches k, decoding at most this many
  // blocks a query (0: no probe). It must match the training log's (CostLogOptions). Off by
  // default: on the build machine it took the CPU model's error from 32-35% to 20.5% unbounded,
  // for 6.6 us a query on the submitting thread, or to 27% with 16 blocks, for 4.3 us
  // (NOTES-scheduler.md, session 36).
  std::uint32_t and_probe_blocks = 0;
  // With the probe on, a submission of at least this many queries computes their features in
  // parallel (oneTBB): the ISN's batches.
  static constexpr std::size_t kParallelFeatureJobs = 32;
  CapacityRoutingOptions capacity;  // routing kCapacity
  double preference_ratio = 1.2;  // routing kLoneCost (paper 001: "20% faster" makes a job prefer)
  // routing kSpecialize: ln(theta)'s step at a GPU call, and its start (theta = 1: the CPU
  // takes what it is predicted cheaper at). At load the GPU calls about 100 times a second.
  double specialize_step = 0.1;
  double specialize_log_theta = 0.0;
  // GPU calls seen before its cost in a batch (BatchCostModel) replaces its predicted lone cost
  // times its seconds per predicted second.
  std::uint64_t specialize_batch_cost_calls = 8;
  // A query's cost to the GPU: flat, the mean seconds per query of its recent calls (true: the
  // CPU then takes the queries it answers cheapest), or its marginal cost b + c * postings
  // (false). In full batches the H200's cost per query is nearly flat: the CPU's cheapest 40%
  // cost it 0.8x the others (tests/benchmarks/split_bound.hpp, NOTES-scheduler.md, session 34),
  // and the marginal model's postings term sent the CPU long queries it answers slowly.
  bool specialize_flat_gpu_cost = true;
  // routing kSpecialize: theta also goes down when, as the GPU starts a call, the oldest job of
  // the CPU's queue has waited longer than the oldest of the GPU's, and goes up only when a CPU
  // worker found nothing to take (not when one is merely between two calls). Stealing alone
  // signals an overloaded CPU only while the GPU has room in its batch; when both processors are
  // behind, the GPU's own queue fills its batches and theta never fell; and a worker between
  // calls raised theta at nearly every GPU call (issue 11, session 34, call J's timelines).
  // On by default: 1.44x and 1.32x the GPU alone against 1.29x and 1.25x without it, in two runs
  // on the H200 (session 35, calls A and B; NOTES-scheduler.md).
  bool specialize_balance_waits = true;
  // A worker takes its next batch in the critical section that ends its call, before that call's
  // completions run, and so takes the scheduler's lock once a call instead of twice. (The CPU
  // workers waited for the lock 13-21% of their time at 400K jobs/s on the H200, session 34.)
  // A caller that submits from a completion may then see the worker busy. Off by default until
  // measured on a GPU host.
  bool chain_next_batch = false;
  // A worker of a processor that answers one query per call (max_batch 1: the CPU engine) takes
  // up to this many jobs of its queue at once, its fair share (the queue's jobs over the
  // processor's workers), and answers them one by one, one engine call each: under load it takes
  // the scheduler's lock once per take, not twice per job. With 8 CPU workers answering 31 us
  // jobs, each waited for the lock 11 us a job, 27% of its time (H200, session 35, call A).
  // Their completions run after the take's last job. Jobs taken are no longer waiting: neither
  // stolen nor dropped (drop_waiting). 1: a job a take.
  unsigned lone_jobs_per_take = 8;
  // ... and stops adding jobs to a take once they are expected to take this long (their
  // predicted costs times the processor's measured seconds per predicted second): a long job is
  // worth a lock of its own, and the jobs behind it in the take wait less.
  double lone_take_seconds = 1e-3;
  // routing kSpecialize: keep theta after each GPU call, up to this many points, in stats()
  // (specialize.theta_trace: [steady-clock seconds, theta]); 0: none. For a benchmark's timeline.
  std::size_t theta_trace_limit = 0;
  std::chrono::microseconds deadline{500000};  // after arrival
  double urgent_fraction = 0.5;                // of the deadline, after which a job is urgent
  CostEstimator estimate;                      // queues and best-serial need one
  CostObserver observe;                        // optional
  std::array<CostClock, kProcessors> observe_clock{CostClock::kThreadCpu, CostClock::kWall};
};

struct JobOutcome {
  Processor ran_on = Processor::kCpu;
  Processor preferred = Processor::kCpu;  // capacity routing: where it was routed
  JobQueue queued_in = JobQueue::kEither;
  bool stolen = false;    // taken from the other processor's queue
  bool promoted = false;  // taken ahead of its processor's own queue because it was urgent
  bool dropped = false;   // never run (drop_waiting)
  bool missed_deadline = false;
  std::size_t batch_size = 0;  // jobs in the engine call that answered it
  double wait_seconds = 0;     // arrival to the start of that call
  double service_seconds = 0;  // the call's duration
  std::string error;           // the engine's exception, if it threw
};

class CoProcessorScheduler {
 public:
  using Clock = std::chrono::steady_clock;
  using Done = std::function<void(const JobOutcome&)>;

  // Starts the workers. Throws InputError for a policy that needs an estimator without one.
  CoProcessorScheduler(const ShardIndex& shard, ProcessorSlot cpu, ProcessorSlot gpu,
                       SchedulerOptions options);
  ~CoProcessorScheduler();  // drops what waits, finishes what runs, joins the workers
  CoProcessorScheduler(const CoProcessorScheduler&) = delete;
  CoProcessorScheduler& operator=(const CoProcessorScheduler&) = delete;

  // Queues one query. `query` and `out` must live until `done` has been called (from a worker
  // thread, after `out` is written). `arrival` may lie in the past (its deadline counts from it).
  void submit(const Query& query, const SearchParams& params, ShardResult& out,
              Clock::time_point arrival, Done done);
  // Several queries at once (same parameters): one lock and one wake-up per processor for all.
  struct Submission {
    const Query* query = nullptr;
    ShardResult* out = nullptr;
    Clock::time_point arrival;
    Done done;
  };
  void submit_many(std::span<Submission> submissions, const SearchParams& params);
  // Every query of a batch, arriving now, queued without waiting: `done` is called once, on a
  // worker thread, after every out[i] is written, with the first engine error (empty: none; a
  // job dropped unrun counts as an error). `queries` and `out` must live until then.
  using BatchDone = std::function<void(const std::string& error)>;
  void submit_batch(std::span<const Query> queries, const SearchParams& params,
                    std::span<ShardResult> out, BatchDone done);
  // Every query of a batch, arriving now; returns when all are answered. Throws the first
  // engine error. `outcomes`, if given, gets one per query.
  void search_batch(std::span<const Query> queries, const SearchParams& params,
                    std::span<ShardResult> out, std::vector<JobOutcome>* outcomes = nullptr);
  // Completes every queued job without running it (outcome.dropped): ends an overloaded
  // benchmark run quickly.
  void drop_waiting();
  // Where the next query would be queued, and which processor it prefers (for tests and logs).
  std::pair<JobQueue, Processor> classify(const Query& query,
                                          const SearchParams& params = SearchParams{}) const;
  // Capacity routing's measured seconds per predicted second of p (1 before any measured call;
  // also measured under lone-cost routing; 1 for policies without a cost estimator).
  double seconds_per_predicted(Processor p) const;

  const SchedulerOptions& options() const { return options_; }
  nlohmann::json stats() const;

 private:
  // What the worker that runs a job reads (what a take reads is in its QueuedJob).
  struct Job {
    const Query* query = nullptr;
    QueryFeatures features;  // with an observer or an estimator only
    SearchParams params;
    ShardResult* out = nullptr;
    Clock::time_point arrival, deadline;
    JobQueue queue = JobQueue::kEither;
    Done done;
  };
  // A job as its queue holds it: what a take reads, inline in the queue's memory, and the job.
  // A take of thousands of jobs (the GPU's) then reads the queue's contiguous memory under the
  // lock, not each Job, which the submitting thread allocated (about a cache miss a field: the
  // H200 host's GPU worker held the lock 140 ns a job).
  struct QueuedJob {
    Clock::time_point urgent_at;
    std::uint64_t seq = 0;  // arrival order
    CostEstimate estimate;  // with an estimator only
    SearchParams params;    // the job's (a copy: its worker reads the Job's)
    Processor preferred = Processor::kCpu;
    // Inline too: a job costs no allocation. With each job allocated by the submitting thread
    // and freed by the workers as they finished (nine threads freeing into its malloc arena),
    // the submitting thread fell 20-234 ms behind its arrivals at 381-426K jobs/s (H200,
    // session 35, call D); with jobs inline the same benchmark sustained 496K (call E).
    Job job;
  };
  // A FIFO of queued jobs in one ring of memory: taking a job frees nothing (a std::deque of
  // them frees a block every few jobs, under the lock, into the heap of the thread that
  // submitted them). It doubles when full, as a submission queues a job, and keeps its largest
  // size.
  class JobRing {
   public:
    bool empty() const { return size_ == 0; }
    std::size_t size() const { return size_; }
    // i < size(): the i-th oldest.
    QueuedJob& operator[](std::size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
    const QueuedJob& operator[](std::size_t i) const {
      return slots_[(head_ + i) & (slots_.size() - 1)];
    }
    QueuedJob& front() { return (*this)[0]; }
    const QueuedJob& front() const { return (*this)[0]; }
    void push_back(QueuedJob&& job);
    void pop_front();
    void erase(std::size_t i);  // moves the jobs ahead of i up by one
    void clear();

   private:
    std::vector<QueuedJob> slots_;  // a power of two of them
    std::size_t head_ = 0, size_ = 0;
  };
  struct Taken;
  struct ProcessorState;
  void worker_main(Processor p);
  // Under mutex_: p's next batch (left empty when there is nothing p may take), p marked busy.
  void form_batch_locked(Processor p, std::vector<Taken>& batch, double& predicted);
  // Under mutex_: the next job processor p may take, given the parameters of the batch it fills
  // (nullptr: the first job).
  bool take_next(Processor p, Clock::time_point now, const SearchParams* batch_params,
                 Taken& taken);
  // Under mutex_: moves job i of queue q into `taken`, for processor p.
  void take_from(JobQueue q, std::size_t i, Processor p, bool stolen, bool promoted, Taken& taken);
  // Under mutex_: whether an urgent job of the either queue prefers p (take_next's first choice
  // may then come from that queue rather than p's own).
  bool urgent_either_job_prefers(Processor p, Clock::time_point now) const;
  bool can_take(Processor p) const;  // under mutex_
  // The queue and preferred processor of a query with estimate e (null: no estimator); under
  // mutex_ for capacity and specialize routing (route: a submission, which moves capacity
  // routing's theta); the other rules read nothing shared. `features`: the query's, if known.
  std::pair<JobQueue, Processor> classify_locked(const Query& query, const CostEstimate* e,
                                                 bool route,
                                                 const QueryFeatures* features = nullptr) const;
  void notify(Processor p) { wake_[std::size_t(p)].notify_one(); }
  JobRing& queue(JobQueue q) { return queues_[std::size_t(q)]; }

  const ShardIndex& shard_;
  SchedulerOptions options_;
  std::array<ProcessorSlot, kProcessors> slots_;

  mutable std::mutex mutex_;
  // One wake-up per processor: a submission or a state change wakes a worker of the processor
  // that may now take a job, not every worker (waking all 16 on every submission throttled the
  // submitting thread to about 70K jobs/s on a 16-core host). ready_: the constructor waits
  // for every worker to start.
  std::array<std::condition_variable, kProcessors> wake_;
  std::condition_variable ready_;
  // Under mutex_: wakes whoever may take the jobs just queued (their count per queue).
  void wake_for(const std::array<std::size_t, 3>& landed);
  std::array<JobRing, 3> queues_;
  // Capacity bookkeeping and routing (policies with an estimator); mutable: classify() asks it.
  mutable std::unique_ptr<CapacityRouter> router_;
  std::array<unsigned, kProcessors> idle_workers_{};
  // Of those, the workers asleep for want of a job (not between two calls).
  std::array<unsigned, kProcessors> waiting_workers_{};
  unsigned running_calls_ = 0;  // engine calls in progress, both processors
  bool stop_ = false;
  std::uint64_t next_seq_ = 0;
  struct Counters {
    // takes: the batches taken from the queues (one engine call each, or, for a one-query
    // processor, a call per job).
    std::uint64_t jobs = 0, calls = 0, takes = 0, stolen = 0, promoted = 0, missed = 0, errors = 0;
    double busy_seconds = 0;
    // The worker threads' own CPU time in those calls: busy_seconds less this is time the
    // threads were runnable but descheduled, or blocked (the host oversubscribed).
    double busy_thread_seconds = 0;
    // Contention on mutex_: the workers' waits to take it back after a call and after its
    // completions, and how long they held it to take a batch.
    double lock_wait_seconds = 0, take_hold_seconds = 0;
  };
  // The submitting side's (under mutex_): its waits for the lock and how long it held it.
  struct SubmitCounters {
    std::uint64_t calls = 0, jobs = 0;
    double lock_wait_seconds = 0, hold_seconds = 0;
  };
  SubmitCounters submit_counters_;
  std::array<Counters, kProcessors> counters_{};
  std::array<std::uint64_t, 3> queued_in_{};
  // routing kSpecialize (under mutex_): ln(theta), its moves, and whether a CPU worker has found
  // nothing to take since the GPU's last call.
  double log_theta_ = 0;
  std::vector<std::array<double, 2>> theta_trace_;
  std::uint64_t theta_down_ = 0, theta_up_ = 0;
  bool cpu_idled_ = false;
  // routing kSpecialize: the GPU side's marginal cost per query within a batch, from its calls.
  BatchCostModel gpu_batch_cost_;
  std::uint64_t dropped_ = 0;
  std::vector<std::thread> workers_;
};

// The scheduler as an ISN engine: owns both engines, answers each batch through
// CoProcessorScheduler::search_batch.
class SchedulerEngine final : public QueryEngine {
 public:
  // `train` (optional) builds the cost estimator at the first batch, with that batch's
  // parameters (the mode and k arrive with the batches, not at start-up); policies that need no
  // estimator never call it.
  // What training gives: the estimator, and optionally an observer of the jobs' costs and its
  // stats (an online refit). A bare CostEstimator converts to it.
  struct TrainedCosts {
    TrainedCosts(CostEstimator e = {}, CostObserver o = {},
                 std::function<nlohmann::json()> s = {})
        : estimate(std::move(e)), observe(std::move(o)), stats(std::move(s)) {}
    CostEstimator estimate;
    CostObserver observe;
    std::function<nlohmann::json()> stats;
  };
  using Trainer = std::function<TrainedCosts(const SearchParams&, QueryEngine& cpu,
                                             QueryEngine& gpu, nlohmann::json& report)>;
  SchedulerEngine(const ShardIndex& shard, std::unique_ptr<QueryEngine> cpu,
                  std::unique_ptr<QueryEngine> gpu, ProcessorSlot cpu_slot, ProcessorSlot gpu_slot,
                  SchedulerOptions options, Trainer train = {});
  std::string_view name() const override { return name_; }
  bool runs_batch_in_parallel() const override { return true; }
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;
  // Trains the estimator now (the ISN at start-up, given the run's parameters), so that the
  // first batch is not charged for it; batches with other parameters use it as trained.
  void prepare(const SearchParams& params) override;
  // The ISN's pipelined batches: the batch's jobs queued at once (CoProcessorScheduler::
  // submit_batch), so that both processors stay busy across batch boundaries. Trains the
  // predictor first at the first batch, as search() does. Not to be mixed with search() calls
  // from other threads.
  void submit_batch(std::span<const Query> queries, const SearchParams& params,
                    std::span<ShardResult> out, CoProcessorScheduler::BatchDone done);
  nlohmann::json stats() const override;

 private:
  const ShardIndex& shard_;
  std::unique_ptr<QueryEngine> cpu_, gpu_;
  ProcessorSlot cpu_slot_, gpu_slot_;
  SchedulerOptions options_;
  Trainer train_;
  nlohmann::json training_report_;
  std::function<nlohmann::json()> online_stats_;
  std::unique_ptr<CoProcessorScheduler> scheduler_;
  std::string name_;
};

// How per-query costs are logged for the cost predictor. Each query (without terms: skipped) runs
// alone on each engine `repeats` times, and its cost is the fastest run: what the query costs
// undisturbed (the first run may pay for cold caches that a warm ISN does not, and any run of a
// 0.05 ms query may take an interrupt or a preemption). The clock, per processor: wall time, or
// the calling thread's CPU time, which is the work of an engine that answers a lone query on the
// calling thread (the CPU engine, one thread per query) without the time other processes take.
// Two logs of the same CPU engine on the busy 2-core build host differed per query by 53% on
// average with the median of 3 wall-clock runs, by 5-10% with the fastest of 7 CPU-time runs.
struct CostLogOptions {
  unsigned repeats = 7;
  std::array<CostClock, kProcessors> clock{CostClock::kThreadCpu, CostClock::kWall};
  std::uint32_t and_probe_blocks = 0;  // the features' and-or probe (SchedulerOptions)
};
struct CostLog {
  std::array<std::vector<CostSample>, kProcessors> samples;
};
// Also records whether and-or's OR phase ran for each query (its AND answer was short of k).
CostLog log_query_costs(const ShardIndex& shard, std::span<const Query> queries,
                        const SearchParams& params, QueryEngine& cpu, QueryEngine& gpu,
                        const CostLogOptions& options = {});

// Trains a cost predictor on the costs log_query_costs logs; `report` gets the predictor's
// errors.
CostPredictor train_cost_predictor(const ShardIndex& shard, std::span<const Query> queries,
                                   const SearchParams& params, QueryEngine& cpu, QueryEngine& gpu,
                                   nlohmann::json* report, const CostLogOptions& options = {});

}  // namespace gpusearch
