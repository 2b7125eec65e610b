// The work decomposition of a batch (host side): how each query's docID space is cut into
// segments, one thread block each (batch_layout.hpp). Split from gpu_engine.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/shard_index.hpp"
#include "gpu/batch_layout.hpp"
#include "gpu/gpu_engine.hpp"

namespace gpusearch::gpu {

// How a query's docID space is cut: `count` segments at the block boundaries of `driver`, the
// list whose postings its work follows (AND: the shortest, whose postings are the candidates;
// OR: the longest, which holds most of the postings), so that segments get about equal shares.
struct SegmentPlan {
  std::uint32_t count = 1;
  const TermInfo* driver = nullptr;
};

// Segments for a query of `cost` at `segment_cost` each, at most max_segments and at most one
// per block of its driver list; at least 1.
std::uint32_t segment_count(std::uint64_t cost, std::uint64_t segment_cost, unsigned max_segments,
                            std::uint32_t driver_blocks);

// The work decomposition's targets for a batch of nq queries. 0 in the options: chosen by batch
// size, as measured on the H100 (NOTES-gpu-engine.md, 2026-11-24): a small batch's latency is
// its slowest query's chain of windows, so it is cut finer (batch 64: 32 blocks per SM and
// segments of 2,048 postings took the OR kernels of a lone batch from 2.23 to 1.75 ms); at
// 1,024 16 blocks per SM did best, at 4,096 the default 8. Only for long queries: on Debian
// descriptions (short lists) the finer cut cost more than it saved (a batch of 64 through the
// cluster: 0.31 ms against 0.24 at 8 blocks per SM).
struct SegmentTargets {
  unsigned blocks_per_sm;
  unsigned min_segment_postings;
};
SegmentTargets segment_targets(const GpuEngineOptions& o, std::size_t nq, bool long_queries);

// Segments over docIDs [0, end): the shard, or a list-cache query's horizon.
void append_segments(const ShardIndex& shard, std::uint32_t query, const SegmentPlan& plan,
                     DocId end, std::vector<SegmentDesc>& out);

// Several GPUs per ISN: keeps the parts of segments [from, end) that lie in this engine's docID
// range [lo, hi) (the whole shard: unchanged).
void clip_segments(std::vector<SegmentDesc>& segments, std::size_t from, std::uint32_t lo,
                   std::uint32_t hi);

}  // namespace gpusearch::gpu
