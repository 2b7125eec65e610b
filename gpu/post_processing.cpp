#include "gpu/post_processing.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace gpusearch::gpu {

PostProcessingThreads::PostProcessingThreads(unsigned threads)
    : threads_(std::max(1u, threads)),
      // No slot reserved for a master thread: the engine's thread never joins, the workers run
      // every task.
      arena_(std::make_unique<tbb::task_arena>(int(threads_), 0)) {}

PostProcessingThreads::~PostProcessingThreads() {
  try {
    wait();
  } catch (...) {
  }
}

void PostProcessingThreads::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    ++pending_;
  }
  arena_->enqueue([this, task = std::move(task)] {
    const auto start = std::chrono::steady_clock::now();
    std::exception_ptr error;
    try {
      task();
    } catch (...) {
      error = std::current_exception();
    }
    busy_ns_ += std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - start)
                                  .count());
    ++tasks_;
    std::lock_guard lock(mutex_);
    if (error && !error_) error_ = error;
    if (--pending_ == 0) idle_.notify_all();
  });
}

void PostProcessingThreads::wait() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return pending_ == 0; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace gpusearch::gpu
