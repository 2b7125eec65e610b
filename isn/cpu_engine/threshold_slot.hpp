// One query's running k-th score shared between processes (ISNs on one node answering the same
// batch on different shards; isn/shared_thresholds.hpp places the slots in an MPI shared-memory
// window). A slot is one 64-bit word: the batch's sequence number in the high 32 bits and the
// threshold, a float rounded DOWN from the double score, in the low 32. Whatever a shard's top-k
// holds as its k-th score is a lower bound of the query's final k-th score (a shard's k best
// are among the collection's documents), so every reader may prune against it, as the intra-query
// parts of one engine do through SharedThreshold (isn/cpu_engine/top_k.hpp).
//
// A slot may also carry a union: the best scores of documents any sharer has found, up to
// kUnionCapacity of them (publish()). Once k of them are there, their smallest is a lower bound of
// the query's k-th score too (k distinct documents score at least that), and usually a higher
// one than any one shard's k-th: four quarter shards' own k-th scores are each the k-th of a
// quarter of the documents, the union's is the k-th of all the documents scored so far, which is
// what one engine over the whole shard prunes against (issue 16: four ISNs scored 1.29x the
// documents one ISN scores with the slots alone).
//
// A slot never mixes two batches: a reader sees only a value raised under its own sequence
// number (else -inf), and a raise under a newer sequence number overwrites an older batch's
// value (a raise under an older one is dropped: that batch's readers then prune less, never
// wrongly). Sequence number 0 marks an empty slot.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace gpusearch::cpu {

class ThresholdSlot {
 public:
  ThresholdSlot() = default;  // unlinked: get() is -inf, raise() does nothing
  // `word` lives in memory every sharer maps (8-byte aligned); `sequence` != 0.
  ThresholdSlot(std::uint64_t* word, std::uint32_t sequence) : word_(word), sequence_(sequence) {}
  // With a union of `union_capacity` words (<= kUnionCapacity) at `union_words`, shared alike.
  ThresholdSlot(std::uint64_t* word, std::uint32_t sequence, std::uint64_t* union_words,
                std::uint32_t union_capacity)
      : word_(word), sequence_(sequence), union_(union_words), union_capacity_(union_capacity) {}

  static constexpr std::uint32_t kUnionCapacity = 15;
  // Whether publish() does anything for top-k runs of this k.
  bool publishes(std::size_t k) const { return union_ && k > 0 && k <= union_capacity_; }

  bool linked() const { return word_ != nullptr; }
  std::uint32_t sequence() const { return sequence_; }

  double get() const {
    if (!word_) return kMinusInf;
    const std::uint64_t w = ref().load(std::memory_order_relaxed);
    if (sequence_of(w) != sequence_) return kMinusInf;
    return double(value_of(w));
  }

  void raise(double x) {
    if (!word_ || !(x > kMinusInf)) return;
    const float f = round_down(x);
    const std::uint64_t mine = pack(sequence_, f);
    std::atomic_ref<std::uint64_t> a = ref();
    std::uint64_t cur = a.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint32_t s = sequence_of(cur);
      if (s == sequence_) {
        if (!(f > value_of(cur))) return;
      } else if (s != 0 && newer(s, sequence_)) {
        return;  // the slot has moved on to a later batch
      }
      if (a.compare_exchange_weak(cur, mine, std::memory_order_relaxed)) return;
    }
  }

  // The exact score of a document that enters a sharer's top-k. Its callers guarantee that no
  // document is published twice to one slot (a document lives on one shard, and one run offers
  // it once): the union then always holds distinct documents' scores, and its smallest, once it
  // holds k, raises the slot. Lock-free: the union's worst entry is replaced by compare-and-swap
  // (any entry it replaces leaves k distinct documents' scores, whichever sharer won a race).
  //
  // A score at or below the slot's value is not published: the union can raise the slot above
  // that value only with k entries above it, which this score is not one of. Reading the slot's
  // own line (which every sharer reads anyway) then spares the union's two lines and their
  // compare-and-swap, which move between the sharers' cores.
  void publish(double score, std::size_t k) {
    if (!publishes(k) || !(score > kMinusInf)) return;
    const float f = round_down(score);
    if (!(double(f) > get())) return;
    const std::uint64_t mine = pack(sequence_, f);
    for (;;) {
      std::size_t worst = 0;
      std::uint64_t worst_word = 0;
      float worst_value = std::numeric_limits<float>::infinity();
      for (std::size_t i = 0; i < k; ++i) {
        const std::uint64_t w = entry(i).load(std::memory_order_relaxed);
        const std::uint32_t s = sequence_of(w);
        if (s != sequence_ && s != 0 && newer(s, sequence_)) return;  // moved on to a later batch
        const float v = s == sequence_ ? value_of(w) : -std::numeric_limits<float>::infinity();
        if (v < worst_value) worst = i, worst_word = w, worst_value = v;
      }
      if (!(f > worst_value)) return;  // not among the k best published
      if (entry(worst).compare_exchange_weak(worst_word, mine, std::memory_order_relaxed)) break;
    }
    float kth = std::numeric_limits<float>::infinity();
    for (std::size_t i = 0; i < k; ++i) {
      const std::uint64_t w = entry(i).load(std::memory_order_relaxed);
      if (sequence_of(w) != sequence_) return;  // fewer than k yet (or moved on)
      kth = std::min(kth, value_of(w));
    }
    raise(double(kth));
  }

  // The largest float <= x (x finite or +inf).
  static float round_down(double x) {
    float f = static_cast<float>(x);  // round to nearest
    if (double(f) > x) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
    return f;
  }
  static std::uint64_t pack(std::uint32_t sequence, float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return (std::uint64_t(sequence) << 32) | bits;
  }
  static std::uint32_t sequence_of(std::uint64_t w) { return std::uint32_t(w >> 32); }
  static float value_of(std::uint64_t w) {
    const std::uint32_t bits = std::uint32_t(w);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  // Whether sequence a comes after b (modulo 2^32: the batches in flight are a few apart).
  static bool newer(std::uint32_t a, std::uint32_t b) { return std::int32_t(a - b) > 0; }

 private:
  static constexpr double kMinusInf = -std::numeric_limits<double>::infinity();
  static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
                "a slot shared between processes needs a lock-free 64-bit atomic");
  std::atomic_ref<std::uint64_t> ref() const { return std::atomic_ref<std::uint64_t>(*word_); }
  std::atomic_ref<std::uint64_t> entry(std::size_t i) const {
    return std::atomic_ref<std::uint64_t>(union_[i]);
  }

  std::uint64_t* word_ = nullptr;
  std::uint32_t sequence_ = 0;
  std::uint64_t* union_ = nullptr;  // null: no union
  std::uint32_t union_capacity_ = 0;
};

// The two slots of one query: and-or runs an AND phase and (when the query's AND matches may be
// fewer than k) an OR phase, whose k-th scores bound different things. In modes `and` and `or`
// the one phase uses its own slot.
struct QueryThresholdSlots {
  ThresholdSlot conjunctive, disjunctive;
  const ThresholdSlot& of(bool is_conjunctive) const {
    return is_conjunctive ? conjunctive : disjunctive;
  }
};

}  // namespace gpusearch::cpu
