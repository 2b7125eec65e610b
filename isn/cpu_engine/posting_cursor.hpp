// What a document-at-a-time query walks: one term's compressed posting list in one shard,
// restricted to a docID range [begin, end). Blocks are decoded lazily: docIDs when the cursor
// lands in a block, frequencies only when a document of the block is scored. Skips use the
// per-block last docIDs (blocks.last_docid) without decoding; a second, "shallow" block pointer
// walks the block-max scores (blocks.max_impact) ahead of the decoded block, as block-max WAND
// and block-max MaxScore need (Ding and Suel, SIGIR 2011, section 4).
#pragma once

#include <algorithm>
#include <cstdint>

#include <emmintrin.h>

#include "common/block_codec.hpp"
#include "common/search_result.hpp"
#include "common/shard_index.hpp"

namespace gpusearch::cpu {

class PostingCursor {
 public:
  // User-provided, so that a vector of cursors (one per query term, per run) does not zero the
  // block buffers (1.1 KB a cursor): nothing reads them before open() decodes a block.
  PostingCursor() noexcept {}

  // Positions the cursor on the first posting of term `t` with docID >= begin; docid() is kNoDoc
  // once the cursor reaches a docID >= end or the end of the list. `weight` multiplies impacts.
  // `bound_scale` multiplies every upper bound the cursor gives (max_score, block maxima): 1
  // except in the tests that prove a weakened bound is caught.
  void open(const ShardIndex& shard, TermId t, double weight, DocId begin, DocId end,
            QueryCounters* counters, double bound_scale = 1.0) {
    const TermInfo& info = shard.term(t);
    shard_ = &shard;
    info_ = &info;
    weight_ = weight;
    bound_weight_ = weight * bound_scale;
    max_score_ = bound_weight_ * double(info.max_impact);
    last_ = shard.block_last_docid().data() + info.first_block;
    block_max_ = shard.block_max_impact().data() + info.first_block;
    num_blocks_ = info.num_blocks;
    begin_ = begin;
    end_ = end;
    counters_ = counters;
    // Blocks that can hold docIDs in [begin, end): the skipped-block count is taken against them.
    const std::uint32_t first =
        std::uint32_t(std::lower_bound(last_, last_ + num_blocks_, begin) - last_);
    std::uint32_t stop = num_blocks_;
    if (end != kNoDoc && first < num_blocks_)
      stop = std::min<std::uint32_t>(
          num_blocks_,
          std::uint32_t(std::lower_bound(last_ + first, last_ + num_blocks_, end) - last_) + 1);
    blocks_in_range_ = first < stop ? stop - first : 0;
    blocks_decoded_ = 0;
    block_ = kNone;
    shallow_ = first;
    if (first >= num_blocks_ || begin >= end) {
      docid_ = kNoDoc;
      return;
    }
    load_block(first);
    pos_ = 0;
    while (docs_[pos_] < begin) ++pos_;  // the block's last docID is >= begin
    set_current();
  }

  // Adds the blocks this cursor never decoded (skipped or left behind) to the counters.
  void finish() {
    if (counters_ && blocks_in_range_ > blocks_decoded_)
      counters_->blocks_skipped += blocks_in_range_ - blocks_decoded_;
    blocks_in_range_ = 0;
  }

  DocId docid() const { return docid_; }
  double weight() const { return weight_; }
  // Upper bound of weight * impact over the whole list (TermInfo::max_impact).
  double max_score() const { return max_score_; }
  std::uint32_t df() const { return info_->df_shard; }

  void next() {
    if (++pos_ == count_) {
      if (block_ + 1 >= num_blocks_) {
        docid_ = kNoDoc;
        return;
      }
      load_block(block_ + 1);
      pos_ = 0;
    }
    set_current();
  }

  // Moves to the first posting with docID >= d (never backwards).
  void next_geq(DocId d) {
    if (d <= docid_) return;
    if (d >= end_) {
      docid_ = kNoDoc;
      pending_ = false;
      return;
    }
    seek(d);
  }

  // Shallow move (block-max WAND): when d lies past the decoded block, the cursor only records
  // d as a lower bound of its next docID (docid() returns d, pending() is true) and decodes
  // nothing; materialize() or next_geq() later finds the real posting. A block skipped again
  // before that is never decoded.
  void skip_to(DocId d) {
    if (d <= docid_) return;
    if (d >= end_ || d > last_[num_blocks_ - 1]) {
      docid_ = kNoDoc;
      pending_ = false;
      return;
    }
    if (!pending_ && d <= last_[block_]) {
      pos_ = position_in_block(d);
      set_current();
      return;
    }
    docid_ = d;
    pending_ = true;
  }
  bool pending() const { return pending_; }
  // Replaces the lower bound of skip_to() by the real docID (>= it).
  void materialize() {
    if (pending_) seek(docid_);
  }

