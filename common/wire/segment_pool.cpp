#include "common/wire/segment_pool.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace gpusearch::wire {

std::vector<std::uint64_t> SegmentPool::acquire(std::size_t words) {
  {
    std::lock_guard lock(mutex_);
    // The smallest free buffer that fits: answers of one sender are of similar sizes.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->size() >= words && (best == free_.end() || it->size() < best->size())) best = it;
    if (best != free_.end()) {
      std::vector<std::uint64_t> b = std::move(*best);
      free_.erase(best);
      ++reused_;
      return b;
    }
  }
  return std::vector<std::uint64_t>(words, 0);  // value-initialized: zeroed
}

void SegmentPool::release(std::vector<std::uint64_t> buffer, std::size_t dirty_words) {
  if (buffer.empty()) return;
  {
    std::lock_guard lock(mutex_);
    if (free_.size() >= max_buffers_) {
      // Full: keep the larger of this one and the smallest kept (sizes follow the batch size).
      auto smallest =
          std::min_element(free_.begin(), free_.end(),
                           [](const auto& a, const auto& b) { return a.size() < b.size(); });
      if (smallest == free_.end() || smallest->size() >= buffer.size()) return;
      free_.erase(smallest);
    }
  }
  // Zeroed outside the lock (the encoding thread may be acquiring meanwhile).
  std::memset(buffer.data(), 0, std::min(dirty_words, buffer.size()) * sizeof(std::uint64_t));
  std::lock_guard lock(mutex_);
  if (free_.size() < max_buffers_) free_.push_back(std::move(buffer));
}

std::size_t SegmentPool::free_buffers() const {
  std::lock_guard lock(mutex_);
  return free_.size();
}

std::uint64_t SegmentPool::reused() const {
  std::lock_guard lock(mutex_);
  return reused_;
}

}  // namespace gpusearch::wire
