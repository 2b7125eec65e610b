#include "common/online_cache_policy.hpp"

#include <cmath>

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

void OnlineCachePolicy::observe(std::span<const Query> queries) {
  {
    std::lock_guard lock(mutex_);
    for (const Query& q : queries) {
      if (observed_++ % options_.sample_every != 0) continue;
      if (pending_.size() >= options_.max_pending) {
        ++dropped_;
        continue;
      }
      pending_.push_back(q);
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

void OnlineCachePolicy::add_reads(const Query& q, const std::vector<ListRead>& reads) {
  log2_weight_ = double(sampled_) / options_.half_life_queries;
  if (log2_weight_ > kRescaleLog2) {
    // Scale every stored weight down by 2^kRescaleLog2 and restart the exponent from there.
    const double scale = std::exp2(-kRescaleLog2);
    for (auto& [t, v] : visits_) {
      v.query_frequency *= scale;
      for (auto& p : v.prefixes) p.second *= scale;
    }
    sampled_ = std::uint64_t(double(sampled_) - kRescaleLog2 * options_.half_life_queries);
    log2_weight_ = double(sampled_) / options_.half_life_queries;
  }
  const double w = std::exp2(log2_weight_);
  for (TermId t : q.terms) visits_[t].query_frequency += w;
  for (const ListRead& r : reads) visits_[r.term].prefixes.push_back({r.blocks, w});
}

std::vector<CachedList> OnlineCachePolicy::make_plan() {
  // Forget what weighs next to nothing now; merge equal prefix lengths.
  const double floor = std::exp2(log2_weight_) * kForgetShare;
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
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !pending_.empty() || plan_requested_; });
    if (stop_) return;
    busy_ = true;
    std::deque<Query> work;
    work.swap(pending_);
    const bool requested = std::exchange(plan_requested_, false);
    lock.unlock();
    bool replan = false;
    // Replays in parallel (the expensive part), visits added in arrival order.
    std::vector<std::vector<ListRead>> reads(work.size());
    tbb::parallel_for(std::size_t(0), work.size(), [&](std::size_t i) {
      reads[i] = simulate_and_reads(shard_, work[i], options_.k, options_.scoring);
    });
    for (std::size_t i = 0; i < work.size(); ++i) {
      add_reads(work[i], reads[i]);
      ++sampled_;
      if (++since_plan_ >= options_.replan_queries) {
        since_plan_ = 0;
        replan = true;
      }
    }
    if (requested && since_plan_ > 0) {
      since_plan_ = 0;
      replan = true;
    }
    std::optional<std::vector<CachedList>> plan;
    if (replan) plan = make_plan();
    lock.lock();
    if (plan) {
      plan_ = std::move(plan);
      ++plans_;
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
          {"observed", observed_},
          {"dropped", dropped_},
          {"plans", plans_},
          {"pending", pending_.size()}};
}

}  // namespace gpusearch
