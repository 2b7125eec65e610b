#include "isn/cpu_engine/threshold_seed.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace gpusearch::cpu {

double seed_threshold(const QueryContext& ctx, std::span<const PostingCursor> terms, std::size_t k,
                      unsigned blocks_per_term, double scale,
                      std::span<const std::uint32_t> best_block, double floor,
                      std::uint32_t below_df, double known) {
  double seed = floor;
  // What a list must beat to be worth decoding: the seed so far, or what is known already.
  const auto to_beat = [&] { return std::max(seed, known); };
  if (k == 0 || blocks_per_term == 0) return seed * scale;
  // Enough blocks to hold k postings, and `blocks_per_term` to choose from.
  const std::size_t budget = (k + kBlockSize - 1) / kBlockSize + blocks_per_term - 1;
  // Block numbers (highest block maximum first) and scores: per thread, reused (a seed is
  // computed inside a run, which no other run interrupts on its thread).
  thread_local std::vector<std::uint32_t> best;
  thread_local std::vector<double> scores;
  alignas(16) DocId docs[kBlockSize + PostingCursor::kDecodePadding];
  alignas(16) std::uint32_t freqs[kBlockSize];
  // Lists of highest maximum first: a later list whose best block cannot beat the seed so far
  // is passed over without decoding.
  std::uint32_t order[64];
  const std::size_t n = std::min<std::size_t>(terms.size(), 64);
  for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order, order + n, [&](std::uint32_t a, std::uint32_t b) {
    return terms[a].max_score() > terms[b].max_score();
  });
  for (std::size_t oi = 0; oi < n; ++oi) {
    const PostingCursor& c = terms[order[oi]];
    if (c.docid() == kNoDoc || c.df() < k || c.df() >= below_df || !(c.max_score() > to_beat()))
      continue;
    const std::uint32_t nb = c.num_blocks();
    // The `budget` blocks of highest maxima: given, for one block, else a partial insertion
    // sort (budget is small).
    best.clear();
    if (budget == 1 && best_block.size() == terms.size()) {
      if (nb > 0) best.push_back(best_block[order[oi]]);
    } else {
      for (std::uint32_t b = 0; b < nb; ++b) {
        const float m = c.block_max_impact(b);
        if (best.size() == budget && !(m > c.block_max_impact(best.back()))) continue;
        if (best.size() < budget) best.push_back(b);
        std::size_t i = best.size() - 1;
        for (; i > 0 && c.block_max_impact(best[i - 1]) < m; --i) best[i] = best[i - 1];
        best[i] = b;
      }
    }
    // Skip a list whose best block cannot beat the seed so far.
    if (best.empty() || !(c.weight() * double(c.block_max_impact(best[0])) > to_beat())) continue;
    scores.clear();
    for (const std::uint32_t b : best) {
      // The block the cursor decoded at open() (a short list's only one) is not decoded again.
      const DocId* block_docs = docs;
      const std::uint32_t* block_freqs = freqs;
      std::uint32_t n = c.view_loaded_block(b, block_docs, block_freqs);
      if (n == 0) n = c.decode_block(b, docs, freqs);
      for (std::uint32_t j = 0; j < n; ++j) {
        const DocId d = block_docs[j];
        if (d < c.range_begin() || d >= ctx.range_end) continue;
        // As the algorithms score a term (the reference's operations), plus the static part.
        double s = c.weight() * impact(block_freqs[j], ctx.norm(d));
        if (ctx.static_weight != 0) s = s + ctx.static_score(d);
        scores.push_back(s);
      }
    }
    if (scores.size() < k) continue;
    std::nth_element(scores.begin(), scores.begin() + std::ptrdiff_t(k - 1), scores.end(),
                     std::greater<double>());
    seed = std::max(seed, scores[k - 1]);
  }
  return seed * scale;
}

}  // namespace gpusearch::cpu
