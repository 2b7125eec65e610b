// CPU post-processing beside the GPU (paper 000, 3.1.4 and 3.1.6): queries the GPU saw only
// truncated lists for, and could not finish before the truncation, are completed here on
// worker threads while the engine's main thread packs and launches the next batch. Tasks run
// on a oneTBB arena of their own; wait() returns when every submitted task has run and
// rethrows the first task's exception. Host code only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include <tbb/task_arena.h>

namespace gpusearch::gpu {

class PostProcessingThreads {
 public:
  explicit PostProcessingThreads(unsigned threads);
  ~PostProcessingThreads();  // waits for the tasks still running
  PostProcessingThreads(const PostProcessingThreads&) = delete;
  PostProcessingThreads& operator=(const PostProcessingThreads&) = delete;

  void submit(std::function<void()> task);
  void wait();
  unsigned threads() const { return threads_; }
  // Seconds the tasks ran, summed over threads; and tasks run.
  double busy_seconds() const { return double(busy_ns_.load()) * 1e-9; }
  std::uint64_t tasks() const { return tasks_.load(); }

 private:
  unsigned threads_;
  std::unique_ptr<tbb::task_arena> arena_;
  std::mutex mutex_;
  std::condition_variable idle_;
  std::uint64_t pending_ = 0;
  std::exception_ptr error_;
  std::atomic<std::uint64_t> busy_ns_{0}, tasks_{0};
};

}  // namespace gpusearch::gpu
