// Block-max MaxScore over docID windows (Turtle and Flood 1995; block-max bounds as in
// Chakrabarti et al., WSDM 2011, and Mallia et al., SIGIR 2019; the window organisation of
// Lucene's MaxScoreBulkScorer):
//   - the docID range is cut into windows of `window_docs` documents;
//   - per window, every list's bound is the largest block maximum of its blocks that overlap
//     the window; lists sorted by that bound split into non-essential ones (together, with the
//     static part's bound, below the threshold: no document they alone hold can enter) and
//     essential ones; a window with no essential list is skipped without decoding anything;
//   - the essential lists are scored term-at-a-time into a window of accumulators, in
//     query-term order, so that a document no other list holds already has the reference's
//     score, bit for bit;
//   - each document so found is bounded by its partial score plus the window bounds of the
//     non-essential lists, then by their block maxima at it, strongest list first, probing
//     each list only while the bound still reaches the threshold; a document that gains a
//     non-essential term is re-added in query-term order before it is offered.
// Compared with the document-at-a-time block_max_maxscore (daat_algorithms.hpp) this pays no
// per-document minimum over cursors, adapts the essential set to each window's block maxima,
// and keeps the per-posting work to a multiply, a divide and an add, which is what matters at
// large k, where almost every list stays essential.
#pragma once

#include <cstdint>
#include <span>

#include "isn/cpu_engine/daat_algorithms.hpp"

namespace gpusearch::cpu {

inline constexpr unsigned kDefaultWindowDocs = 4096;
// CpuEngineOptions::window_docs 0: windows by the shard's size.
inline unsigned window_docs_for(std::uint64_t shard_docs) {
  return shard_docs > (std::uint64_t(1) << 20) ? 2 * kDefaultWindowDocs : kDefaultWindowDocs;
}

RunStats windowed_maxscore(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
                           QueryCounters& counters, unsigned window_docs = kDefaultWindowDocs);

// A one-term query (maxscore's path for it): the list's blocks in docID order; a block whose
// maximum (plus the static part's bound) is below the threshold is passed over without
// decoding, the others are scored posting by posting. With the starting threshold
// (threshold_seed.hpp), which for one list is the k-th score of its best block, almost every
// block but the best is passed over; the windows' per-window bounds and accumulators are
// not needed.
RunStats single_list_top_k(const QueryContext& ctx, PostingCursor& list, TopK& top,
                           QueryCounters& counters);

}  // namespace gpusearch::cpu
