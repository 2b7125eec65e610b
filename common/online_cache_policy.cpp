#include "common/online_cache_policy.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iterator>
#include <numeric>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <tbb/parallel_for.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

namespace {
// Weights are kept as 2^(log2_weight - rescale point); past this exponent every stored weight
// is scaled down, so doubles never overflow.
constexpr double kRescaleLog2 = 64.0;
// Visits lighter than this share of the newest one are forgotten at a replan.
constexpr double kForgetShare = 1e-4;

// Lowers the calling thread's scheduling class; returns what it got.
std::string lower_this_thread(PlannerPriority priority) {
  if (priority == PlannerPriority::kNormal) return "normal";
  sched_param param{};
  if (sched_setscheduler(0, SCHED_IDLE, &param) == 0) return "idle";  // 0: this thread
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19) == 0) return "nice 19";
  return "normal";
}

std::unordered_map<TermId, std::uint32_t> by_term(std::span<const CachedList> lists) {
  std::unordered_map<TermId, std::uint32_t> out;
  out.reserve(lists.size());
  for (const CachedList& l : lists) out[l.term] = l.blocks;
  return out;
}
}  // namespace

const char* to_string(PlannerPriority p) {
  return p == PlannerPriority::kIdle ? "idle" : "normal";
}

PlannerPriority parse_planner_priority(const std::string& s) {
  if (s == "idle") return PlannerPriority::kIdle;
  if (s == "normal") return PlannerPriority::kNormal;
  throw InputError("--cache-planner-priority", 0, "must be idle or normal, not '" + s + "'");
}

OnlineCachePolicy::OnlineCachePolicy(const ShardIndex& shard, OnlinePolicyOptions options)
    : shard_(shard), options_(options) {
  if (!(options_.lambda > 0.0 && options_.lambda <= 1.0))
    throw InputError("--cache-lambda", 0, "must be in (0, 1]");
  if (!(options_.half_life_queries > 0))
    throw InputError("--cache-half-life", 0, "must be more than 0 queries");
  if (options_.replan_queries == 0) throw InputError("--cache-replan", 0, "must be at least 1");
  if (options_.replan_backoff_max == 0)
    throw InputError("--cache-replan-backoff", 0, "must be at least 1 (1: no back-off)");
  options_.sample_every = std::max(1u, options_.sample_every);
  options_.max_pending = std::max<std::size_t>(1, options_.max_pending);
  options_.planner_threads = std::max(1u, options_.planner_threads);
  if (!(options_.min_payoff >= 0)) throw InputError("--cache-min-payoff", 0, "must be >= 0");
  if (!(options_.payoff_horizon_queries >= 0))
    throw InputError("--cache-payoff-horizon", 0, "must be >= 0 queries");
  if (!(options_.min_gain >= 0)) throw InputError("--cache-min-gain", 0, "must be >= 0");
  if (options_.payoff_horizon_queries == 0)
    options_.payoff_horizon_queries = options_.half_life_queries;
  thread_ = std::thread([this] { run(); });
  // The thread lowers its own priority first: wait for it, so that planner_sched_policy() and
  // stats() tell what it runs at.
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return started_; });
}

OnlineCachePolicy::~OnlineCachePolicy() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  gaps_.stop();  // a planner paused for a call cuts its work short
  wake_.notify_all();
  plan_ready_.notify_all();
  thread_.join();
}

