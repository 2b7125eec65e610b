// One posting list read in docID order from the shard's compressed blocks, a block decoded only
// when the read reaches it (early termination usually stops long before the end of a long
// list). For simulations of the engines' reads outside the engines: the cache planner's
// simulated AND (cache_admission.cpp) and the cost predictor's and-or probe (isn/).
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/block_codec.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

class LazyList {
 public:
  // with_freqs false: docIDs only (current_freq() and freq() are then not to be read).
  LazyList(const ShardIndex& shard, TermId t, bool with_freqs = true)
      : shard_(shard), ti_(shard.term(t)), with_freqs_(with_freqs) {}
  std::uint32_t num_blocks() const { return ti_.num_blocks; }
  void load(std::uint32_t j) {
    if (j == block_) return;
    const std::uint64_t b = ti_.first_block + j;
    const std::uint32_t* in = shard_.block_data(b);
    n_ = codec::read_header(in[0]).count;
    const std::uint32_t* freq_words = codec::decode_docids(in, shard_.block_floor(ti_, b), docs_);
    if (with_freqs_) codec::decode_freqs(freq_words, freqs_);
    block_ = j;
    pos_ = 0;
    ++blocks_loaded_;
  }
  std::uint32_t blocks_loaded() const { return blocks_loaded_; }
  unsigned count() const { return n_; }
  DocId doc(unsigned i) const { return docs_[i]; }
  std::uint32_t freq(unsigned i) const { return freqs_[i]; }
  // Moves to the first posting >= d at or after the current one; false if the list has none.
  bool seek(DocId d) {
    const DocId* last = shard_.block_last_docid().data() + ti_.first_block;
    std::uint32_t j = block_ == kNone ? 0 : block_;
    if (last[j] < d) j = std::uint32_t(std::lower_bound(last + j, last + ti_.num_blocks, d) - last);
    if (j == ti_.num_blocks) return false;
    load(j);
    pos_ = unsigned(std::lower_bound(docs_ + pos_, docs_ + n_, d) - docs_);
    return true;  // last[j] >= d: pos_ < n_
  }
  DocId current_doc() const { return docs_[pos_]; }
  std::uint32_t current_freq() const { return freqs_[pos_]; }

 private:
  static constexpr std::uint32_t kNone = ~0u;
  const ShardIndex& shard_;
  const TermInfo& ti_;
  std::uint32_t block_ = kNone;
  unsigned n_ = 0, pos_ = 0;
  std::uint32_t blocks_loaded_ = 0;
  bool with_freqs_ = true;
  DocId docs_[kBlockSize];
  std::uint32_t freqs_[kBlockSize];
};


}  // namespace gpusearch
