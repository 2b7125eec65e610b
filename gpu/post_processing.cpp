#include "gpu/post_processing.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace gpusearch::gpu {

// `threads` workers and one slot for the engine's thread, which joins in wait().
PostProcessingThreads::PostProcessingThreads(unsigned threads)
    : threads_(std::max(1u, threads)), arena_(int(threads_) + 1, 1) {}

PostProcessingThreads::~PostProcessingThreads() {
  try {
    wait();
  } catch (...) {
  }
}

void PostProcessingThreads::submit(std::function<void()> task) {
  arena_.execute([&] {
    group_.run([this, task = std::move(task)] {
      const auto start = std::chrono::steady_clock::now();
      try {
        task();
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      busy_ns_ += std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - start)
                                    .count());
      ++tasks_;
    });
  });
}

void PostProcessingThreads::wait() {
  arena_.execute([&] { group_.wait(); });
  std::lock_guard lock(mutex_);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace gpusearch::gpu
