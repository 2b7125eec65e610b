#include "common/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <string>

#include <fmt/format.h>

namespace gpusearch {

Progress::Progress(std::string label, std::uint64_t total, std::string unit, bool enabled)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      enabled_(enabled),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::add(std::uint64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  maybe_draw(false);
}

void Progress::set(std::uint64_t done) {
  done_.store(done, std::memory_order_relaxed);
  maybe_draw(false);
}

void Progress::finish() {
  if (finished_) return;
  maybe_draw(true);
  finished_ = true;
}

void Progress::maybe_draw(bool force) {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  const auto interval = tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000);
  {
    std::unique_lock lock(draw_mutex_, std::try_to_lock);
    if (!lock.owns_lock() || (!force && now - last_draw_ < interval)) return;
    last_draw_ = now;
  }
  const double secs = std::chrono::duration<double>(now - start_).count();
  const std::uint64_t done = done_.load(std::memory_order_relaxed);
  const double rate = secs > 0 ? double(done) / secs : 0.0;
  std::string line;
  if (total_ > 0) {
    const double frac = std::min(1.0, double(done) / double(total_));
    const int width = 30, filled = int(frac * width);
    const double eta = rate > 0 ? double(total_ - std::min(done, total_)) / rate : 0.0;
    line = fmt::format("{} [{}{}] {:5.1f}% {}/{} {} {:.3g} {}/s eta {:.0f}s", label_,
                       std::string(filled, '#'), std::string(width - filled, '.'), 100 * frac,
                       done, total_, unit_, rate, unit_, eta);
  } else {
    line = fmt::format("{}: {} {} {:.3g} {}/s {:.1f}s", label_, done, unit_, rate, unit_, secs);
  }
  if (tty_) std::fprintf(stderr, "\r%s\x1b[K%s", line.c_str(), force ? "\n" : "");
  else std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace gpusearch
