// Host entry points of the batched query kernels (gpu/query_kernels.cu). One thread block per
// query; each launch covers a whole batch.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gpu/batch_layout.hpp"

namespace gpusearch::gpu {

inline constexpr unsigned kThreadsPerQuery = 256;  // threads of the block that runs one query
inline constexpr unsigned kAndRoundCandidates = 256;  // AND: shortest-list postings per round
inline constexpr unsigned kMaxGpuTerms = 64;
inline constexpr unsigned kValuesPerBlockHost = 128;  // postings per block (common/types.hpp)

struct BatchPointers {
  const QueryDesc* queries;
  const TermDesc* terms;
  const std::uint8_t* and_order;  // per query, term positions by increasing list length
  QueryOut* out;                  // one per query slot
  HitOut* hits;                   // 2k per query slot: [0, k) first answer, [k, 2k) and-or's OR
  std::uint32_t* term_cache;      // OR: 2 * (2 * 128 + 1) words per term of the batch
  std::uint32_t num_queries;
  std::uint32_t k;
  std::uint32_t max_terms;  // largest num_terms of the batch (shared-memory sizing)
};

// Shared memory the kernels need for a batch (bytes), and the largest the device allows.
std::size_t and_kernel_shared_bytes(unsigned k, unsigned max_terms);
std::size_t or_kernel_shared_bytes(unsigned k, unsigned max_terms, unsigned window);
// Raises the kernels' dynamic shared-memory limits to the device's maximum (once per device).
void configure_query_kernels();

// Ranked AND (paper 000 Algorithm 1 over the shortest list, paper 003's per-element binary
// search with block skipping): fills hits[0, k), num_hits and and_matches.
void launch_and_kernel(const ShardView& shard, const BatchPointers& batch, cudaStream_t stream);
// OR by windowed score accumulation (paper 001, section 8.3), optionally pruned by block-max
// bounds per window and by the GS bound: fills hits[0, k) (or [k, 2k) for and-or).
void launch_or_kernel(const ShardView& shard, const BatchPointers& batch, unsigned window,
                      cudaStream_t stream);

// OR by block-max WAND (paper 002) for the queries flagged kOrByThreads: `threads` (P) threads
// per query, each over its share of the docID space; k <= kBmwMaxK, terms <= kBmwMaxTerms.
inline constexpr unsigned kBmwMaxK = 64;
inline constexpr unsigned kBmwMaxTerms = 16;
std::size_t bmw_kernel_shared_bytes(unsigned k);
void launch_bmw_kernel(const ShardView& shard, const BatchPointers& batch, unsigned threads,
                       cudaStream_t stream);

// Decodes every posting block [first, first + count) (docIDs and frequencies) and writes one
// checksum word per block: the decoding benchmark and its check against the CPU decoder.
void launch_decode_blocks(const ShardView& shard, std::uint64_t first_block, std::uint64_t count,
                          std::uint32_t* checksums, cudaStream_t stream);

}  // namespace gpusearch::gpu
