// Many strings in one buffer, addressed by index: document ids and terms without a heap
// allocation each.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace gpusearch {

class StringTable {
 public:
  std::uint32_t add(std::string_view s) {
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    offsets_.push_back(bytes_.size());
    return static_cast<std::uint32_t>(offsets_.size() - 2);
  }
  std::string_view get(std::size_t i) const {
    return {bytes_.data() + offsets_[i], static_cast<std::size_t>(offsets_[i + 1] - offsets_[i])};
  }
  std::size_t size() const { return offsets_.size() - 1; }
  void pop_back() {
    offsets_.pop_back();
    bytes_.resize(offsets_.back());
  }
  std::uint64_t bytes() const { return bytes_.size() + offsets_.size() * sizeof(std::uint64_t); }

 private:
  std::vector<char> bytes_;
  std::vector<std::uint64_t> offsets_{0};
};

}  // namespace gpusearch
