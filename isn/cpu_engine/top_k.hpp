// The top-k of one run of a query algorithm: the best k documents in the answer order (score
// descending, then global rank ascending), and the threshold a new document must reach. Pruning
// reads the threshold at almost every candidate, so it is a cached member, never a lookup.
// Two ways to keep the documents, chosen by k (measured with callgrind's instruction and
// branch-miss counts, windowed MaxScore on Debian descriptions and the synthetic index):
//   - k < kBufferedFrom: a binary min-heap (the worst kept document on top) with an inlined
//     comparison and one bottom-up sift-down per replacement; the threshold is exact at once.
//     (std::push_heap/pop_heap through a function pointer cost a third of the run at k = 1000.)
//   - k >= kBufferedFrom: an unsorted buffer of 1.5k that is cut back to the best k
//     (nth_element) when full; a push is an append. The threshold lags (it is the k-th best at
//     the last cut, a lower bound of the final one, as pruning needs), so more documents pass
//     it: 25% more instructions at k = 10, but 11-13% fewer cycles at k = 1000 (break-even
//     near k = 300).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "common/search_result.hpp"
#include "isn/cpu_engine/threshold_slot.hpp"

namespace gpusearch::cpu {

// A threshold several top-k heaps raise together (intra-query parallelism, resumed queries):
// each heap's k-th score is a lower bound of the query's final k-th score. Linked to an
// external slot (other processes' shards of the same query, threshold_slot.hpp), it reads the
// larger of the two and raises both.
//
// `moot`: a slot whose going finite makes this run's answer unused, so that the run may stop:
// an and-or query's OR phase is dropped by the merge once the shards together hold k AND
// matches, which the AND slot going finite proves (some shard's k-th, or k distinct documents
// in its union). get() is then +inf, every candidate is pruned and the run ends at its next
// check; the caller drops what it found (CpuEngine::or_phase_sharing). Without it a shard whose
// own AND matches are fewer than k runs its whole OR phase for nothing whenever the other
// shards' matches complete the k (issue 16: about one OR phase in nine on four shards).
class SharedThreshold {
 public:
  SharedThreshold() = default;
  explicit SharedThreshold(ThresholdSlot external, ThresholdSlot moot = {})
      : external_(external), moot_(moot) {}

  bool has_external() const { return external_.linked() || moot_.linked(); }
  double get() const {
    const double local = value_.load(std::memory_order_relaxed);
    if (!has_external()) return local;
    if (moot_.get() > kMootBelow) return std::numeric_limits<double>::infinity();
    return std::max(local, external_.get());
  }
  void raise(double x) {
    double cur = value_.load(std::memory_order_relaxed);
    while (x > cur && !value_.compare_exchange_weak(cur, x, std::memory_order_relaxed)) {
    }
    external_.raise(x);
  }
  // A document that entered a top-k of k (ThresholdSlot::publish): into the external slot's
  // union, if it has one for this k.
  bool publishes(std::size_t k) const { return external_.publishes(k); }
  void publish(double score, std::size_t k) { external_.publish(score, k); }

 private:
  static constexpr double kMootBelow = -std::numeric_limits<double>::infinity();
  std::atomic<double> value_{-std::numeric_limits<double>::infinity()};
  ThresholdSlot external_;
  ThresholdSlot moot_;  // unlinked: never moot
};

class TopK {
 public:
  static constexpr std::size_t kBufferedFrom = 256;

  // `shared` seeds the threshold (a running top-k's k-th score). With `concurrent`, other heaps
  // raise it while this one runs: threshold() reads it every time, and this one raises it.
  // `ranks` (the shard's global ranks, indexed by docID) decides ties; it is read only for
  // documents that tie on the score and for the answer (a rank read per offered document is a
  // cache miss on a large shard).
  // `refresh`: with `concurrent`, threshold() re-reads the shared threshold every this many calls
  // (CpuEngineOptions::shared_threshold_refresh).
  TopK(std::size_t k, SharedThreshold* shared, bool concurrent, const GlobalRank* ranks,
       unsigned refresh = 1)
      : ranks_(ranks),
        k_(k),
        capacity_(k + k / 2),
        buffered_(k >= kBufferedFrom),
        shared_(concurrent ? shared : nullptr),
        publish_(shared_ && !buffered_ && shared_->publishes(k)) {
    entries_.reserve(std::min<std::size_t>(buffered_ ? capacity_ : k, 1 << 17));
    seed_ = shared ? shared->get() : kMinusInf;
    threshold_ = k == 0 ? std::numeric_limits<double>::infinity() : seed_;
    refresh_every_ = std::max(1u, refresh);
    shared_seen_ = seed_;
  }