 private:
  // next_geq(d) for end_ > d > docid(), docid() possibly a pending lower bound.
  void seek(DocId d) {
    if (d > last_[block_]) {
      // Gallop over the block last docIDs, then binary search: long skips stay logarithmic.
      std::uint32_t lo = block_ + 1, step = 1, hi = lo;
      while (hi < num_blocks_ && last_[hi] < d) lo = hi + 1, hi += step, step *= 2;
      hi = std::min(hi + 1, num_blocks_);
      const std::uint32_t b = std::uint32_t(std::lower_bound(last_ + lo, last_ + hi, d) - last_);
      if (b >= num_blocks_) {
        docid_ = kNoDoc;
        pending_ = false;
        return;
      }
      load_block(b);
      pos_ = 0;
    }
    pos_ = position_in_block(d);
    set_current();
  }

  // How many of the 16 docIDs from `p` are below d (SSE2 compares; the decoded block is padded
  // with kNoDoc, so reading 16 is always safe and the padding never counts).
  static std::uint32_t count_below16(const DocId* p, DocId d) {
    const __m128i bias = _mm_set1_epi32(std::int32_t(0x80000000u));  // unsigned order
    const __m128i key = _mm_xor_si128(_mm_set1_epi32(std::int32_t(d)), bias);
    int mask = 0;
    for (int i = 0; i < 4; ++i) {
      const __m128i v = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p) + i),
                                      bias);
      mask |= _mm_movemask_ps(_mm_castsi128_ps(_mm_cmplt_epi32(v, key))) << (4 * i);
    }
    // The docIDs are increasing, so the set bits are a prefix: count them with one bit scan
    // (no popcnt instruction in the baseline x86-64 target).
    return std::uint32_t(__builtin_ctz(~unsigned(mask)));
  }

  // The first position >= pos_ of the decoded block whose docID is >= d (the block's last docID
  // is >= d). Near (within 16 postings, the common case): a branch-free count; far
  // (MaxScore's probes of long non-essential lists jump through a block): a branch-free binary
  // search.
  std::uint32_t position_in_block(DocId d) const {
    const std::uint32_t p = pos_;
    const std::uint32_t near = count_below16(docs_ + p, d);
    if (near < 16) return p + near;
    const DocId* base = docs_ + p + 16;
    std::uint32_t n = count_ - p - 16;  // > 0: the block's last docID is >= d
    while (n > 1) {
      const std::uint32_t half = n / 2;
      base = base[half] < d ? base + half : base;
      n -= half;
    }
    return std::uint32_t(base - docs_) + (*base < d);
  }

 public:
  // Frequency of the current posting; decodes the block's frequencies on first use.
  std::uint32_t freq() {
    if (!freqs_decoded_) {
      codec::decode_freqs(freq_part_, freqs_);
      freqs_decoded_ = true;
    }
    return freqs_[pos_];
  }

  // Shallow block pointer: moves to the block that would hold d (without decoding) and returns
  // the bound weight * block_max_impact there, or 0 past the list's end.
  double block_max_score(DocId d) {
    if (shallow_ < block_ && block_ != kNone) shallow_ = block_;
    while (shallow_ < num_blocks_ && last_[shallow_] < d) ++shallow_;
    return shallow_ < num_blocks_ ? bound_weight_ * double(block_max_[shallow_]) : 0.0;
  }

  // Bound of weight * impact over the postings of [lo, hi] still ahead of the cursor: the
  // largest block maximum of the blocks that overlap it (no decoding). `cover_last` gets the
  // last docID of the last of those blocks (kNoDoc if the list ends before hi): the bound holds
  // up to it. Moves the shallow pointer to lo's block; lo never decreases between calls.
  double window_max_score(DocId lo, DocId hi, DocId& cover_last) {
    if (shallow_ < block_ && block_ != kNone) shallow_ = block_;
    if (shallow_ < num_blocks_ && last_[shallow_] < lo) {
      // Gallop: a list left behind (MaxScore's non-essential lists) may be far behind lo.
      std::uint32_t lo_b = shallow_ + 1, step = 1, hi_b = lo_b;
      while (hi_b < num_blocks_ && last_[hi_b] < lo) lo_b = hi_b + 1, hi_b += step, step *= 2;
      hi_b = std::min(hi_b + 1, num_blocks_);
      shallow_ = std::uint32_t(std::lower_bound(last_ + lo_b, last_ + hi_b, lo) - last_);
    }
    float m = 0;
    std::uint32_t b = shallow_;
    for (; b < num_blocks_; ++b) {
      m = std::max(m, block_max_[b]);
      if (last_[b] >= hi) break;
    }
    cover_last = b < num_blocks_ ? last_[b] : kNoDoc;
    return bound_weight_ * double(m);
  }

  // Calls f(docs, freqs, n) for the postings from the current one up to docID `bound`
  // (exclusive), one run of a decoded block at a time (docIDs and frequencies decoded block by
  // block); leaves the cursor on the first posting >= bound (or kNoDoc). Term-at-a-time
  // scoring of a window (windowed MaxScore).
  template <typename F>
  void for_each_run_below(DocId bound, F&& f) {
    const DocId limit = std::min(bound, end_);
    while (docid_ < limit) {
      if (!freqs_decoded_) {
        codec::decode_freqs(freq_part_, freqs_);
        freqs_decoded_ = true;
      }
      std::uint32_t stop = count_;
      if (last_[block_] >= limit) {
        stop = pos_;
        std::uint32_t c;  // the block's last docID is >= limit
        while ((c = count_below16(docs_ + stop, limit)) == 16) stop += 16;
        stop += c;
      }
      f(docs_ + pos_, freqs_ + pos_, stop - pos_);
      if (stop < count_) {
        pos_ = stop;
        set_current();
        return;
      }
      if (block_ + 1 >= num_blocks_) {
        pos_ = count_ - 1;
        docid_ = kNoDoc;
        return;
      }
      load_block(block_ + 1);
      pos_ = 0;
      set_current();
    }
  }
  // Calls f(docid) for the decoded postings from the current one on with docID < bound (no
  // decoding, the cursor does not move): to prefetch what they will need.
  template <typename F>
  void for_each_decoded_below(DocId bound, F&& f) const {
    if (docid_ == kNoDoc || pending_) return;
    for (std::uint32_t i = pos_; i < count_ && docs_[i] < bound; ++i) f(docs_[i]);
  }
  // Random access to the list's blocks, apart from the cursor (which does not move):
  // threshold_seed.cpp decodes the blocks of highest block maxima before a query starts.
  std::uint32_t num_blocks() const { return num_blocks_; }
  float block_max_impact(std::uint32_t b) const { return block_max_[b]; }
  DocId range_begin() const { return begin_; }
  DocId range_end() const { return end_; }
  // Block b's postings without decoding them again when the cursor holds b decoded already
  // (open() decodes the first block: a short list's only one): points docs and freqs at the
  // cursor's own (its frequencies decoded now, kept for the scoring that follows) and returns
  // the count; 0 when the cursor holds another block (decode_block() then).
  std::uint32_t view_loaded_block(std::uint32_t b, const DocId*& docs,
                                  const std::uint32_t*& freqs) const {
    if (b != block_ || pending_ || block_ == kNone) return 0;
    if (!freqs_decoded_) {
      codec::decode_freqs(freq_part_, freqs_);
      freqs_decoded_ = true;
    }
    docs = docs_;
    freqs = freqs_;
    return count_;
  }
  // Decodes block b into docs (kBlockSize + 16 entries) and freqs (kBlockSize); returns its
  // posting count. Counts the postings as decoded, not the block (the cursor may decode it
  // again; blocks decoded and skipped still add up to the list's blocks).
  std::uint32_t decode_block(std::uint32_t b, DocId* docs, std::uint32_t* freqs) const {
    const std::uint64_t global = info_->first_block + b;
    const std::uint32_t* fp =
        codec::decode_docids(shard_->block_data(global), shard_->block_floor(*info_, global), docs);
    codec::decode_freqs(fp, freqs);
    const std::uint32_t count =
        b + 1 == num_blocks_ ? info_->df_shard - b * kBlockSize : kBlockSize;
    if (counters_) counters_->postings_decoded += count;
    return count;
  }
  static constexpr std::uint32_t kDecodePadding = 16;

  // Last docID of the shallow block (kNoDoc past the list's end): the bound of
  // block_max_score() holds up to it.
  DocId block_max_last() const { return shallow_ < num_blocks_ ? last_[shallow_] : kNoDoc; }

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  void load_block(std::uint32_t b) {
    const std::uint64_t global = info_->first_block + b;
    freq_part_ = codec::decode_docids(shard_->block_data(global),
                                      shard_->block_floor(*info_, global), docs_);
    block_ = b;
    count_ = b + 1 == num_blocks_ ? info_->df_shard - b * kBlockSize : kBlockSize;
    const __m128i none = _mm_set1_epi32(-1);  // kNoDoc padding, see count_below16
    for (std::uint32_t i = 0; i < kPad; i += 4)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(docs_ + count_ + i), none);
    freqs_decoded_ = false;
    pending_ = false;
    ++blocks_decoded_;
    if (counters_) {
      ++counters_->blocks_decoded;
      counters_->postings_decoded += count_;
    }
  }
  void set_current() {
    docid_ = docs_[pos_];
    if (docid_ >= end_) docid_ = kNoDoc;
  }

  const ShardIndex* shard_ = nullptr;
  const TermInfo* info_ = nullptr;
  const DocId* last_ = nullptr;
  const float* block_max_ = nullptr;
  const std::uint32_t* freq_part_ = nullptr;
  QueryCounters* counters_ = nullptr;
  double weight_ = 0, bound_weight_ = 0, max_score_ = 0;
  DocId docid_ = kNoDoc, begin_ = 0, end_ = kNoDoc;
  std::uint32_t num_blocks_ = 0, block_ = kNone, shallow_ = 0, pos_ = 0, count_ = 0;
  std::uint32_t blocks_in_range_ = 0, blocks_decoded_ = 0;
  // The block's frequencies are decoded on first use (a cache: view_loaded_block() fills it too).
  mutable bool freqs_decoded_ = false;
  bool pending_ = false;
  static constexpr std::uint32_t kPad = 16;
  alignas(16) DocId docs_[kBlockSize + kPad];
  alignas(16) mutable std::uint32_t freqs_[kBlockSize];
};

}  // namespace gpusearch::cpu