void OnlineCachePolicy::seed(std::span<const Query> training) {
  {
    std::lock_guard lock(mutex_);
    if (observed_ > 0 || busy_ || plans_ > 0)
      throw Error("OnlineCachePolicy::seed: only before the first observed query");
    busy_ = true;  // the thread owns visits_ otherwise; it has nothing to do before observe()
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<ListRead>> reads(training.size());
  std::vector<const Query*> queries;
  queries.reserve(training.size());
  for (const Query& q : training) queries.push_back(&q);
  reads_with_memo(queries, reads, [&](std::span<const std::size_t> misses) {
    tbb::parallel_for(std::size_t(0), misses.size(), [&](std::size_t m) {
      reads[misses[m]] = reads_of(training[misses[m]]);
    });
    return true;
  });
  // The log as the stream's past: served queries before position 0 weigh
  // integral of 2^(p/h) dp over p < 0 = h / ln 2 together; the log's queries share that.
  const double w =
      training.empty() ? 1.0 : options_.half_life_queries / std::log(2.0) / double(training.size());
  for (std::size_t i = 0; i < training.size(); ++i)
    add_reads(training[i], std::log2(w), reads[i], /*served=*/false);
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<CachedList> plan = make_plan();
  const auto t2 = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  replay_seconds_ += std::chrono::duration<double>(t1 - t0).count();
  plan_seconds_ += std::chrono::duration<double>(t2 - t1).count();
  plan_ = std::move(plan);
  ++plans_;
  busy_ = false;
  plan_ready_.notify_all();
}

void OnlineCachePolicy::observe(std::span<const Query> queries) {
  {
    std::lock_guard lock(mutex_);
    for (const Query& q : queries) {
      const std::uint64_t position = observed_++;
      if (position % options_.sample_every != 0) continue;
      ++sampled_;
      if (pending_.size() >= options_.max_pending) {
        pending_.pop_front();  // the oldest: the thread follows the live stream
        ++dropped_;
      }
      pending_.push_back({q, position});
    }
  }
  wake_.notify_one();
}

std::optional<std::vector<CachedList>> OnlineCachePolicy::take_plan() {
  std::lock_guard lock(mutex_);
  return take_plan_locked();
}

std::optional<std::vector<CachedList>> OnlineCachePolicy::wait_plan(
    std::chrono::milliseconds timeout, std::atomic<bool>* taken) {
  std::unique_lock lock(mutex_);
  plan_ready_.wait_for(lock, timeout, [this] { return stop_ || plan_.has_value(); });
  if (stop_) return std::nullopt;
  auto plan = take_plan_locked();
  if (plan && taken) taken->store(true, std::memory_order_release);
  return plan;
}

bool OnlineCachePolicy::has_plan() const {
  std::lock_guard lock(mutex_);
  return plan_.has_value();
}

std::optional<std::vector<CachedList>> OnlineCachePolicy::take_plan_locked() {
  auto plan = std::exchange(plan_, std::nullopt);
  if (plan && !cache_reported_) {
    held_ = by_term(*plan);
    has_baseline_ = true;
  }
  return plan;
}

void OnlineCachePolicy::report_cache(std::span<const CachedList> held) {
  auto map = by_term(held);
  std::lock_guard lock(mutex_);
  held_ = std::move(map);
  has_baseline_ = cache_reported_ = true;
}

int OnlineCachePolicy::planner_sched_policy() const {
  int policy = -1;
  sched_param param{};
  if (pthread_getschedparam(const_cast<std::thread&>(thread_).native_handle(), &policy, &param) !=
      0)
    return -1;
  return policy;
}

void OnlineCachePolicy::drain(bool plan_the_rest) {
  std::unique_lock lock(mutex_);
  plan_requested_ = plan_the_rest;
  wake_.notify_one();
  idle_.wait(lock, [this] { return pending_.empty() && !busy_ && !plan_requested_; });
}

void OnlineCachePolicy::Visits::add(const Query& q, double w, const std::vector<ListRead>& reads) {
  total_weight += w;
  for (TermId t : q.terms) log[t].query_frequency += w;
  for (const ListRead& r : reads) log[r.term].prefixes.push_back({r.blocks, w});
}

void OnlineCachePolicy::Visits::scale(double s) {
  for (auto& [t, v] : log) {
    v.query_frequency *= s;
    for (auto& p : v.prefixes) p.second *= s;
  }
  total_weight *= s;
}

void OnlineCachePolicy::Visits::compact(double floor, ServingGaps* gaps) {
  for (auto it = log.begin(); it != log.end();) {
    if (gaps) gaps->pause_point();
    auto& v = it->second;
    std::sort(v.prefixes.begin(), v.prefixes.end());
    std::vector<std::pair<std::uint32_t, double>> merged;
    for (const auto& p : v.prefixes) {
      if (!merged.empty() && merged.back().first == p.first)
        merged.back().second += p.second;
      else
        merged.push_back(p);
    }
    std::erase_if(merged, [&](const auto& p) { return p.second < floor; });
    v.prefixes = std::move(merged);
    if (v.prefixes.empty() && v.query_frequency < floor)
      it = log.erase(it);
    else
      ++it;
  }
}

void OnlineCachePolicy::add_reads(const Query& q, double log2_weight,
                                  const std::vector<ListRead>& reads, bool served) {
  if (log2_weight > kRescaleLog2) {
    // Scale every stored weight down by 2^log2_weight: the new visit weighs 1 from here on.
    const double scale = std::exp2(-log2_weight);
    visits_.scale(scale);
    for (Visits& h : halves_) h.scale(scale);
    base_position_ += log2_weight * options_.half_life_queries;
    newest_log2_weight_ -= log2_weight;
    log2_weight = 0;
  }
  newest_log2_weight_ = std::max(newest_log2_weight_, log2_weight);
  const double w = std::exp2(log2_weight);
  visits_.add(q, w, reads);
  // The gate fits on the seed and every other served query and scores on the rest: the held
  // cache was planned from the seed, so scoring on it would favour the held cache.
  if (options_.min_payoff > 0) halves_[served ? added_++ % 2 : 0].add(q, w, reads);
}

std::vector<ListRead> OnlineCachePolicy::reads_of(const Query& q) const {
  if (options_.policy == CachePolicy::kVfb)
    return simulate_and_reads(shard_, q, options_.k, options_.scoring);
  // resolve_query makes a Query's terms distinct; a repeat from elsewhere only weighs twice.
  std::vector<ListRead> reads;
  reads.reserve(q.terms.size());
  for (TermId t : q.terms)
    if (const std::uint32_t blocks = shard_.term(t).num_blocks; blocks > 0)
      reads.push_back({t, blocks});
  return reads;
}

std::size_t OnlineCachePolicy::TermsHash::operator()(const std::vector<TermId>& terms) const
    noexcept {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the term ids
  for (TermId t : terms) h = (h ^ t) * 1099511628211ull;
  return std::size_t(h);
}

template <typename ReplayMisses>
void OnlineCachePolicy::reads_with_memo(std::span<const Query* const> queries,
                                        std::vector<std::vector<ListRead>>& reads,
                                        ReplayMisses&& replay_misses) {
  const bool memo = options_.policy == CachePolicy::kVfb && options_.replay_memo_entries > 0;
  std::vector<std::size_t> misses;
  std::vector<std::pair<std::size_t, std::size_t>> repeats;  // (query, its first in the batch)
  std::uint64_t hits = 0;
  if (memo) {
    std::unordered_map<std::vector<TermId>, std::size_t, TermsHash> first_in_batch;
    std::lock_guard lock(memo_mutex_);
    for (std::size_t i = 0; i < queries.size(); ++i) {
      const auto& terms = queries[i]->terms;
      if (const auto it = memo_.find(terms); it != memo_.end()) {
        reads[i] = it->second;
        ++hits;
      } else if (const auto [f, fresh] = first_in_batch.try_emplace(terms, i); !fresh) {
        repeats.emplace_back(i, f->second);
        ++hits;
      } else {
        misses.push_back(i);
      }
    }
  } else {
    misses.resize(queries.size());
    std::iota(misses.begin(), misses.end(), std::size_t(0));
  }
  if (!replay_misses(std::span<const std::size_t>(misses))) return;
  for (const auto& [i, j] : repeats) reads[i] = reads[j];
  if (memo) {
    std::lock_guard lock(memo_mutex_);
    if (memo_.size() + misses.size() > options_.replay_memo_entries) {
      memo_.clear();
      std::lock_guard stats_lock(mutex_);
      ++memo_clears_;
    }
    for (std::size_t i : misses)
      if (memo_.size() < options_.replay_memo_entries) memo_.emplace(queries[i]->terms, reads[i]);
  }
  if (hits > 0) {
    std::lock_guard lock(mutex_);
    memo_hits_ += hits;
  }
}

bool OnlineCachePolicy::replay(std::span<const Pending> work) {
  // Replays on planner_threads threads of the planner's priority (the expensive part; not on
  // TBB's workers, which serve), visits added in arrival order; repeats of a query replayed
  // before come from the memo.
  std::vector<std::vector<ListRead>> reads(work.size());
  std::vector<const Query*> queries;
  queries.reserve(work.size());
  for (const Pending& p : work) queries.push_back(&p.query);
  std::atomic<bool> stopped{false};
  reads_with_memo(queries, reads, [&](std::span<const std::size_t> misses) {
    std::atomic<std::size_t> next{0};
    auto replay_some = [&] {
      for (std::size_t m; (m = next.fetch_add(1, std::memory_order_relaxed)) < misses.size();) {
        if (!pause_point()) {  // the policy stops: leave the rest
          stopped.store(true, std::memory_order_relaxed);
          return;
        }
        reads[misses[m]] = reads_of(work[misses[m]].query);
      }
    };
    std::vector<std::thread> helpers;
    // Whole-list policies only count (reads_of replays nothing): no helper threads for that.
    const std::size_t extra =
        options_.policy != CachePolicy::kVfb
            ? 0
            : std::min<std::size_t>(options_.planner_threads - 1,
                                    misses.empty() ? 0 : misses.size() - 1);
    for (std::size_t h = 0; h < extra; ++h)
      helpers.emplace_back([&] {
        lower_this_thread(options_.planner_priority);
        replay_some();
      });
    replay_some();
    for (std::thread& h : helpers) h.join();
    return !stopped.load(std::memory_order_relaxed);
  });
  if (stopped.load(std::memory_order_relaxed)) return false;
  for (std::size_t i = 0; i < work.size(); ++i)
    add_reads(work[i].query,
              (double(work[i].position) - base_position_) / options_.half_life_queries, reads[i],
              /*served=*/true);
  return true;
}

std::vector<CachedList> OnlineCachePolicy::make_plan(Visits& v) {
  // Forget what weighs next to nothing now; merge equal prefix lengths.
  v.compact(std::exp2(newest_log2_weight_) * kForgetShare, gaps_if_pausing());
  return admit_lists(shard_, v.log,
                     {.policy = options_.policy,
                      .lambda = options_.lambda,
                      .budget_bytes = options_.budget_bytes,
                      .fill_spare = options_.fill_spare},
                     gaps_if_pausing());
}

PlanPayoff OnlineCachePolicy::payoff(const std::vector<CachedList>& plan,
                                     const std::vector<CachedList>& fitted, const Visits& scoring,
                                     const std::unordered_map<TermId, std::uint32_t>& held) {
  PlanPayoff p;
  auto bytes_of = [&](TermId t, std::uint32_t blocks) {
    return blocks ? double(blocks_bytes(shard_, shard_.term(t).first_block, blocks)) : 0.0;
  };
  // The visit-weighted bytes the queries read from a cached prefix of `cached` blocks of t.
  auto read_from = [&](TermId t, std::uint32_t cached) {
    const auto it = scoring.log.find(t);
    if (cached == 0 || it == scoring.log.end()) return 0.0;
    double sum = 0;
    for (const auto& [blocks, w] : it->second.prefixes)
      sum += w * bytes_of(t, std::min(blocks, cached));
    return sum;
  };
  // The bytes the handed-over plan copies in.
  double copy = 0;
  for (const CachedList& l : plan) {
    pause_point();
    const auto it = held.find(l.term);
    const std::uint32_t have = it == held.end() ? 0 : it->second;
    if (l.blocks > have) copy += bytes_of(l.term, l.blocks) - bytes_of(l.term, have);
  }
  p.copy_bytes = copy;
  if (!(scoring.total_weight > 0)) return p;
  // The saving of the plan fitted on the other half, scored on this one.
  const auto planned = by_term(fitted);
  double held_read = 0, saving = 0;
  for (const auto& [t, have] : held) {
    pause_point();
    const double now = read_from(t, have);
    held_read += now;
    if (!planned.contains(t)) saving -= now;  // leaves the cache
  }
  for (const auto& [t, want] : planned) {
    pause_point();
    const auto it = held.find(t);
    const std::uint32_t have = it == held.end() ? 0 : it->second;
    if (want == have) continue;
    saving += read_from(t, want) - read_from(t, have);
  }
  p.held_bytes_per_query = held_read / scoring.total_weight;
  p.saving_per_query = saving / scoring.total_weight;
  p.pays = p.saving_per_query > 0 &&
           p.saving_per_query * options_.payoff_horizon_queries >= options_.min_payoff * copy &&
           p.saving_per_query > options_.min_gain * p.held_bytes_per_query;
  return p;
}

void OnlineCachePolicy::run() {
  using Clock = std::chrono::steady_clock;
  const std::string achieved = lower_this_thread(options_.planner_priority);
  std::unique_lock lock(mutex_);
  planner_priority_ = achieved;
  started_ = true;
  idle_.notify_all();
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !pending_.empty() || plan_requested_; });
    if (stop_) return;
    busy_ = true;
    // At most what completes the next plan: a backlog is worked off plan by plan, each on the
    // queue's oldest (still recent: the queue keeps the newest) queries.
    const std::uint64_t replan = replayed_per_plan() * replan_scale_;
    const std::size_t n =
        std::min<std::size_t>(pending_.size(), replan > since_plan_ ? replan - since_plan_ : 1);
    std::vector<Pending> work(std::make_move_iterator(pending_.begin()),
                              std::make_move_iterator(pending_.begin() + std::ptrdiff_t(n)));
    pending_.erase(pending_.begin(), pending_.begin() + std::ptrdiff_t(n));
    // A drain's plan once the queue is empty.
    const bool requested = pending_.empty() && std::exchange(plan_requested_, false);
    lock.unlock();
    // Timed without this thread's pauses for calls (the work, not the waiting).
    auto paused = [] { return ServingGaps::this_thread_paused_seconds(); };
    const auto t0 = Clock::now();
    const double p0 = paused();
    if (!replay(work)) return;  // stopped while paused for a call
    const auto t1 = Clock::now();
    const double p1 = paused();
    const std::uint64_t since = since_plan_ + n;
    std::optional<std::vector<CachedList>> plan;
    std::optional<PlanPayoff> gate;
    if (since >= replan || (requested && since > 0)) {
      plan = make_plan();
      if (options_.min_payoff > 0) {
        // Against what the engine holds (copied: the engine may report a change meanwhile).
        lock.lock();
        const bool baseline = has_baseline_;
        const auto held = baseline ? held_ : std::unordered_map<TermId, std::uint32_t>{};
        lock.unlock();
        if (baseline) {
          halves_[1].compact(std::exp2(newest_log2_weight_) * kForgetShare, gaps_if_pausing());
          gate = payoff(*plan, make_plan(halves_[0]), halves_[1], held);
        }
      }
    }
    const auto t2 = Clock::now();
    const double p2 = paused();
    lock.lock();
    if (gate) last_payoff_ = *gate;
    const bool withheld = plan && gate && !gate->pays;
    replayed_ += n;
    since_plan_ = since;
    replay_seconds_ += std::chrono::duration<double>(t1 - t0).count() - (p1 - p0);
    if (plan) {
      since_plan_ = 0;
      plan_seconds_ += std::chrono::duration<double>(t2 - t1).count() - (p2 - p1);
      if (withheld) {
        ++plans_withheld_;  // the held cache serves this mix about as well: no change
        replan_scale_ = std::min(replan_scale_ * 2, options_.replan_backoff_max);
      } else {
        replan_scale_ = 1;
        plan_ = std::move(plan);
        ++plans_;
        plan_ready_.notify_all();
        last_plan_position_ = work.empty() ? last_plan_position_ : work.back().position;
      }
    }
    busy_ = false;
    if (pending_.empty() && !plan_requested_) idle_.notify_all();
  }
}

