// SchedulerEngine (declared in isn/coprocessor_scheduler.hpp): the co-processor scheduler as an
// ISN engine, owning both engines and training the cost predictor at the first batch.
#include <fmt/format.h>

#include "common/error.hpp"
#include "isn/coprocessor_scheduler.hpp"

namespace gpusearch {

SchedulerEngine::SchedulerEngine(const ShardIndex& shard, std::unique_ptr<QueryEngine> cpu,
                                 std::unique_ptr<QueryEngine> gpu, ProcessorSlot cpu_slot,
                                 ProcessorSlot gpu_slot, SchedulerOptions options, Trainer train)
    : shard_(shard),
      cpu_(std::move(cpu)),
      gpu_(std::move(gpu)),
      cpu_slot_(cpu_slot),
      gpu_slot_(gpu_slot),
      options_(std::move(options)),
      train_(std::move(train)) {
  cpu_slot_.engine = cpu_.get();
  gpu_slot_.engine = gpu_.get();
  name_ =
      fmt::format("scheduler-{}({}+{})", to_string(options_.policy), cpu_->name(), gpu_->name());
  const bool needs_estimate = options_.policy == SchedulerPolicy::kQueues ||
                              options_.policy == SchedulerPolicy::kBestSerial;
  if (needs_estimate && !options_.estimate && !train_)
    throw InputError("--scheduler", 0,
                     fmt::format("scheduler '{}' needs training queries for its cost predictor",
                                 to_string(options_.policy)));
  if (!needs_estimate || options_.estimate)
    scheduler_ = std::make_unique<CoProcessorScheduler>(shard_, cpu_slot_, gpu_slot_, options_);
}

void SchedulerEngine::prepare(const SearchParams& params) {
  if (scheduler_) return;
  TrainedCosts trained = train_(params, *cpu_, *gpu_, training_report_);
  options_.estimate = std::move(trained.estimate);
  if (trained.observe) options_.observe = std::move(trained.observe);
  online_stats_ = std::move(trained.stats);
  scheduler_ = std::make_unique<CoProcessorScheduler>(shard_, cpu_slot_, gpu_slot_, options_);
}

void SchedulerEngine::search(std::span<const Query> queries, const SearchParams& params,
                             std::span<ShardResult> out) {
  prepare(params);
  scheduler_->search_batch(queries, params, out);
}

void SchedulerEngine::submit_batch(std::span<const Query> queries, const SearchParams& params,
                                   std::span<ShardResult> out,
                                   CoProcessorScheduler::BatchDone done) {
  prepare(params);
  scheduler_->submit_batch(queries, params, out, std::move(done));
}

nlohmann::json SchedulerEngine::stats() const {
  nlohmann::json j = scheduler_ ? scheduler_->stats() : nlohmann::json::object();
  if (!training_report_.is_null()) j["predictor"] = training_report_;
  if (online_stats_) j["predictor"]["online"] = online_stats_();
  return j;
}

}  // namespace gpusearch
