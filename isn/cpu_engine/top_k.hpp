// The top-k of one run of a query algorithm: the best k documents in the answer order (score
// descending, then global rank ascending), and the threshold a new document must reach. Pruning
// reads the threshold at almost every candidate, so it is a cached member, not a heap lookup;
// the heap is a binary min-heap (worst kept document on top) with an inlined comparison and one
// sift-down per replacement (std::push_heap/pop_heap through a function pointer cost a third of
// the run time at k = 1000). A buffer of 2k cut back with nth_element was tried: its threshold
// lags, more documents pass it, and it ran more instructions at k = 10 and at k = 1000.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/search_result.hpp"

namespace gpusearch::cpu {

// A threshold several top-k heaps raise together (intra-query parallelism, resumed queries):
// each heap's k-th score is a lower bound of the query's final k-th score.
class SharedThreshold {
 public:
  double get() const { return value_.load(std::memory_order_relaxed); }
  void raise(double x) {
    double cur = value_.load(std::memory_order_relaxed);
    while (x > cur && !value_.compare_exchange_weak(cur, x, std::memory_order_relaxed)) {
    }
  }

 private:
  std::atomic<double> value_{-std::numeric_limits<double>::infinity()};
};

class TopK {
 public:
  // `shared` seeds the threshold (a running top-k's k-th score). With `concurrent`, other heaps
  // raise it while this one runs: threshold() reads it every time, and push() raises it.
  TopK(std::size_t k, SharedThreshold* shared, bool concurrent)
      : k_(k), shared_(concurrent ? shared : nullptr) {
    heap_.reserve(std::min<std::size_t>(k, 1 << 16));
    seed_ = shared ? shared->get() : kMinusInf;
    threshold_ = k == 0 ? std::numeric_limits<double>::infinity() : seed_;
  }

  // A document whose score is below the threshold cannot enter; one equal to it may (on rank).
  double threshold() const { return shared_ ? std::max(threshold_, shared_->get()) : threshold_; }

  // Keeps d if it ranks before the worst kept document (or fewer than k are kept). Callers test
  // `score < threshold()` first; push() decides ties on the rank.
  void push(double score, GlobalRank rank, DocId doc) {
    const Entry e{score, rank, doc};
    if (heap_.size() < k_) {
      heap_.push_back(e);
      sift_up(heap_.size() - 1);
      if (heap_.size() == k_) update_threshold();
      return;
    }
    if (k_ == 0 || !better(e, heap_[0])) return;
    heap_[0] = e;
    sift_down(0);
    update_threshold();
  }

  // Best first; empties the heap.
  std::vector<RankedDoc> take_sorted(std::uint32_t shard) {
    std::sort(heap_.begin(), heap_.end(),
              [](const Entry& a, const Entry& b) { return better(a, b); });
    std::vector<RankedDoc> out;
    out.reserve(heap_.size());
    for (const Entry& e : heap_) out.push_back({e.score, e.rank, shard, e.doc});
    heap_.clear();
    return out;
  }

 private:
  static constexpr double kMinusInf = -std::numeric_limits<double>::infinity();
  struct Entry {
    double score;
    GlobalRank rank;
    DocId doc;
  };
  // The answer order (ranks_before in common/search_result.hpp).
  static bool better(const Entry& a, const Entry& b) {
    return a.score > b.score || (a.score == b.score && a.rank < b.rank);
  }
  // heap_[0] is the worst kept document: every parent ranks after its children.
  void sift_up(std::size_t i) {
    const Entry e = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!better(heap_[parent], e)) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  // Replaces the root: the hole goes down to a leaf along the worse children (one comparison
  // per level), then e rises from there (a replacement is usually among the worst, so it rises
  // little): about half the comparisons of the textbook sift-down.
  void sift_down(std::size_t i) {
    const std::size_t n = heap_.size();
    const Entry e = heap_[i];
    std::size_t child = 2 * i + 1;
    while (child + 1 < n) {
      child += better(heap_[child], heap_[child + 1]);  // the worse child
      heap_[i] = heap_[child];
      i = child;
      child = 2 * i + 1;
    }
    if (child < n) {
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = e;
    sift_up(i);
  }
  void update_threshold() {
    threshold_ = std::max(seed_, heap_[0].score);
    if (shared_) shared_->raise(heap_[0].score);
  }

  std::size_t k_;
  SharedThreshold* shared_;
  double seed_ = kMinusInf;
  double threshold_ = kMinusInf;
  std::vector<Entry> heap_;
};

}  // namespace gpusearch::cpu
