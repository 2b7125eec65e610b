// A small open-addressing map from TermId to a 32-bit value (linear probing, power-of-two
// capacity, no erase). It holds the lists a list-cache batch ships (common/list_cache.hpp),
// looked up for every term of every query when a call is planned and again when its launches
// are packed. There std::unordered_map allocated a node per shipped list and chased a pointer
// per look-up: with the directory's own hash look-ups, a fifth of the batch planning's time
// (perf, 200k-document index, 1,000 queries). Here an insert allocates only when the table
// doubles, and a look-up reads one or two adjacent slots.
#pragma once

#include <cstdint>
#include <vector>

#include "common/types.hpp"

namespace gpusearch {

class FlatTermMap {
 public:
  // The value for t, or nullptr.
  const std::uint32_t* find(TermId t) const {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = index(t);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.term == t) return &s.value;
    }
  }
  bool contains(TermId t) const { return find(t) != nullptr; }
  // The value for t, inserted as 0 if absent.
  std::uint32_t& operator[](TermId t) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t i = index(t);; i = (i + 1) & mask()) {
      Slot& s = slots_[i];
      if (!s.used) {
        s = Slot{t, 0, true};
        ++size_;
        return s.value;
      }
      if (s.term == t) return s.value;
    }
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Empty, its table kept.
  void clear() {
    if (size_ == 0) return;
    for (Slot& s : slots_) s.used = false;
    size_ = 0;
  }

 private:
  struct Slot {
    TermId term = 0;
    std::uint32_t value = 0;
    bool used = false;
  };
  std::size_t mask() const { return slots_.size() - 1; }
  std::size_t index(TermId t) const {
    // Fibonacci hashing: term ids are dense and often close together.
    return std::size_t((std::uint64_t(t) * 0x9E3779B97F4A7C15ull) >> 20) & mask();
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : 2 * old.size(), Slot{});
    size_ = 0;
    for (const Slot& s : old)
      if (s.used) (*this)[s.term] = s.value;
  }
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace gpusearch
