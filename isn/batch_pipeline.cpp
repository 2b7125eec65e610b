#include "isn/batch_pipeline.hpp"

#include <algorithm>

namespace gpusearch {

BatchPipeline::BatchPipeline(SchedulerEngine& scheduler, unsigned max_in_flight,
                             std::function<void()> on_complete)
    : scheduler_(scheduler),
      max_in_flight_(std::max(1u, max_in_flight)),
      on_complete_(std::move(on_complete)) {}

BatchPipeline::~BatchPipeline() {
  // The scheduler's workers write into the batches in flight: none may outlive them.
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [&] { return running_ == 0; });
}

bool BatchPipeline::has_room() const {
  std::lock_guard lock(mutex_);
  return in_flight_.size() < max_in_flight_;
}

bool BatchPipeline::empty() const {
  std::lock_guard lock(mutex_);
  return in_flight_.empty();
}

bool BatchPipeline::front_complete() const {
  std::lock_guard lock(mutex_);
  return !in_flight_.empty() && in_flight_.front().complete;
}

void BatchPipeline::start(std::unique_ptr<PipelinedBatch>& batch) {
  PipelinedBatch* b = batch.get();
  b->results.assign(b->queries.size(), ShardResult{});
  b->started = Clock::now();
  {
    std::lock_guard lock(mutex_);
    if (incomplete_++ == 0) busy_since_ = b->started;
    peak_incomplete_ = std::max(peak_incomplete_, incomplete_);
    ++running_;
    in_flight_.push_back(Slot{std::move(batch), false});
  }
  auto done = [this, b](const std::string& error) {
    {
      std::lock_guard lock(mutex_);
      b->finished = Clock::now();
      b->error = error;
      for (Slot& s : in_flight_)
        if (s.batch.get() == b) s.complete = true;
      if (--incomplete_ == 0)
        busy_seconds_ += std::chrono::duration<double>(b->finished - busy_since_).count();
    }
    if (on_complete_) on_complete_();
    // Counted out only after the call above: once running_ is 0, no callback touches the ISN.
    std::lock_guard lock(mutex_);
    if (--running_ == 0) drained_.notify_all();
  };
  try {
    scheduler_.submit_batch(b->queries, b->params, b->results, done);
  } catch (...) {
    // Nothing was queued (the scheduler throws before submitting): the batch leaves again.
    std::lock_guard lock(mutex_);
    const auto slot = std::find_if(in_flight_.begin(), in_flight_.end(),
                                   [&](const Slot& s) { return s.batch.get() == b; });
    batch = std::move(slot->batch);
    in_flight_.erase(slot);
    --incomplete_;
    --running_;
    throw;
  }
}

std::unique_ptr<PipelinedBatch> BatchPipeline::take_completed() {
  std::lock_guard lock(mutex_);
  if (in_flight_.empty() || !in_flight_.front().complete) return nullptr;
  std::unique_ptr<PipelinedBatch> b = std::move(in_flight_.front().batch);
  in_flight_.pop_front();
  return b;
}

unsigned BatchPipeline::peak_in_flight() const {
  std::lock_guard lock(mutex_);
  return peak_incomplete_;
}

double BatchPipeline::busy_seconds() const {
  std::lock_guard lock(mutex_);
  return busy_seconds_;
}

}  // namespace gpusearch
