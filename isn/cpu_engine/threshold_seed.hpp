// A starting threshold for the pruning algorithms (issue 17): before the first document is
// scored, the blocks of highest block maxima of each list are decoded and their postings scored
// for that one term. Every score is non-negative and the reference adds a document's term
// scores (and static part) in order with monotone rounding, so a document's score is at least
// any one of its term scores plus its static part, computed the same way: the k-th best of one
// list's such partial scores (distinct documents) is a lower bound of the query's k-th score.
// Pruning can start from it instead of from the first window's or documents' scores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "isn/cpu_engine/daat_algorithms.hpp"

namespace gpusearch::cpu {

// The largest such lower bound over the query's lists, each list decoding at most
// `blocks_per_term` blocks (about k / 128 more when k needs them), documents of the cursors'
// range only; -inf when no list has k postings there. `scale` multiplies the result: 1, except
// in the test that proves an inflated seed is caught. The cursors do not move. `best_block`
// (empty, or one per list: the list's block of highest maximum, the first such) spares the
// scan of every list's block maxima when one block per list is decoded. `floor`: a lower bound
// known already (the result is at least it; lists that cannot beat it are not decoded);
// `below_df`: only lists of fewer postings are decoded (the others' bounds are in `floor`).
// `known`: a threshold the run has already (the node's other shards', through the shared slot):
// lists that cannot beat it are not decoded either, and it is not part of the result (issue
// 16: four quarter shards decoded four times the seed blocks one shard does).
double seed_threshold(const QueryContext& ctx, std::span<const PostingCursor> terms, std::size_t k,
                      unsigned blocks_per_term, double scale = 1.0,
                      std::span<const std::uint32_t> best_block = {},
                      double floor = -std::numeric_limits<double>::infinity(),
                      std::uint32_t below_df = std::numeric_limits<std::uint32_t>::max(),
                      double known = -std::numeric_limits<double>::infinity());

}  // namespace gpusearch::cpu
