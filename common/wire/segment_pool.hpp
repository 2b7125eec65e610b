// First segments for the messages one sender builds again and again (the ISN's answers): a
// buffer comes back when its message is gone (the MPI send completed) and is zeroed then, on
// the releasing thread, so that the next encode finds it zeroed (as Cap'n Proto requires of a
// new segment) without allocating, zeroing or faulting in fresh pages on the encoding thread.
// At batch 1,024 an answer is ~430 KB: glibc maps and unmaps such a buffer every batch (~110
// page faults a batch measured on the ISN), and its zeroing was a quarter of the encode's
// instructions at batch 64 (NOTES-cluster.md, issue-16-s28). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpusearch::wire {

class SegmentPool {
 public:
  explicit SegmentPool(std::size_t max_buffers = 8) : max_buffers_(max_buffers) {}

  // A zeroed buffer of at least `words` words (its whole size is zero): a free one that is
  // large enough, else a new one.
  std::vector<std::uint64_t> acquire(std::size_t words);
  // Takes back a buffer of which only the first `dirty_words` words were written (or every
  // word, when more): zeroes those and keeps it, unless the pool is full.
  void release(std::vector<std::uint64_t> buffer, std::size_t dirty_words);

  std::size_t free_buffers() const;
  std::uint64_t reused() const;  // acquires served from the pool

 private:
  const std::size_t max_buffers_;
  mutable std::mutex mutex_;
  std::vector<std::vector<std::uint64_t>> free_;
  std::uint64_t reused_ = 0;
};

}  // namespace gpusearch::wire
