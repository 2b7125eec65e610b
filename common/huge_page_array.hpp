// A zero-initialised array in anonymous memory that asks the kernel for transparent huge pages
// (madvise(MADV_HUGEPAGE); honoured where THP is "madvise" or "always"). For tables read at
// random after the caches went cold: with 4 KiB pages nearly every such read is also a TLB miss
// and a page walk whose own entries miss (the term dictionary: NOTES-cluster.md, session 31).
// Where huge pages are not given the pages are ordinary; the contents are the same either way.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

namespace gpusearch {

template <typename T>
class HugePageArray {
  static_assert(std::is_trivially_copyable_v<T>, "a zero-filled array of plain values");

 public:
  HugePageArray() = default;
  explicit HugePageArray(std::size_t n) : size_(n) {
    if (n == 0) return;
    constexpr std::size_t kHuge = std::size_t(2) << 20;
    bytes_ = (n * sizeof(T) + kHuge - 1) / kHuge * kHuge;
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    (void)::madvise(p, bytes_, MADV_HUGEPAGE);  // before the first touch; a hint
    data_ = static_cast<T*>(p);                 // anonymous memory reads as zeros
  }
  ~HugePageArray() { release(); }
  HugePageArray(HugePageArray&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  HugePageArray& operator=(HugePageArray&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  HugePageArray(const HugePageArray&) = delete;
  HugePageArray& operator=(const HugePageArray&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  std::size_t size() const { return size_; }

 private:
  void release() noexcept {
    if (data_) ::munmap(data_, bytes_);
    data_ = nullptr;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0, bytes_ = 0;
};

}  // namespace gpusearch
