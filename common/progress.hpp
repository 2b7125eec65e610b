// Progress for long runs: a bar redrawn in place on a terminal, a line every few seconds when
// stderr is a file or pipe. Thread-safe; cheap to call often.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "common/metrics.hpp"  // peak_rss_bytes, current_rss_bytes (reported beside progress)

namespace gpusearch {

class Progress {
 public:
  // total = 0 when the amount of work is not known in advance.
  Progress(std::string label, std::uint64_t total, std::string unit, bool enabled = true);
  ~Progress();
  void add(std::uint64_t n);
  void set(std::uint64_t done);
  void finish();  // prints the final line once

 private:
  void maybe_draw(bool force);
  std::string label_, unit_;
  std::uint64_t total_;
  bool enabled_, tty_, finished_ = false;
  std::atomic<std::uint64_t> done_{0};
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::mutex draw_mutex_;
};

}  // namespace gpusearch
