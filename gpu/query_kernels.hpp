// Host entry points of the batched query kernels. Each kernel lives in its own file:
//   gpu/ranked_and_kernel.cu      ranked AND with GS early termination (paper 000, Alg. 1)
//   gpu/ranked_or_kernel.cu       OR by shared-memory accumulator windows (paper 001, 8.3)
//   gpu/block_max_wand_kernel.cu  OR by block-max WAND over a block's threads (paper 002)
//   gpu/topk_merge_kernel.cu      a query's segment top-k rows merged into its answer
//   gpu/decode_kernel.cu          every block of a range decoded (benchmark and tests)
// A launch covers a whole batch: one thread block per segment (batch_layout.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gpu/batch_layout.hpp"

namespace gpusearch::gpu {

inline constexpr unsigned kThreadsPerQuery = 256;     // threads of the AND and OR blocks
inline constexpr unsigned kAndRoundCandidates = 256;  // AND: shortest-list postings per round
inline constexpr unsigned kMaxGpuTerms = 64;          // longer queries go to the host engine
inline constexpr unsigned kValuesPerBlockHost = 128;  // postings per block (common/types.hpp)
inline constexpr unsigned kMaxSegmentsPerQuery = 64;

struct BatchPointers {
  const QueryDesc* queries;
  const TermDesc* terms;
  const std::uint8_t* and_order;  // per query, term positions by increasing list length
  const SegmentDesc* and_segments;
  const SegmentDesc* or_segments;
  QueryOut* out;                  // one per query slot
  HitOut* hits;                   // 2k per query slot: [0, k) first answer, [k, 2k) and-or's OR
  HitOut* partial_hits;           // k per segment row: a segment's local top-k
  std::uint32_t* partial_count;   // per segment row: entries in its partial_hits row
  // Per AND / OR segment row, and_topk_row_bytes() / or_topk_row_bytes() each: the kernel's
  // running top-k when it lives in global memory (and_topk_in_global, or_topk_in_global); null
  // when it lives in shared memory. The two kernels run one after the other: one region.
  std::byte* and_topk_rows;
  std::byte* or_topk_rows;
  unsigned long long* theta_and;  // per query: best k-th score any AND segment has (double bits)
  unsigned long long* theta_or;   // the same for the OR phase
  std::uint32_t num_queries;
  std::uint32_t num_and_segments, num_or_segments;
  std::uint32_t k;
  std::uint32_t max_terms;  // largest num_terms of the batch (shared-memory sizing)
  float bound_scale;        // 1, except in the test that weakens every pruning bound
};

// Where a segment's running top-k (k plus a buffer, 12 bytes an entry) lives. Auto: in shared
// memory unless moving it to a global-memory row lets more blocks reside per multiprocessor
// (k = 1000: 24 KB of the OR block's 66 KB, 3 blocks instead of 4), the launch has more
// segments than the device holds at the lower residency, and its segments are long (at most two
// per query: each segment pays its own flushes). The kernels are latency-bound, so there a
// resident block is worth more than the flushes' slower memory (H100, OR at k = 1000: 1.13x to
// 1.25x at batches of 1,024 and 4,096, one segment a query), while many short segments pay for
// the slower flushes (0.81x at batch 64, 16 segments a query).
enum class TopKMemory { kAuto, kShared, kGlobal };

// Shared memory the kernels need for a batch (bytes); without the top-k arrays when they are
// in global memory.
std::size_t and_kernel_shared_bytes(unsigned k, unsigned max_terms, bool topk_in_global = false);
// Whether a launch of `segments` AND segments keeps its top-k in global memory.
bool and_topk_in_global(unsigned k, unsigned max_terms, TopKMemory memory, std::size_t segments,
                        std::size_t queries);
// Bytes of one AND segment's global top-k row.
std::size_t and_topk_row_bytes(unsigned k);
// The OR kernel's shape: accumulator window (documents), threads per segment, and whether
// each warp stages a posting block's words in shared memory before decoding it.
struct OrKernelConfig {
  unsigned window = 8192;
  unsigned threads = 256;
  bool stage_blocks = false;
  TopKMemory topk_memory = TopKMemory::kAuto;
};
// The kernel's dynamic shared memory; without the top-k arrays when they are in global memory.
std::size_t or_kernel_shared_bytes(unsigned k, unsigned max_terms, const OrKernelConfig& config,
                                   bool topk_in_global = false);
// Whether a launch of `segments` OR segments for `queries` queries keeps its top-k in global
// memory (config.topk_memory; auto decided as above on the current device).
bool or_topk_in_global(unsigned k, unsigned max_terms, const OrKernelConfig& config,
                       std::size_t segments, std::size_t queries);
// Bytes of one OR segment's global top-k row.
std::size_t or_topk_row_bytes(unsigned k, unsigned threads);
std::size_t bmw_kernel_shared_bytes(unsigned k, unsigned threads);
// Reads the current device's limits once and raises the kernels' dynamic shared-memory limits
// to its maximum; later launches on the device check their budget against the cached limit.
void configure_query_kernels();

// Ranked AND over batch.and_segments: each segment's local top-k into its partial row,
// and_matches and counters into out.
void launch_and_kernel(const ShardView& shard, const BatchPointers& batch, cudaStream_t stream);
// OR over batch.or_segments by windowed score accumulation, optionally pruned by block-max
// bounds per window and by the GS bound (queries without kOrByThreads).
void launch_or_kernel(const ShardView& shard, const BatchPointers& batch,
                      const OrKernelConfig& config, cudaStream_t stream);
// OR by block-max WAND (paper 002) over batch.or_segments for the queries flagged
// kOrByThreads: `threads` threads per segment, each over its share of the segment's docIDs;
// k <= kBmwMaxK, terms <= kBmwMaxTerms.
inline constexpr unsigned kBmwMaxK = 64;
inline constexpr unsigned kBmwMaxTerms = 16;
void launch_bmw_kernel(const ShardView& shard, const BatchPointers& batch, unsigned threads,
                       cudaStream_t stream);
// Merges each query's segment rows of one phase (AND, or OR) into hits and num_hits /
// num_or_hits. Runs after that phase's segment kernels on the same stream.
enum class MergePhase : unsigned { kAnd = 0, kOr = 1 };
void launch_topk_merge(const BatchPointers& batch, MergePhase phase, cudaStream_t stream);

// Decodes every posting block [first, first + count) (docIDs and frequencies). Where docs and
// freqs are given, writes 128 words per block to each (docIDs relative to floor 0; words past a
// block's count are 0); where checksums is given, one word per block mixing its values.
// `scan`: the warp prefix sum the query kernels use (hand-written shuffles) or CUB's WarpScan.
enum class DecodeScan { kShuffles, kCub };
void launch_decode_blocks(const ShardView& shard, std::uint64_t first_block, std::uint64_t count,
                          std::uint32_t* docs, std::uint32_t* freqs, std::uint32_t* checksums,
                          cudaStream_t stream, DecodeScan scan = DecodeScan::kShuffles);

// gpu/decoded_postings_kernel.cu: fills the decoded posting layout (ShardView::decoded_docs,
// decoded_impacts) of every block of `shard`, whose block_posting_begin is set; block_floors[b]
// is the first docID block b can hold. Blocks whose header's count differs from their
// block_posting_begin span are left out and counted in *count_mismatches (device memory).
void launch_expand_postings(const ShardView& shard, const std::uint32_t* block_floors,
                            std::uint64_t num_blocks, std::uint32_t* docs, float* impacts,
                            unsigned* count_mismatches, cudaStream_t stream);

}  // namespace gpusearch::gpu
