// Several GPUs per ISN (--gpus-per-isn G): the ISN's shard is split into G docID ranges, each GPU
// answers the batch on its range, and the per-range top-k rows are merged into the shard's answer
// on the lead GPU (gpu/nccl_topk_merge.hpp). This header is that merge, written once for both
// sides: compiled by nvcc it is the merge kernel's body, compiled by the host compiler it is the
// CPU twin the tests (tests/unit/range_merge_test.cpp) check against the reference on machines
// without a GPU. No CUDA header is included.
#pragma once

#include <cstdint>
#include <vector>

#include "common/host_device.hpp"

namespace gpusearch::gpu {

inline constexpr unsigned kMaxRangesPerIsn = 8;

// One hit of a per-range row; the layout of the engine's HitOut (16 bytes). `doc` is local to
// the range's first document (the range's GPU numbers its documents from 0).
struct RangeHit {
  double score;
  std::uint32_t doc;
  std::uint32_t pad;
};
static_assert(sizeof(RangeHit) == 16);

// Per query and range: how many hits the row holds, and the AND matches the range found
// (and-or; exact whenever below k, as in ShardResult).
struct RowMeta {
  std::uint32_t count;
  std::uint32_t pad;
  std::uint64_t and_matches;
};
static_assert(sizeof(RowMeta) == 16);

// The rows of one range for a batch of Q queries, in one allocation: hits[q * k + i] for
// i < meta[q].count, best first; then meta[q]. Its size in bytes, for the NCCL transfer.
inline std::uint64_t range_rows_bytes(unsigned queries, unsigned k) {
  return std::uint64_t(queries) * (std::uint64_t(k) * sizeof(RangeHit) + sizeof(RowMeta));
}

// The answer order: score descending, then shard docID ascending (docIDs are in GS order, so
// this is the collection-wide tie-break).
GPUSEARCH_HOST_DEVICE inline bool range_hit_before(double sa, std::uint32_t da, double sb,
                                                   std::uint32_t db) {
  return sa > sb || (sa == sb && da < db);
}

// Merges query q's rows of `ranges` ranges (rows[r] = that range's packed rows; doc_offset[r] =
// its first document) into out_hits[0..count) with shard docIDs, and out_meta (count, summed
// AND matches). A G-way merge of sorted rows: O(k G) per query, one thread per query.
GPUSEARCH_HOST_DEVICE inline void merge_range_rows(const char* const* rows,
                                                   const std::uint32_t* doc_offset, unsigned ranges,
                                                   unsigned queries, unsigned k, unsigned q,
                                                   RangeHit* out_hits, RowMeta* out_meta) {
  unsigned head[kMaxRangesPerIsn] = {};
  unsigned count[kMaxRangesPerIsn] = {};
  const RangeHit* hits[kMaxRangesPerIsn] = {};
  std::uint64_t and_matches = 0;
  for (unsigned r = 0; r < ranges; ++r) {
    hits[r] = reinterpret_cast<const RangeHit*>(rows[r]) + std::uint64_t(q) * k;
    const RowMeta& m = reinterpret_cast<const RowMeta*>(rows[r] + std::uint64_t(queries) * k *
                                                                      sizeof(RangeHit))[q];
    count[r] = m.count < k ? m.count : k;
    and_matches += m.and_matches;
  }
  unsigned n = 0;
  for (; n < k; ++n) {
    int best = -1;
    double best_score = 0;
    std::uint32_t best_doc = 0;
    for (unsigned r = 0; r < ranges; ++r) {
      if (head[r] >= count[r]) continue;
      const RangeHit& h = hits[r][head[r]];
      const std::uint32_t doc = h.doc + doc_offset[r];
      if (best < 0 || range_hit_before(h.score, doc, best_score, best_doc)) {
        best = int(r);
        best_score = h.score;
        best_doc = doc;
      }
    }
    if (best < 0) break;
    ++head[best];
    out_hits[n] = RangeHit{best_score, best_doc, 0};
  }
  *out_meta = RowMeta{n, 0, and_matches};
}

// The same merge, one hit at a time (the merge kernel's form: a thread per hit, no thread
// walking k hits one after another). Hit i of range r's row for query q lands at rank
// i + (the hits of every other range's row that come before it); rows are sorted by
// range_hit_before and the ranges' documents are disjoint, so the ranks are distinct and the
// first min(k, total) of them are merge_range_rows's hits. Returns that rank (k or more: not in
// the answer). range_row_count is the row's hit count (at most k).
GPUSEARCH_HOST_DEVICE inline unsigned range_row_count(const char* row_set, unsigned queries,
                                                      unsigned k, unsigned q) {
  const RowMeta& m =
      reinterpret_cast<const RowMeta*>(row_set + std::uint64_t(queries) * k * sizeof(RangeHit))[q];
  return m.count < k ? m.count : k;
}
GPUSEARCH_HOST_DEVICE inline unsigned range_hit_merged_rank(const char* const* rows,
                                                            const std::uint32_t* doc_offset,
                                                            unsigned ranges, unsigned queries,
                                                            unsigned k, unsigned q, unsigned r,
                                                            unsigned i) {
  const RangeHit& h = reinterpret_cast<const RangeHit*>(rows[r])[std::uint64_t(q) * k + i];
  const std::uint32_t doc = h.doc + doc_offset[r];
  unsigned rank = i;
  for (unsigned other = 0; other < ranges; ++other) {
    if (other == r) continue;
    const RangeHit* row = reinterpret_cast<const RangeHit*>(rows[other]) + std::uint64_t(q) * k;
    // The hits before h are a prefix of the sorted row: its length by binary search.
    unsigned lo = 0, hi = range_row_count(rows[other], queries, k, q);
    while (lo < hi) {
      const unsigned mid = (lo + hi) / 2;
      if (range_hit_before(row[mid].score, row[mid].doc + doc_offset[other], h.score, doc))
        lo = mid + 1;
      else
        hi = mid;
    }
    rank += lo;
  }
  return rank;
}

// The G docID ranges of a shard of `docs` documents: equal counts, contiguous; range r is
// [first[r], first[r + 1]). first has G + 1 entries.
inline std::vector<std::uint32_t> split_doc_ranges(std::uint32_t docs, unsigned ranges) {
  std::vector<std::uint32_t> first(ranges + 1);
  for (unsigned r = 0; r <= ranges; ++r) first[r] = std::uint32_t(std::uint64_t(docs) * r / ranges);
  return first;
}

}  // namespace gpusearch::gpu