  // Raises the threshold to `floor`, a lower bound of the final k-th score (k documents of the
  // run are known to score at least that much, threshold_seed.hpp): documents below it are never
  // offered, those at or above it are, so the answer is unchanged.
  void raise_floor(double floor) {
    if (k_ == 0 || !(floor > seed_)) return;
    seed_ = floor;
    threshold_ = std::max(threshold_, floor);
    if (shared_) shared_->raise(floor);
  }

  // A document whose score is below the threshold cannot enter; one equal to it may (on rank).
  double threshold() const {
    if (!shared_) return threshold_;
    if (--until_refresh_ == 0) {
      until_refresh_ = refresh_every_;
      shared_seen_ = shared_->get();
    }
    return std::max(threshold_, shared_seen_);
  }

  // Offers a document; callers test `score < threshold()` first. The heap decides ties on the
  // rank at once, the buffer at its next cut.
  void push(double score, DocId doc) {
    Entry e{score, doc, false};
    if (buffered_) {
      if (entries_.size() == capacity_) cut();
      entries_.push_back(e);
      if (entries_.size() == k_) cut();  // the first k documents: a threshold at once
      return;
    }
    if (entries_.size() < k_) {
      // While the union is short of k (the slot still -inf) a publication only adds to it:
      // such documents wait and go together once this heap holds k (publish_unpublished). Once
      // the slot is finite, each one may raise it at once.
      if (publish_ && shared_seen_ > kMinusInf) {
        shared_->publish(score, k_);
        e.published = true;
      }
      entries_.push_back(e);
      sift_up(entries_.size() - 1);
      if (entries_.size() == k_) {
        publish_unpublished();
        set_threshold(entries_[0].score);
      }
      return;
    }
    if (k_ == 0 || !better(e, entries_[0])) return;
    if (publish_) shared_->publish(score, k_);
    entries_[0] = e;
    sift_down(0);
    set_threshold(entries_[0].score);
  }

  // Best first, at most k; empties the top-k.
  std::vector<RankedDoc> take_sorted(std::uint32_t shard) {
    publish_unpublished();  // a run that found fewer than k: its documents still help the others
    if (entries_.size() > k_) cut();
    std::sort(entries_.begin(), entries_.end(),
              [this](const Entry& a, const Entry& b) { return better(a, b); });
    std::vector<RankedDoc> out;
    out.reserve(entries_.size());
    for (const Entry& e : entries_) out.push_back({e.score, ranks_[e.doc], shard, e.doc});
    entries_.clear();
    return out;
  }

 private:
  static constexpr double kMinusInf = -std::numeric_limits<double>::infinity();
  struct Entry {
    double score;
    DocId doc;
    bool published;  // heap mode: gone to the shared union (publish_)
  };
  // The answer order (ranks_before in common/search_result.hpp).
  bool better(const Entry& a, const Entry& b) const {
    return a.score > b.score || (a.score == b.score && ranks_[a.doc] < ranks_[b.doc]);
  }
  // The same without a branch on the scores: which child is worse is a coin toss, so a branch
  // mispredicts half the time. Ties (rare) take a branch to the ranks.
  bool better_branchless(const Entry& a, const Entry& b) const {
    if (a.score == b.score) [[unlikely]]
      return ranks_[a.doc] < ranks_[b.doc];
    return a.score > b.score;
  }

  // The heap's first documents, found while the union was short of k, go to it together once
  // the heap holds k (or at the run's end) rather than one by one as they come: the union's
  // lines, which the node's other shards write at the same time (they start the same query
  // together), are fetched once for them, not once per document (issue 16: publishing was 3% of
  // four ISNs' CPU against 1% of one ISN's).
  void publish_unpublished() {
    if (!publish_ || published_first_) return;
    published_first_ = true;
    for (Entry& e : entries_)
      if (!e.published) {
        shared_->publish(e.score, k_);
        e.published = true;  // a document is published once: the union counts distinct ones
      }
  }

  void set_threshold(double kth) {
    threshold_ = std::max(seed_, kth);
    if (shared_) shared_->raise(kth);
  }

