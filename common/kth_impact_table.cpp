#include "common/kth_impact_table.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <fmt/format.h>

#include "common/block_codec.hpp"
#include "common/error.hpp"
#include "common/scoring.hpp"

namespace gpusearch {

namespace {

// Number of ladder entries a list of df postings has a bound for.
std::uint32_t ladder_entries(std::uint32_t df) {
  return static_cast<std::uint32_t>(
      std::upper_bound(KthImpactTable::kLadder.begin(), KthImpactTable::kLadder.end(), df) -
      KthImpactTable::kLadder.begin());
}

// x as a float not above x (the bounds must stay lower bounds after rounding).
float round_down(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) > x) f = std::nextafter(f, 0.0f);
  return f;
}

struct Scratch {
  std::vector<std::uint32_t> blocks;
  std::vector<double> impacts;
  alignas(16) DocId docs[kBlockSize];
  alignas(16) std::uint32_t freqs[kBlockSize];
};

}  // namespace

KthImpactTable::KthImpactTable(const ShardIndex& shard, std::uint32_t min_df) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint32_t n = shard.num_terms();
  row_begin_.assign(std::size_t(n) + 1, 0);
  for (std::uint32_t t = 0; t < n; ++t) {
    const std::uint32_t df = shard.term(t).df_shard;
    row_begin_[t + 1] = row_begin_[t] + (df >= min_df ? ladder_entries(df) : 0);
  }
  values_.assign(row_begin_[n], 0.0f);
  const IndexParams& p = shard.params();
  const auto lengths = shard.doc_lengths();
  const auto block_max = shard.block_max_impact();
  const std::uint32_t budget = (kLadder.back() + kBlockSize - 1) / kBlockSize + kExtraBlocks;
  tbb::enumerable_thread_specific<Scratch> scratch;
  tbb::parallel_for(tbb::blocked_range<std::uint32_t>(0, n, 256), [&](const auto& range) {
    Scratch& s = scratch.local();
    for (std::uint32_t t = range.begin(); t != range.end(); ++t) {
      const TermInfo& ti = shard.term(t);
      const std::uint32_t entries = row_begin_[t + 1] - row_begin_[t];
      if (entries == 0) continue;
      // The `budget` blocks of highest maxima (all of a short list's), in any order.
      s.blocks.resize(ti.num_blocks);
      for (std::uint32_t i = 0; i < ti.num_blocks; ++i) s.blocks[i] = i;
      const std::uint32_t take = std::min(budget, ti.num_blocks);
      if (take < ti.num_blocks)
        std::nth_element(s.blocks.begin(), s.blocks.begin() + (take - 1), s.blocks.end(),
                         [&](std::uint32_t a, std::uint32_t b) {
                           return block_max[ti.first_block + a] > block_max[ti.first_block + b];
                         });
      s.impacts.clear();
      for (std::uint32_t i = 0; i < take; ++i) {
        const std::uint64_t b = ti.first_block + s.blocks[i];
        const std::uint32_t count =
            std::min<std::uint32_t>(kBlockSize, ti.df_shard - s.blocks[i] * kBlockSize);
        const std::uint32_t* freq_part =
            codec::decode_docids(shard.block_data(b), shard.block_floor(ti, b), s.docs);
        codec::decode_freqs(freq_part, s.freqs);
        for (std::uint32_t j = 0; j < count; ++j) {
          const double norm = length_norm(p.bm25, lengths[s.docs[j]], p.collection.avg_doc_length);
          s.impacts.push_back(impact(s.freqs[j], norm));
        }
      }
      // The K-th largest for every K of the ladder, largest K first, each selection within the
      // K - 1 larger ones of the one before (linear in all; a sort per list was 95% of the
      // build on a shard of 5.5M terms).
      auto end = s.impacts.end();
      for (std::uint32_t e = entries; e-- > 0;) {
        const std::uint32_t K = kLadder[e];
        if (K > s.impacts.size()) continue;  // a long list of few postings in its best blocks
        const auto kth = s.impacts.begin() + (K - 1);
        std::nth_element(s.impacts.begin(), kth, end, std::greater<double>());
        values_[row_begin_[t] + e] = round_down(*kth);
        end = kth;
      }
    }
  });
  build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

KthImpactTable::KthImpactTable(std::vector<std::uint32_t> row_begin, std::vector<float> values)
    : row_begin_(std::move(row_begin)), values_(std::move(values)) {
  if (row_begin_.empty() || row_begin_.front() != 0 || row_begin_.back() != values_.size())
    throw Error("KthImpactTable: rows do not cover the values");
  for (std::size_t t = 0; t + 1 < row_begin_.size(); ++t)
    if (row_begin_[t + 1] < row_begin_[t] || row_begin_[t + 1] - row_begin_[t] > kLadder.size())
      throw Error(fmt::format("KthImpactTable: term {}'s row is not a prefix of the ladder", t));
}

