// Whole batches through the scheduler: the ISN's pipelined batches (submit_batch) and a batch
// answered before returning (search_batch), both queued as one group (submit_many).
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "common/error.hpp"
#include "isn/coprocessor_scheduler.hpp"

namespace gpusearch {

void CoProcessorScheduler::submit_batch(std::span<const Query> queries, const SearchParams& params,
                                        std::span<ShardResult> out, BatchDone done) {
  if (queries.empty()) {
    done({});
    return;
  }
  struct Batch {
    std::atomic<std::size_t> left;
    std::mutex mutex;
    std::string first_error;
    BatchDone done;
  };
  // Owned by its jobs' completions: the last one deletes it. Each callback then holds one plain
  // pointer, which std::function keeps inline: a shared_ptr copy per job cost an allocation that
  // a worker freed and a reference count that every worker touched (the benchmark's submitting
  // thread fell behind on such frees, NOTES-scheduler.md, session 35).
  auto owned = std::make_unique<Batch>();
  owned->left = queries.size();
  owned->done = std::move(done);
  Batch* batch = owned.get();
  const auto now = Clock::now();
  std::vector<Submission> submissions;
  submissions.reserve(queries.size());
  for (std::size_t i = 0; i < queries.size(); ++i)
    submissions.push_back({&queries[i], &out[i], now, [batch](const JobOutcome& o) {
      if (!o.error.empty() || o.dropped) {
        std::lock_guard lock(batch->mutex);
        if (batch->first_error.empty())
          batch->first_error = o.dropped ? "the scheduler stopped before the job ran" : o.error;
      }
      // The last job's completion sees every other job's writes (acq_rel on the count).
      if (batch->left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        const std::unique_ptr<Batch> last(batch);
        last->done(last->first_error);
      }
    }});
  // From here the completions own it (one may run before submit_many returns).
  owned.release();
  submit_many(submissions, params);
}

void CoProcessorScheduler::search_batch(std::span<const Query> queries, const SearchParams& params,
                                        std::span<ShardResult> out,
                                        std::vector<JobOutcome>* outcomes) {
  if (outcomes) outcomes->assign(queries.size(), JobOutcome{});
  std::mutex m;
  std::condition_variable cv;
  std::size_t left = queries.size();
  std::string first_error;
  const auto now = Clock::now();
  std::vector<Submission> submissions;
  submissions.reserve(queries.size());
  for (std::size_t i = 0; i < queries.size(); ++i)
    submissions.push_back({&queries[i], &out[i], now, [&, i](const JobOutcome& o) {
      std::lock_guard lock(m);
      if (outcomes) (*outcomes)[i] = o;
      if (first_error.empty() && !o.error.empty()) first_error = o.error;
      if (--left == 0) cv.notify_all();
    }});
  submit_many(submissions, params);
  std::unique_lock lock(m);
  cv.wait(lock, [&] { return left == 0; });
  if (!first_error.empty()) throw Error(first_error);
}

}  // namespace gpusearch