  // Buffer: keeps the best k (k >= 1) and raises the threshold to the k-th best score. The
  // k-th best score is selected over a copy of the scores alone (kth_largest: 8-byte keys,
  // branch-free partitions), the entries above it are compacted without a branch, and the
  // places left go to the entries equal to it, best rank first. (std::nth_element over the
  // entries with the rank tie-break was 16% of windowed MaxScore's run at k = 1000 on Debian;
  // this cut is about 8% faster overall, measured A/B.)
  void cut() {
    const std::size_t n = entries_.size();
    if (n <= k_) {
      const auto kth =
          std::min_element(entries_.begin(), entries_.end(),
                           [this](const Entry& a, const Entry& b) { return better(b, a); });
      set_threshold(kth->score);
      return;
    }
    scores_.resize(n);
    for (std::size_t i = 0; i < n; ++i) scores_[i] = entries_[i].score;
    const double kth = kth_largest(scores_.data(), n, k_);
    // Entries above the k-th score stay (fewer than k); those equal to it are candidates for
    // the remaining places, decided on the rank.
    std::size_t kept = 0;
    ties_.clear();
    for (std::size_t i = 0; i < n; ++i) {
      const Entry e = entries_[i];
      entries_[kept] = e;
      kept += e.score > kth;
      if (e.score == kth) ties_.push_back(e);
    }
    entries_.resize(kept);
    const std::size_t need = k_ - kept;
    if (ties_.size() > need)
      std::nth_element(
          ties_.begin(), ties_.begin() + std::ptrdiff_t(need - 1), ties_.end(),
          [this](const Entry& a, const Entry& b) { return ranks_[a.doc] < ranks_[b.doc]; });
    entries_.insert(entries_.end(), ties_.begin(), ties_.begin() + std::ptrdiff_t(need));
    set_threshold(kth);
  }

  // The k-th largest of s[0, n) (1 <= k <= n); reorders s. Quickselect with a branch-free
  // partition (scores are in random order, so a branchy one mispredicts about half the time):
  // each round moves the elements above the pivot to the front by swapping unconditionally.
  static double kth_largest(double* s, std::size_t n, std::size_t k) {
    std::size_t lo = 0, hi = n;  // the k-th largest of s[lo, hi), k counted from lo
    for (int rounds = 0; rounds < 64; ++rounds) {
      if (hi - lo <= 16) break;
      const double a = s[lo], b = s[lo + (hi - lo) / 2], c = s[hi - 1];
      const double pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));
      std::size_t above = lo;
      for (std::size_t i = lo; i < hi; ++i) {
        const double x = s[i];
        const bool up = x > pivot;
        s[i] = s[above];
        s[above] = x;
        above += up;
      }
      const std::size_t m = above - lo;  // elements above the pivot
      if (m >= k) {
        hi = above;
        continue;
      }
      std::size_t equal = above;
      for (std::size_t i = above; i < hi; ++i) {
        const double x = s[i];
        const bool eq = x == pivot;
        s[i] = s[equal];
        s[equal] = x;
        equal += eq;
      }
      if (equal - lo >= k) return pivot;
      k -= equal - lo;
      lo = equal;
    }
    std::nth_element(s + lo, s + lo + (k - 1), s + hi, std::greater<double>());
    return s[lo + k - 1];
  }

  // Heap: entries_[0] is the worst kept document; every parent ranks after its children.
  void sift_up(std::size_t i) {
    const Entry e = entries_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!better(entries_[parent], e)) break;
      entries_[i] = entries_[parent];
      i = parent;
    }
    entries_[i] = e;
  }
  // Replaces the root: the hole goes down to a leaf along the worse children (one comparison
  // per level), then e rises from there (a replacement is usually among the worst, so it rises
  // little): about half the comparisons of the textbook sift-down.
  void sift_down(std::size_t i) {
    const std::size_t n = entries_.size();
    const Entry e = entries_[i];
    std::size_t child = 2 * i + 1;
    while (child + 1 < n) {
      child += better_branchless(entries_[child], entries_[child + 1]);  // the worse child
      entries_[i] = entries_[child];
      i = child;
      child = 2 * i + 1;
    }
    if (child < n) {
      entries_[i] = entries_[child];
      i = child;
    }
    entries_[i] = e;
    sift_up(i);
  }

  const GlobalRank* ranks_;
  std::size_t k_, capacity_;
  bool buffered_;
  SharedThreshold* shared_;
  bool publish_;  // each document that enters goes to the shared union (SharedThreshold::publish)
  bool published_first_ = false;  // the first k documents have gone to the union
  unsigned refresh_every_ = 1;
  mutable unsigned until_refresh_ = 1;  // threshold() calls until it re-reads shared_
  mutable double shared_seen_;          // shared_'s value at the last read
  double seed_ = kMinusInf;
  double threshold_ = kMinusInf;
  std::vector<Entry> entries_;
  std::vector<double> scores_;  // buffer: scratch for cut()
  std::vector<Entry> ties_;
};

}  // namespace gpusearch::cpu
