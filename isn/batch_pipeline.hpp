// The ISN's batches pipelined through its CPU+GPU scheduler (--scheduler): a batch's jobs are
// queued the moment the batch arrives, not when the previous batch has been answered, so that
// neither processor idles at a batch boundary (one batch at a time, the GPU waited for the CPU's
// last job of every batch, and the CPU for the GPU's). Each batch is answered once all its jobs
// are done, in arrival order; every answer is the exact answer of the engine that computed it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/query.hpp"
#include "common/search_result.hpp"
#include "common/wire/wire.hpp"
#include "isn/coprocessor_scheduler.hpp"

namespace gpusearch {

// One batch in flight: what the ISN answers with, filled in as its jobs complete.
struct PipelinedBatch {
  wire::ResultHeader header;
  SearchParams params;         // the first stage's (k at least the candidates)
  SearchParams ranked_params;  // the batch's own: the second stage keeps its k
  std::vector<Query> queries;
  std::vector<ShardResult> results;
  std::chrono::steady_clock::time_point started, finished;
  double compute_share = 1.0;  // of [started, finished): its queries' share of a joint call
  std::string error;  // the first failed job's (the batch is then answered on the fallback)
};

class BatchPipeline {
 public:
  using Clock = std::chrono::steady_clock;
  // At most `max_in_flight` batches queued at once (at least 1). `on_complete` is called, from a
  // scheduler worker and with no lock of the pipeline held, each time a batch completes (the ISN
  // wakes its engine thread there).
  BatchPipeline(SchedulerEngine& scheduler, unsigned max_in_flight,
                std::function<void()> on_complete);
  ~BatchPipeline();  // waits for the batches in flight
  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;

  bool has_room() const;
  bool empty() const;
  // Whether the oldest batch in flight has completed (take_completed would return it).
  bool front_complete() const;
  // Queues the batch's jobs and returns at once (batch is then null). Throws what the scheduler
  // throws before queuing anything (e.g. its predictor's training at the first batch), leaving
  // the batch with the caller.
  void start(std::unique_ptr<PipelinedBatch>& batch);
  // The oldest batch if it has completed (removed from the pipeline), else nullptr: batches leave
  // in the order they were started.
  std::unique_ptr<PipelinedBatch> take_completed();
  // Seconds during which at least one batch was in flight.
  double busy_seconds() const;
  // The most batches whose jobs were queued at once (1: the pipeline never overlapped two).
  unsigned peak_in_flight() const;
  unsigned max_in_flight() const { return max_in_flight_; }

 private:
  struct Slot {
    std::unique_ptr<PipelinedBatch> batch;
    bool complete = false;
  };
  SchedulerEngine& scheduler_;
  const unsigned max_in_flight_;
  std::function<void()> on_complete_;
  mutable std::mutex mutex_;
  std::condition_variable drained_;
  std::deque<Slot> in_flight_;
  unsigned incomplete_ = 0;  // batches started whose jobs are not all done
  unsigned peak_incomplete_ = 0;
  unsigned running_ = 0;  // batches whose completion callback has not returned yet
  Clock::time_point busy_since_{};
  double busy_seconds_ = 0;
};

}  // namespace gpusearch
