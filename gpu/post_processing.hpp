// CPU post-processing beside the GPU (paper 000, 3.1.4 and 3.1.6): queries the GPU saw only
// truncated lists for, and could not finish before the truncation, are completed here on
// worker threads while the engine's main thread packs and launches the next batch. Tasks run in
// a oneTBB arena of their own (a task group); wait() joins the arena, so the waiting thread
// runs what is left itself (and everything where the process allows no worker threads), then
// rethrows the first task's exception. Host code only.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include <tbb/task_arena.h>
#include <tbb/task_group.h>

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
  tbb::task_arena arena_;
  tbb::task_group group_;
  std::mutex mutex_;
  std::exception_ptr error_;
  std::atomic<std::uint64_t> busy_ns_{0}, tasks_{0};
};

}  // namespace gpusearch::gpu