KthImpactTable KthImpactTable::combine(std::span<const KthImpactTable* const> shards) {
  if (shards.empty()) return KthImpactTable(std::vector<std::uint32_t>{0}, {});
  const std::size_t n = shards.front()->num_terms();
  for (const KthImpactTable* s : shards)
    if (s->num_terms() != n)
      throw Error(fmt::format("KthImpactTable::combine: shards of {} and {} terms (not one "
                              "vocabulary)",
                              n, s->num_terms()));
  std::vector<std::uint32_t> row_begin(n + 1, 0);
  std::vector<float> values;
  std::vector<float> candidates;
  for (std::size_t t = 0; t < n; ++t) {
    candidates.clear();
    for (const KthImpactTable* s : shards)
      for (std::uint32_t i = s->row_begin_[t]; i < s->row_begin_[t + 1]; ++i)
        if (s->values_[i] > 0) candidates.push_back(s->values_[i]);
    std::sort(candidates.begin(), candidates.end(), std::greater<>());
    // Postings of the collection known to have impact >= x: per shard, the largest ladder K
    // whose bound is >= x.
    const auto known_at_least = [&](float x) {
      std::uint64_t count = 0;
      for (const KthImpactTable* s : shards) {
        std::uint32_t best = 0;
        for (std::uint32_t i = s->row_begin_[t]; i < s->row_begin_[t + 1]; ++i)
          if (s->values_[i] >= x) best = std::max(best, kLadder[i - s->row_begin_[t]]);
        count += best;
      }
      return count;
    };
    // For each K of the ladder (ascending), the largest candidate reaching K; the candidates
    // come in descending order and the counts grow as x falls, so one pass serves every K.
    std::size_t c = 0;
    for (std::uint32_t K : kLadder) {
      while (c < candidates.size() && known_at_least(candidates[c]) < K) ++c;
      if (c == candidates.size()) break;
      values.push_back(candidates[c]);
    }
    row_begin[t + 1] = static_cast<std::uint32_t>(values.size());
  }
  return KthImpactTable(std::move(row_begin), std::move(values));
}

KthImpactTable::Rows KthImpactTable::rows() const {
  Rows r;
  r.num_terms = static_cast<std::uint32_t>(num_terms());
  for (std::uint32_t t = 0; t < r.num_terms; ++t) {
    const std::uint32_t count = row_begin_[t + 1] - row_begin_[t];
    if (count == 0) continue;
    r.terms.push_back(t);
    r.counts.push_back(static_cast<std::uint8_t>(count));
    r.values.insert(r.values.end(), values_.begin() + row_begin_[t],
                    values_.begin() + row_begin_[t + 1]);
  }
  return r;
}

KthImpactTable KthImpactTable::from_rows(const Rows& r) {
  if (r.terms.size() != r.counts.size())
    throw Error("KthImpactTable: rows of terms and counts differ in length");
  std::vector<std::uint32_t> row_begin(std::size_t(r.num_terms) + 1, 0);
  std::size_t total = 0;
  for (std::size_t i = 0; i < r.terms.size(); ++i) {
    if (r.terms[i] >= r.num_terms || (i > 0 && r.terms[i] <= r.terms[i - 1]))
      throw Error("KthImpactTable: row terms out of range or out of order");
    row_begin[r.terms[i] + 1] = r.counts[i];
    total += r.counts[i];
  }
  if (total != r.values.size()) throw Error("KthImpactTable: row counts do not cover the values");
  for (std::size_t t = 0; t < r.num_terms; ++t) row_begin[t + 1] += row_begin[t];
  return KthImpactTable(std::move(row_begin), r.values);
}

KthImpactTable KthImpactTable::scaled(double factor) const {
  std::vector<float> v(values_.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(values_[i] * factor);
  return KthImpactTable(row_begin_, std::move(v));
}

double KthImpactTable::lower_bound(TermId t, std::size_t k) const {
  if (k == 0 || t + 1 >= row_begin_.size()) return 0.0;
  const auto it = std::lower_bound(kLadder.begin(), kLadder.end(), k);
  if (it == kLadder.end()) return 0.0;
  const std::uint32_t e = static_cast<std::uint32_t>(it - kLadder.begin());
  if (row_begin_[t] + e >= row_begin_[t + 1]) return 0.0;
  return static_cast<double>(values_[row_begin_[t] + e]);
}

}  // namespace gpusearch
