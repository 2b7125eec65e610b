#include "common/online_cache_policy.hpp"

#include <chrono>
#include <cmath>
#include <iterator>

#include <nlohmann/json.hpp>
#include <tbb/parallel_for.h>

#include "common/error.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

namespace {
// Weights are kept as 2^(log2_weight - rescale point); past this exponent every stored weight
// is scaled down, so doubles never overflow.
constexpr double kRescaleLog2 = 64.0;
// Visits lighter than this share of the newest one are forgotten at a replan.
constexpr double kForgetShare = 1e-4;
}  // namespace

OnlineCachePolicy::OnlineCachePolicy(const ShardIndex& shard, OnlinePolicyOptions options)
    : shard_(shard), options_(options) {
  if (!(options_.lambda > 0.0 && options_.lambda <= 1.0))
    throw InputError("--cache-lambda", 0, "must be in (0, 1]");
  if (!(options_.half_life_queries > 0))
    throw InputError("--cache-half-life", 0, "must be more than 0 queries");
  if (options_.replan_queries == 0) throw InputError("--cache-replan", 0, "must be at least 1");
  options_.sample_every = std::max(1u, options_.sample_every);
  options_.max_pending = std::max<std::size_t>(1, options_.max_pending);
  thread_ = std::thread([this] { run(); });
}

OnlineCachePolicy::~OnlineCachePolicy() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
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
  tbb::parallel_for(std::size_t(0), training.size(), [&](std::size_t i) {
    reads[i] = simulate_and_reads(shard_, training[i], options_.k, options_.scoring);
  });
  // The log as the stream's past: served queries before position 0 weigh
  // integral of 2^(p/h) dp over p < 0 = h / ln 2 together; the log's queries share that.
  const double w =
      training.empty() ? 1.0 : options_.half_life_queries / std::log(2.0) / double(training.size());
  for (std::size_t i = 0; i < training.size(); ++i) add_reads(training[i], std::log2(w), reads[i]);
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<CachedList> plan = make_plan();
  const auto t2 = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  replay_seconds_ += std::chrono::duration<double>(t1 - t0).count();
  plan_seconds_ += std::chrono::duration<double>(t2 - t1).count();
  plan_ = std::move(plan);
  ++plans_;
  busy_ = false;
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
  return std::exchange(plan_, std::nullopt);
}

void OnlineCachePolicy::drain() {
  std::unique_lock lock(mutex_);
  plan_requested_ = true;
  wake_.notify_one();
  idle_.wait(lock, [this] { return pending_.empty() && !busy_ && !plan_requested_; });
}

void OnlineCachePolicy::add_reads(const Query& q, double log2_weight,
                                  const std::vector<ListRead>& reads) {
  if (log2_weight > kRescaleLog2) {
    // Scale every stored weight down by 2^log2_weight: the new visit weighs 1 from here on.
    const double scale = std::exp2(-log2_weight);
    for (auto& [t, v] : visits_) {
      v.query_frequency *= scale;
      for (auto& p : v.prefixes) p.second *= scale;
    }
    base_position_ += log2_weight * options_.half_life_queries;
    newest_log2_weight_ -= log2_weight;
    log2_weight = 0;
  }
  newest_log2_weight_ = std::max(newest_log2_weight_, log2_weight);
  const double w = std::exp2(log2_weight);
  for (TermId t : q.terms) visits_[t].query_frequency += w;
  for (const ListRead& r : reads) visits_[r.term].prefixes.push_back({r.blocks, w});
}

void OnlineCachePolicy::replay(std::span<const Pending> work) {
  // Replays in parallel (the expensive part), visits added in arrival order.
  std::vector<std::vector<ListRead>> reads(work.size());
  tbb::parallel_for(std::size_t(0), work.size(), [&](std::size_t i) {
    reads[i] = simulate_and_reads(shard_, work[i].query, options_.k, options_.scoring);
  });
  for (std::size_t i = 0; i < work.size(); ++i)
    add_reads(work[i].query,
              (double(work[i].position) - base_position_) / options_.half_life_queries, reads[i]);
}

std::vector<CachedList> OnlineCachePolicy::make_plan() {
  // Forget what weighs next to nothing now; merge equal prefix lengths.
  const double floor = std::exp2(newest_log2_weight_) * kForgetShare;
  for (auto it = visits_.begin(); it != visits_.end();) {
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
      it = visits_.erase(it);
    else
      ++it;
  }
  return admit_lists(shard_, visits_, {options_.policy, options_.lambda, options_.budget_bytes});
}

void OnlineCachePolicy::run() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !pending_.empty() || plan_requested_; });
    if (stop_) return;
    busy_ = true;
    // At most what completes the next plan: a backlog is worked off plan by plan, each on the
    // queue's oldest (still recent: the queue keeps the newest) queries.
    const std::size_t n = std::min<std::size_t>(
        pending_.size(), std::max<std::uint64_t>(1, options_.replan_queries - since_plan_));
    std::vector<Pending> work(std::make_move_iterator(pending_.begin()),
                              std::make_move_iterator(pending_.begin() + std::ptrdiff_t(n)));
    pending_.erase(pending_.begin(), pending_.begin() + std::ptrdiff_t(n));
    // A drain's plan once the queue is empty.
    const bool requested = pending_.empty() && std::exchange(plan_requested_, false);
    lock.unlock();
    const auto t0 = Clock::now();
    replay(work);
    const auto t1 = Clock::now();
    const std::uint64_t since = since_plan_ + n;
    std::optional<std::vector<CachedList>> plan;
    if (since >= options_.replan_queries || (requested && since > 0)) plan = make_plan();
    const auto t2 = Clock::now();
    lock.lock();
    replayed_ += n;
    since_plan_ = since;
    replay_seconds_ += std::chrono::duration<double>(t1 - t0).count();
    if (plan) {
      plan_ = std::move(plan);
      ++plans_;
      since_plan_ = 0;
      last_plan_position_ = work.empty() ? last_plan_position_ : work.back().position;
      plan_seconds_ += std::chrono::duration<double>(t2 - t1).count();
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
          {"sample_every", options_.sample_every},
          {"max_pending", options_.max_pending},
          {"observed", observed_},
          {"sampled", sampled_},
          {"replayed", replayed_},
          {"dropped", dropped_},
          {"plans", plans_},
          {"last_plan_position", last_plan_position_},
          {"pending", pending_.size()},
          {"replay_seconds", replay_seconds_},
          {"plan_seconds", plan_seconds_}};
}

}  // namespace gpusearch
