// The scheduler's names (policies, routings, queues: parsed from flags, written in stats) and its
// stats: what a run reports, apart from how it schedules (coprocessor_scheduler.cpp).
#include "isn/coprocessor_scheduler.hpp"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.hpp"

namespace gpusearch {

std::vector<std::string> scheduler_policy_names() {
  return {"cpu", "gpu", "lbd", "queues", "best-serial"};
}

SchedulerPolicy parse_scheduler_policy(std::string_view name) {
  if (name == "cpu") return SchedulerPolicy::kCpu;
  if (name == "gpu") return SchedulerPolicy::kGpu;
  if (name == "lbd") return SchedulerPolicy::kLbd;
  if (name == "queues") return SchedulerPolicy::kQueues;
  if (name == "best-serial") return SchedulerPolicy::kBestSerial;
  throw InputError("--scheduler", 0,
                   fmt::format("unknown scheduler '{}' (one of: {})", name,
                               fmt::join(scheduler_policy_names(), ", ")));
}

std::string_view to_string(SchedulerPolicy p) {
  switch (p) {
    case SchedulerPolicy::kCpu:
      return "cpu";
    case SchedulerPolicy::kGpu:
      return "gpu";
    case SchedulerPolicy::kLbd:
      return "lbd";
    case SchedulerPolicy::kQueues:
      return "queues";
    case SchedulerPolicy::kBestSerial:
      return "best-serial";
  }
  return "?";
}

QueuesRouting parse_queues_routing(std::string_view name) {
  if (name == "capacity") return QueuesRouting::kCapacity;
  if (name == "lone-cost") return QueuesRouting::kLoneCost;
  if (name == "specialize") return QueuesRouting::kSpecialize;
  throw InputError(
      "--scheduler-routing", 0,
      fmt::format("unknown routing '{}' (one of: capacity, lone-cost, specialize)", name));
}

std::string_view to_string(QueuesRouting r) {
  switch (r) {
    case QueuesRouting::kCapacity:
      return "capacity";
    case QueuesRouting::kLoneCost:
      return "lone-cost";
    case QueuesRouting::kSpecialize:
      return "specialize";
  }
  return "?";
}

std::string_view to_string(JobQueue q) {
  switch (q) {
    case JobQueue::kCpuPreferred:
      return "cpu_preferred";
    case JobQueue::kGpuPreferred:
      return "gpu_preferred";
    case JobQueue::kEither:
      return "either";
  }
  return "?";
}

nlohmann::json CoProcessorScheduler::stats() const {
  std::lock_guard lock(mutex_);
  nlohmann::json j = {{"policy", to_string(options_.policy)},
                      {"deadline_ms", options_.deadline.count() / 1000.0},
                      {"urgent_fraction", options_.urgent_fraction},
                      {"routing", to_string(options_.routing)},
                      {"preference_ratio", options_.preference_ratio},
                      {"dropped", dropped_}};
  if (options_.routing == QueuesRouting::kSpecialize)
    j["specialize"] = {{"theta", std::exp(log_theta_)},
                       {"step", options_.specialize_step},
                       {"moves_down", theta_down_},
                       {"moves_up", theta_up_},
                       {"gpu_batch_cost", gpu_batch_cost_.stats()}};
  if (!theta_trace_.empty()) j["specialize"]["theta_trace"] = theta_trace_;
  if (options_.policy == SchedulerPolicy::kLbd) {
    j["lbd_threshold_blocks"] = options_.lbd_threshold_blocks;
    j["lbd_short_on"] = to_string(options_.lbd_short_on);
  }
  if (router_) j["capacity"] = router_->stats();
  j["submit"] = {{"calls", submit_counters_.calls},
                 {"jobs", submit_counters_.jobs},
                 {"lock_wait_seconds", submit_counters_.lock_wait_seconds},
                 {"hold_seconds", submit_counters_.hold_seconds}};
  for (std::size_t q = 0; q < 3; ++q)
    j["queued_in"][std::string(to_string(JobQueue(q)))] = queued_in_[q];
  for (std::size_t p = 0; p < kProcessors; ++p) {
    const Counters& c = counters_[p];
    j["processors"][std::string(to_string(Processor(p)))] = {
        {"engine", std::string(slots_[p].engine->name())},
        {"workers", slots_[p].workers},
        {"max_batch", slots_[p].max_batch},
        {"jobs", c.jobs},
        {"calls", c.calls},
        {"takes", c.takes},
        {"jobs_per_take_limit", slots_[p].max_batch == 1 ? options_.lone_jobs_per_take : 1},
        {"stolen", c.stolen},
        {"promoted", c.promoted},
        {"missed_deadline", c.missed},
        {"errors", c.errors},
        {"busy_seconds", c.busy_seconds},
        {"busy_thread_seconds", c.busy_thread_seconds},
        {"lock_wait_seconds", c.lock_wait_seconds},
        {"take_hold_seconds", c.take_hold_seconds}};
  }
  return j;
}

}  // namespace gpusearch
