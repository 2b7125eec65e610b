#include "gpu/segment_plan.hpp"

#include <algorithm>

namespace gpusearch::gpu {

std::uint32_t segment_count(std::uint64_t cost, std::uint64_t segment_cost, unsigned max_segments,
                            std::uint32_t driver_blocks) {
  std::uint64_t n = segment_cost > 0 ? (cost + segment_cost - 1) / segment_cost : 1;
  n = std::min<std::uint64_t>({n, max_segments, std::max<std::uint32_t>(driver_blocks, 1u)});
  return static_cast<std::uint32_t>(std::max<std::uint64_t>(n, 1));
}

SegmentTargets segment_targets(const GpuEngineOptions& o, std::size_t nq, bool long_queries) {
  const unsigned bps = o.blocks_per_sm != 0          ? o.blocks_per_sm
                       : long_queries && nq <= 256  ? 32
                       : long_queries && nq <= 2048 ? 16
                                                    : 8;
  const unsigned min_postings = o.min_segment_postings != 0 ? o.min_segment_postings
                                : long_queries && nq <= 256 ? 2048
                                                            : 8192;
  return {bps, min_postings};
}

void append_segments(const ShardIndex& shard, std::uint32_t query, const SegmentPlan& plan,
                     DocId end, std::vector<SegmentDesc>& out) {
  if (end == 0) return;  // nothing on the GPU: the CPU answers it all
  const std::uint32_t n_docs = end;
  std::uint32_t lo = 0;
  const auto last = shard.block_last_docid();
  for (std::uint32_t j = 1; j < plan.count; ++j) {
    const std::uint64_t nb = plan.driver->num_blocks;
    const std::uint64_t b = plan.driver->first_block + (j * nb) / plan.count;
    const std::uint32_t boundary = last[b - 1] + 1;  // b > first_block since j >= 1
    if (boundary <= lo || boundary >= n_docs) continue;
    out.push_back(SegmentDesc{query, lo, boundary, 0});
    lo = boundary;
  }
  out.push_back(SegmentDesc{query, lo, n_docs, 0});
}

void clip_segments(std::vector<SegmentDesc>& segments, std::size_t from, std::uint32_t lo,
                   std::uint32_t hi) {
  std::size_t kept = from;
  for (std::size_t i = from; i < segments.size(); ++i) {
    SegmentDesc s = segments[i];
    s.doc_lo = std::max(s.doc_lo, lo);
    s.doc_hi = std::min(s.doc_hi, hi);
    if (s.doc_lo < s.doc_hi) segments[kept++] = s;
  }
  segments.resize(kept);
}

}  // namespace gpusearch::gpu