nlohmann::json OnlineCachePolicy::stats() const {
  std::lock_guard lock(mutex_);
  return {{"policy", to_string(options_.policy)},
          {"lambda", options_.lambda},
          {"budget_bytes", options_.budget_bytes},
          {"half_life_queries", options_.half_life_queries},
          {"replan_queries", options_.replan_queries},
          {"replan_backoff_max", options_.replan_backoff_max},
          {"replan_interval_now", options_.replan_queries * replan_scale_},
          {"sample_every", options_.sample_every},
          {"max_pending", options_.max_pending},
          {"observed", observed_},
          {"sampled", sampled_},
          {"replayed", replayed_},
          {"replay_memo_hits", memo_hits_},
          {"replay_memo_clears", memo_clears_},
          {"replay_memo_entries", options_.replay_memo_entries},
          {"dropped", dropped_},
          {"plans", plans_},
          {"last_plan_position", last_plan_position_},
          {"pending", pending_.size()},
          {"replay_seconds", replay_seconds_},
          {"plan_seconds", plan_seconds_},
          {"planner_priority", planner_priority_},
          {"planner_threads", options_.planner_threads},
          {"pause_while_serving", options_.pause_while_serving},
          {"serving_calls", gaps_.calls()},
          {"planner_pauses", gaps_.pauses()},
          {"planner_paused_seconds", gaps_.paused_seconds()},
          {"min_payoff", options_.min_payoff},
          {"payoff_horizon_queries", options_.payoff_horizon_queries},
          {"min_gain", options_.min_gain},
          {"plans_withheld", plans_withheld_},
          {"last_gate",
           {{"held_bytes_per_query", last_payoff_.held_bytes_per_query},
            {"saving_per_query", last_payoff_.saving_per_query},
            {"copy_bytes", last_payoff_.copy_bytes},
            {"pays", last_payoff_.pays}}}};
}

}  // namespace gpusearch
