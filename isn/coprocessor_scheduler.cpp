#include "isn/coprocessor_scheduler.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <future>

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include "common/error.hpp"
#include "common/metrics.hpp"

namespace gpusearch {

namespace {

JobQueue own_queue(Processor p) {
  return p == Processor::kCpu ? JobQueue::kCpuPreferred : JobQueue::kGpuPreferred;
}

// The processor whose own queue q is (not the either queue).
Processor owner(JobQueue q) {
  return q == JobQueue::kCpuPreferred ? Processor::kCpu : Processor::kGpu;
}

double seconds_between(CoProcessorScheduler::Clock::time_point a,
                       CoProcessorScheduler::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace


struct CoProcessorScheduler::Taken {
  Job job;
  double predicted = 0;  // the job's predicted seconds on the processor that took it
  Processor preferred = Processor::kCpu;
  bool stolen = false, promoted = false;
};

void CoProcessorScheduler::JobRing::push_back(QueuedJob&& job) {
  if (size_ == slots_.size()) {
    std::vector<QueuedJob> grown(std::max<std::size_t>(64, 2 * slots_.size()));
    for (std::size_t i = 0; i < size_; ++i) grown[i] = std::move((*this)[i]);
    slots_ = std::move(grown);
    head_ = 0;
  }
  (*this)[size_++] = std::move(job);
}

void CoProcessorScheduler::JobRing::pop_front() {
  front().job.done = nullptr;  // what it holds goes now (a taken job's was moved out)
  head_ = (head_ + 1) & (slots_.size() - 1);
  --size_;
}

void CoProcessorScheduler::JobRing::erase(std::size_t i) {
  for (; i > 0; --i) (*this)[i] = std::move((*this)[i - 1]);
  pop_front();
}

void CoProcessorScheduler::JobRing::clear() {
  while (!empty()) pop_front();
}

CoProcessorScheduler::CoProcessorScheduler(const ShardIndex& shard, ProcessorSlot cpu,
                                           ProcessorSlot gpu, SchedulerOptions options)
    : shard_(shard),
      options_(std::move(options)),
      slots_{cpu, gpu},
      log_theta_(options_.specialize_log_theta),
      gpu_batch_cost_(64, options_.specialize_batch_cost_calls) {
  const bool needs_estimate = options_.policy == SchedulerPolicy::kQueues ||
                              options_.policy == SchedulerPolicy::kBestSerial;
  if (needs_estimate && !options_.estimate)
    throw InputError(
        "--scheduler", 0,
        fmt::format("scheduler '{}' needs a cost predictor", to_string(options_.policy)));
  for (std::size_t p = 0; p < kProcessors; ++p) {
    if (!slots_[p].engine)
      throw InputError("--scheduler", 0, fmt::format("no {} engine", to_string(Processor(p))));
    slots_[p].workers = std::max(1u, slots_[p].workers);
    slots_[p].max_batch = std::max(1u, slots_[p].max_batch);
  }
  if (options_.estimate)
    router_ = std::make_unique<CapacityRouter>(
        std::array<unsigned, kProcessors>{slots_[0].workers, slots_[1].workers}, options_.capacity);
  for (std::size_t p = 0; p < kProcessors; ++p)
    for (unsigned w = 0; w < slots_[p].workers; ++w)
      workers_.emplace_back([this, p] { worker_main(Processor(p)); });
  // Every worker waiting before the first job: whether a job may be stolen depends on the
  // owner's idle workers, and a worker still starting would count as busy.
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [&] {
    return idle_workers_[0] == slots_[0].workers && idle_workers_[1] == slots_[1].workers;
  });
}

CoProcessorScheduler::~CoProcessorScheduler() {
  drop_waiting();
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  for (auto& w : wake_) w.notify_all();
  for (auto& t : workers_) t.join();
}

void CoProcessorScheduler::wake_for(const std::array<std::size_t, 3>& landed) {
  // A job of p's own queue is p's; under `queues` the other processor may take a job of the
  // either queue, or steal, too (can_take decides; a worker woken for nothing sleeps again).
  // One job wakes one worker; several wake them all (one notify for the lot, not one each).
  const bool queues = options_.policy == SchedulerPolicy::kQueues;
  const std::size_t cpu_q = landed[std::size_t(JobQueue::kCpuPreferred)],
                    gpu_q = landed[std::size_t(JobQueue::kGpuPreferred)],
                    either = landed[std::size_t(JobQueue::kEither)];
  const std::size_t for_cpu = cpu_q + either + (queues ? gpu_q : 0);
  const std::size_t for_gpu = gpu_q + either + (queues ? cpu_q : 0);
  for (const auto& [p, n] : {std::pair{Processor::kCpu, for_cpu}, std::pair{Processor::kGpu, for_gpu}}) {
    if (n == 1) wake_[std::size_t(p)].notify_one();
    if (n > 1) wake_[std::size_t(p)].notify_all();
  }
}

std::pair<JobQueue, Processor> CoProcessorScheduler::classify(const Query& query,
                                                              const SearchParams& params) const {
  CostEstimate e;
  if (options_.estimate)
    e = options_.estimate(query_features(shard_, query, params, options_.and_probe_blocks));
  std::lock_guard lock(mutex_);
  return classify_locked(query, options_.estimate ? &e : nullptr, false);
}

double CoProcessorScheduler::seconds_per_predicted(Processor p) const {
  std::lock_guard lock(mutex_);
  return router_ ? router_->seconds_per_predicted(p) : 1.0;
}

std::pair<JobQueue, Processor> CoProcessorScheduler::classify_locked(
    const Query& query, const CostEstimate* estimate, bool route,
    const QueryFeatures* features) const {
  switch (options_.policy) {
    case SchedulerPolicy::kCpu:
      return {JobQueue::kCpuPreferred, Processor::kCpu};
    case SchedulerPolicy::kGpu:
      return {JobQueue::kGpuPreferred, Processor::kGpu};
    case SchedulerPolicy::kLbd: {
      const bool short_list =
          query_features(shard_, query).total_blocks < options_.lbd_threshold_blocks;
      const Processor p = short_list ? options_.lbd_short_on : other(options_.lbd_short_on);
      return {own_queue(p), p};
    }
    case SchedulerPolicy::kQueues:
    case SchedulerPolicy::kBestSerial: {
      const CostEstimate& e = *estimate;
      const double cpu = e.on(Processor::kCpu), gpu = e.on(Processor::kGpu);
      const Processor preferred = gpu < cpu ? Processor::kGpu : Processor::kCpu;
      if (options_.policy == SchedulerPolicy::kBestSerial) return {own_queue(preferred), preferred};
      if (options_.routing == QueuesRouting::kCapacity) {
        const Processor to = route ? router_->route(e).to : router_->choose(e).to;
        return {own_queue(to), to};
      }
      if (options_.routing == QueuesRouting::kSpecialize) {
        // Both in seconds of the processor's throughput: a CPU worker's real seconds shared by
        // the workers, the GPU's seconds per query within a batch.
        const double on_cpu = router_->seconds_per_predicted(Processor::kCpu) * cpu /
                              double(slots_[std::size_t(Processor::kCpu)].workers);
        double on_gpu = router_->seconds_per_predicted(Processor::kGpu) * gpu;
        if (gpu_batch_cost_.ready()) {
          if (options_.specialize_flat_gpu_cost) {
            on_gpu = gpu_batch_cost_.mean_seconds_per_query();
          } else {
            const double postings =
                features ? features->total : query_features(shard_, query).total;
            on_gpu = gpu_batch_cost_.marginal(postings);
          }
        }
        const Processor to =
            on_cpu < std::exp(log_theta_) * on_gpu ? Processor::kCpu : Processor::kGpu;
        return {own_queue(to), to};
      }
      if (cpu >= options_.preference_ratio * gpu) return {JobQueue::kGpuPreferred, Processor::kGpu};
      if (gpu >= options_.preference_ratio * cpu) return {JobQueue::kCpuPreferred, Processor::kCpu};
      return {JobQueue::kEither, preferred};
    }
  }
  return {JobQueue::kEither, Processor::kCpu};
}

void CoProcessorScheduler::submit(const Query& query, const SearchParams& params, ShardResult& out,
                                  Clock::time_point arrival, Done done) {
  Submission one{&query, &out, arrival, std::move(done)};
  submit_many(std::span(&one, 1), params);
}

void CoProcessorScheduler::submit_many(std::span<Submission> submissions,
                                       const SearchParams& params) {
  if (submissions.empty()) return;
  // Capacity and specialize routing read (capacity routing also moves) shared state: under the
  // lock. The other rules depend on the query alone: outside it (LBD's features cost more than
  // the lock should be held).
  const bool under_lock = options_.policy == SchedulerPolicy::kQueues &&
                          (options_.routing == QueuesRouting::kCapacity ||
                           options_.routing == QueuesRouting::kSpecialize);
  const bool has_estimate = bool(options_.estimate);
  std::vector<QueuedJob> jobs;
  jobs.reserve(submissions.size());
  for (Submission& sub : submissions) {
    QueuedJob& queued = jobs.emplace_back();
    Job& job = queued.job;
    job.query = sub.query;
    job.params = queued.params = params;
    job.out = sub.out;
    job.arrival = sub.arrival;
    job.deadline = sub.arrival + options_.deadline;
    queued.urgent_at = sub.arrival + std::chrono::duration_cast<Clock::duration>(
                                         options_.deadline * options_.urgent_fraction);
    job.done = std::move(sub.done);
  }
  if (options_.observe || has_estimate) {
    auto featurize = [&](std::size_t i) {
      QueuedJob& queued = jobs[i];
      queued.job.features =
          query_features(shard_, *queued.job.query, params, options_.and_probe_blocks);
      if (has_estimate) queued.estimate = options_.estimate(queued.job.features);
    };
    // and-or's probe costs microseconds a query (NOTES-scheduler.md, session 36): a batch's
    // features on every core, not on the submitting thread alone.
    if (options_.and_probe_blocks > 0 && jobs.size() >= SchedulerOptions::kParallelFeatureJobs) {
      tbb::parallel_for(std::size_t(0), jobs.size(), featurize);
    } else {
      for (std::size_t i = 0; i < jobs.size(); ++i) featurize(i);
    }
  }
  if (!under_lock)
    for (QueuedJob& queued : jobs)
      std::tie(queued.job.queue, queued.preferred) =
          classify_locked(*queued.job.query, has_estimate ? &queued.estimate : nullptr, false);
  // One lock and one wake-up per processor for the lot: a submitting thread that took the lock
  // and signalled once per query fell behind its arrivals with eight CPU workers busy
  // (NOTES-scheduler.md, session 34).
  const auto asked = Clock::now();
  std::lock_guard lock(mutex_);
  const auto held = Clock::now();
  std::array<std::size_t, 3> landed{};
  for (QueuedJob& queued : jobs) {
    Job& job = queued.job;
    if (under_lock)
      std::tie(job.queue, queued.preferred) = classify_locked(
          *job.query, has_estimate ? &queued.estimate : nullptr, true, &job.features);
    if (router_ && job.queue != JobQueue::kEither)
      router_->queued(queued.preferred, queued.estimate);
    queued.seq = next_seq_++;
    ++queued_in_[std::size_t(job.queue)];
    ++landed[std::size_t(job.queue)];
    queue(job.queue).push_back(std::move(queued));
  }
  wake_for(landed);
  ++submit_counters_.calls;
  submit_counters_.jobs += jobs.size();
  submit_counters_.lock_wait_seconds += seconds_between(asked, held);
  submit_counters_.hold_seconds += seconds_between(held, Clock::now());
}

bool CoProcessorScheduler::take_next(Processor p, Clock::time_point now,
                                     const SearchParams* batch_params, Taken& taken) {
  const bool queues = options_.policy == SchedulerPolicy::kQueues;
  auto& own = queue(own_queue(p));
  auto& either = queue(JobQueue::kEither);
  auto& others = queue(own_queue(other(p)));
  auto fits = [&](const QueuedJob& j) {
    return !batch_params || same_params(j.params, *batch_params);
  };
  auto take = [&](JobQueue q, std::size_t i, bool stolen, bool promoted) {
    take_from(q, i, p, stolen, promoted, taken);
    return true;
  };
  if (queues) {
    // a) The oldest urgent job that prefers p, from its own queue or the either queue. Urgent
    //    jobs are the oldest of a queue, so the scan stops at the first job that is not.
    std::size_t best_own = own.size(), best_either = either.size();
    for (std::size_t i = 0; i < own.size() && own[i].urgent_at <= now; ++i)
      if (fits(own[i])) {
        best_own = i;
        break;
      }
    for (std::size_t i = 0; i < either.size() && either[i].urgent_at <= now; ++i)
      if (either[i].preferred == p && fits(either[i])) {
        best_either = i;
        break;
      }
    const bool have_own = best_own < own.size(), have_either = best_either < either.size();
    if (have_either && (!have_own || either[best_either].seq < own[best_own].seq))
      return take(JobQueue::kEither, best_either, false, true);
    if (have_own) return take(own_queue(p), best_own, false, best_own != 0);
  }
  // b) The oldest of its own queue.
  if (!own.empty() && fits(own.front())) return take(own_queue(p), 0, false, false);
  if (!queues) return false;
  // c) The oldest of the either queue.
  if (!either.empty() && fits(either.front())) return take(JobQueue::kEither, 0, false, false);
  // d) Steal the oldest of the other's queue, when the other has no idle worker to take it.
  if (!others.empty() && idle_workers_[std::size_t(other(p))] == 0 && fits(others.front()))
    return take(own_queue(other(p)), 0, true, false);
  return false;
}

void CoProcessorScheduler::take_from(JobQueue q, std::size_t i, Processor p, bool stolen,
                                     bool promoted, Taken& taken) {
  auto& jobs = queue(q);
  QueuedJob& queued = jobs[i];
  const CostEstimate estimate = queued.estimate;
  taken = {std::move(queued.job), estimate.on(p), queued.preferred, stolen, promoted};
  jobs.erase(i);
  if (router_ && q != JobQueue::kEither) router_->dequeued(owner(q), estimate, jobs.empty());
}

bool CoProcessorScheduler::urgent_either_job_prefers(Processor p, Clock::time_point now) const {
  if (options_.policy != SchedulerPolicy::kQueues) return false;  // take_next skips it
  const JobRing& either = queues_[std::size_t(JobQueue::kEither)];
  for (std::size_t i = 0; i < either.size() && either[i].urgent_at <= now; ++i)
    if (either[i].preferred == p) return true;  // urgent jobs are the oldest, as in take_next
  return false;
}

bool CoProcessorScheduler::can_take(Processor p) const {
  if (options_.policy == SchedulerPolicy::kBestSerial && running_calls_ > 0) return false;
  const auto& own = queues_[std::size_t(own_queue(p))];
  if (!own.empty()) return true;
  if (options_.policy != SchedulerPolicy::kQueues) return false;
  return !queues_[std::size_t(JobQueue::kEither)].empty() ||
         (!queues_[std::size_t(own_queue(other(p)))].empty() &&
          idle_workers_[std::size_t(other(p))] == 0);
}

// Under mutex_: takes p's next batch (empty: nothing it may take) and marks p busy with it;
// moves theta at a GPU call under specialize routing. `predicted`: the batch's predicted seconds.
void CoProcessorScheduler::form_batch_locked(Processor p, std::vector<Taken>& batch,
                                             double& predicted) {
  const bool specialize =
      options_.policy == SchedulerPolicy::kQueues && options_.routing == QueuesRouting::kSpecialize;
  batch.clear();
  const auto now = Clock::now();
  // specialize_balance_waits: the head-of-line waits of the two processors' queues as the GPU
  // starts a call (before it takes its batch).
  double cpu_head_wait = 0, gpu_head_wait = 0;
  if (specialize && p == Processor::kGpu && options_.specialize_balance_waits) {
    const auto& cq = queue(JobQueue::kCpuPreferred);
    const auto& gq = queue(JobQueue::kGpuPreferred);
    if (!cq.empty()) cpu_head_wait = seconds_between(cq.front().job.arrival, now);
    if (!gq.empty()) gpu_head_wait = seconds_between(gq.front().job.arrival, now);
  }
  const SearchParams* params = nullptr;
  const ProcessorSlot& slot = slots_[std::size_t(p)];
  std::size_t max_batch = slot.max_batch;
  if (options_.policy == SchedulerPolicy::kBestSerial) {
    max_batch = 1;
  } else if (slot.max_batch == 1) {
    // A processor that answers one query per call takes up to its fair share of its own queue,
    // answered one by one (lone_jobs_per_take): one lock a take, not two a job.
    const std::size_t share = queue(own_queue(p)).size() / slot.workers;
    max_batch = std::clamp<std::size_t>(share, 1, std::max(1u, options_.lone_jobs_per_take));
  }
  const bool lone_take = slot.max_batch == 1 && max_batch > 1;
  double take_seconds = 0;  // a lone take: its jobs' expected seconds on p
  // While no urgent job of the either queue prefers p, take_next's choice is p's own queue's
  // head whenever that fits the batch (urgent or not, and never promoted): that run is taken
  // straight from the queue, without take_next's scans. Once that queue is empty or its head
  // does not fit, take_next takes the rest (the either queue, steals, urgent jobs behind it).
  auto& own = queue(own_queue(p));
  bool own_head_next = !urgent_either_job_prefers(p, now);
  while (batch.size() < max_batch) {
    Taken t;
    own_head_next =
        own_head_next && !own.empty() && (!params || same_params(own.front().params, *params));
    if (own_head_next)
      take_from(own_queue(p), 0, p, false, false, t);
    else if (!take_next(p, now, params, t))
      break;
    batch.push_back(std::move(t));
    params = &batch.front().job.params;
    if (lone_take && router_) {
      take_seconds += router_->seconds_per_predicted(p) * batch.back().predicted;
      if (take_seconds >= options_.lone_take_seconds) break;
    }
  }
  if (batch.empty()) {
    if (specialize && p == Processor::kCpu) cpu_idled_ = true;
    return;
  }
  const bool stole = specialize && std::any_of(batch.begin(), batch.end(),
                                               [](const Taken& t) { return t.stolen; });
  // A CPU worker that had to steal from the GPU's queue had nothing of its own: for theta, as
  // good as idle (it can take more of the queries it is best at).
  if (stole && p == Processor::kCpu) cpu_idled_ = true;
  if (specialize && p == Processor::kGpu) {
    // theta follows the load: stealing means the CPU's share is more than it answers;
    // a CPU worker idle now, or since the last call, that it can answer more. With
    // balance_waits, the CPU's queue waiting longer than the GPU's says the same as a steal,
    // also when the GPU's own queue fills its batch and it cannot steal.
    // idle_workers_ counts a worker between two calls (its bookkeeping, its completions, its
    // wait for the lock) as idle: with eight CPU workers one almost always is, and theta rose
    // at nearly every call while the CPU's queue grew (session 34, call J's timelines). With
    // balance_waits only a CPU worker that found nothing to take counts: since the last call, or
    // still asleep for want of a job now.
    const bool balance = options_.specialize_balance_waits;
    const bool cpu_behind = balance && cpu_head_wait > gpu_head_wait;
    const bool cpu_free =
        cpu_idled_ || (balance ? waiting_workers_[std::size_t(Processor::kCpu)] > 0
                               : idle_workers_[std::size_t(Processor::kCpu)] > 0);
    if (stole || cpu_behind) {
      log_theta_ -= options_.specialize_step;
      ++theta_down_;
    } else if (cpu_free) {
      log_theta_ += options_.specialize_step;
      ++theta_up_;
    }
    log_theta_ = std::clamp(log_theta_, -20.0, 20.0);
    cpu_idled_ = false;
    if (theta_trace_.size() < options_.theta_trace_limit)
      theta_trace_.push_back(
          {std::chrono::duration<double>(now.time_since_epoch()).count(), std::exp(log_theta_)});
  }
  --idle_workers_[std::size_t(p)];
  ++running_calls_;
  predicted = 0;
  for (const Taken& t : batch) predicted += t.predicted;
  if (router_) router_->call_started(p, predicted);
  // Jobs left for p: another idle worker of p takes them. p now busy: the other processor
  // may steal from p's queue.
  if (can_take(p)) notify(p);
  if (options_.policy == SchedulerPolicy::kQueues && idle_workers_[std::size_t(p)] == 0 &&
      !queue(own_queue(p)).empty())
    notify(other(p));
  counters_[std::size_t(p)].take_hold_seconds += seconds_between(now, Clock::now());
}

void CoProcessorScheduler::worker_main(Processor p) {
  const ProcessorSlot slot = slots_[std::size_t(p)];
  std::vector<Taken> batch, next;
  double predicted = 0, next_predicted = 0;  // the batches' predicted seconds on p
  std::vector<Query> queries;
  std::vector<ShardResult> results;
  std::vector<JobOutcome> outcomes;
  const bool specialize =
      options_.policy == SchedulerPolicy::kQueues && options_.routing == QueuesRouting::kSpecialize;
  std::unique_lock lock(mutex_);
  ++idle_workers_[std::size_t(p)];
  ready_.notify_all();
  bool chained = false;  // `batch` was taken when the last call ended (chain_next_batch)
  for (;;) {
    if (!chained) {
      // Urgency needs no timer: it changes only the order in which a worker takes jobs, never
      // whether it can take one.
      if (specialize && p == Processor::kCpu && !can_take(p)) cpu_idled_ = true;
      ++waiting_workers_[std::size_t(p)];
      wake_[std::size_t(p)].wait(lock, [&] { return stop_ || can_take(p); });
      --waiting_workers_[std::size_t(p)];
      if (stop_) return;
      form_batch_locked(p, batch, predicted);
      if (batch.empty()) continue;
      lock.unlock();
    }
    chained = false;

    // One engine call for the batch, or, for a processor that answers one query per call
    // (max_batch 1) and took several jobs at once, one call per job.
    outcomes.assign(batch.size(), JobOutcome{});
    std::string error;  // the first engine error of the take
    double busy = 0, thread_busy = 0;
    std::uint64_t calls = 0, missed = 0, stolen = 0, promoted = 0;
    const std::size_t per_call = slot.max_batch == 1 ? 1 : batch.size();
    const bool thread_clock = options_.observe_clock[std::size_t(p)] == CostClock::kThreadCpu;
    for (std::size_t first = 0; first < batch.size(); first += per_call) {
      const std::size_t end = std::min(batch.size(), first + per_call);
      queries.clear();
      results.assign(end - first, ShardResult{});
      for (std::size_t i = first; i < end; ++i) queries.push_back(*batch[i].job.query);
      std::string call_error;
      const double cpu0 = metrics::thread_cpu_seconds();
      const auto t0 = Clock::now();
      try {
        slot.engine->search(queries, batch[first].job.params, results);
      } catch (const std::exception& e) {
        call_error = e.what();
      }
      const auto t1 = Clock::now();
      const double call_thread_seconds = metrics::thread_cpu_seconds() - cpu0;
      if (options_.observe && end - first == 1 && call_error.empty())
        options_.observe(p, batch[first].job.features,
                         thread_clock ? call_thread_seconds : seconds_between(t0, t1));
      for (std::size_t i = first; i < end; ++i) {
        Job& j = batch[i].job;
        JobOutcome& o = outcomes[i];
        o.ran_on = p;
        o.preferred = batch[i].preferred;
        o.queued_in = j.queue;
        o.stolen = batch[i].stolen;
        o.promoted = batch[i].promoted;
        o.missed_deadline = t1 > j.deadline;
        o.batch_size = end - first;
        o.wait_seconds = seconds_between(j.arrival, t0);
        o.service_seconds = seconds_between(t0, t1);
        o.error = call_error;
        if (call_error.empty()) *j.out = std::move(results[i - first]);
        missed += o.missed_deadline;
        stolen += o.stolen;
        promoted += o.promoted;
      }
      ++calls;
      busy += seconds_between(t0, t1);
      thread_busy += call_thread_seconds;
      if (error.empty()) error = call_error;
    }

    // The GPU's batch cost model's input, summed before the lock is taken.
    double postings = 0;
    if (specialize && p == Processor::kGpu)
      for (const Taken& t : batch) postings += t.job.features.total;

    // The worker counts as idle again, and the counters are current, before anyone hears that
    // its jobs are done: a caller that submits on completion sees this worker free (so the
    // other processor does not steal the job) and sees the stats of what it waited for.
    const auto asked = Clock::now();
    lock.lock();
    counters_[std::size_t(p)].lock_wait_seconds += seconds_between(asked, Clock::now());
    --running_calls_;
    ++idle_workers_[std::size_t(p)];
    Counters& c = counters_[std::size_t(p)];
    c.jobs += batch.size();
    c.calls += calls;
    ++c.takes;
    c.stolen += stolen;
    c.promoted += promoted;
    c.missed += missed;
    c.errors += !error.empty();
    c.busy_seconds += busy;
    c.busy_thread_seconds += thread_busy;
    if (router_) router_->call_finished(p, predicted, busy, error.empty());
    if (specialize && p == Processor::kGpu && error.empty())
      gpu_batch_cost_.observe(double(batch.size()), postings, busy);
    // Serialized (best-serial): the end of a call lets either processor start the next.
    if (options_.policy == SchedulerPolicy::kBestSerial) {
      notify(Processor::kCpu);
      notify(Processor::kGpu);
    }
    // chain_next_batch: the next batch is taken in this same critical section, and run right
    // after this one's completions, so a worker takes the lock once a call instead of twice.
    if (options_.chain_next_batch && !stop_ && can_take(p)) {
      form_batch_locked(p, next, next_predicted);
      chained = !next.empty();
    }
    lock.unlock();
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].job.done) batch[i].job.done(outcomes[i]);
    // Done with here, not at the next take under the lock (the completions' state goes with
    // them).
    batch.clear();
    if (chained) {
      std::swap(batch, next);
      predicted = next_predicted;
      continue;  // without the lock: the chained batch runs now
    }
    const auto asked_again = Clock::now();
    lock.lock();
    counters_[std::size_t(p)].lock_wait_seconds += seconds_between(asked_again, Clock::now());
  }
}

void CoProcessorScheduler::drop_waiting() {
  std::vector<QueuedJob> dropped;
  {
    std::lock_guard lock(mutex_);
    for (JobRing& q : queues_) {
      for (std::size_t i = 0; i < q.size(); ++i) dropped.push_back(std::move(q[i]));
      q.clear();
    }
    if (router_)
      for (std::size_t p = 0; p < kProcessors; ++p) router_->dequeued(Processor(p), {}, true);
    dropped_ += dropped.size();
  }
  for (QueuedJob& queued : dropped) {
    JobOutcome o;
    o.dropped = true;
    o.preferred = queued.preferred;
    o.queued_in = queued.job.queue;
    o.missed_deadline = true;
    if (queued.job.done) queued.job.done(o);
  }
}

}  // namespace gpusearch
