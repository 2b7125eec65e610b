// The structures a batch of queries is packed into for the GPU, and the results come back in.
// Plain data shared by host code and kernels; one host-to-device copy brings a whole batch in
// (queries, terms, AND orders, segments) and one device-to-host copy brings all its results
// back (paper 003).
//
// Work decomposition: a query's docID space is cut into one or more segments (docID ranges), and
// each segment is one thread block, so a small batch still fills the GPU while a large batch
// runs about one block per query. The host chooses the cut per batch from a cost estimate (list
// lengths). Each segment writes its local top-k to a partial-result row; a merge kernel turns a
// query's rows into its answer. Segments of one query share a running lower bound of the final
// k-th score (`theta`), so each prunes with what the others have found.
#pragma once

#include <cstdint>

namespace gpusearch::gpu {

// The shard's device image, as kernels see it (gpu/device_shard.hpp owns the memory).
struct ShardView {
  const std::uint32_t* postings;       // every list's blocks: docID block then frequency block
  const std::uint64_t* block_offsets;  // word offset of each block in postings
  const std::uint32_t* block_last_docid;
  const float* block_max_impact;
  const double* length_norm;  // k1 * (1 - b + b * |d| / avgdl), computed on the host exactly
                              // as the reference engine does (AND and BMW score in double)
  const float* length_norm_f;  // the same in float (the OR accumulators score in float)
  const float* pagerank;       // PR'(d) in [0, 1]
  const float* global_score;   // GS(d), non-increasing in docID
  std::uint32_t num_docs;
  // The decoded posting layout (DeviceShard, PostingLayout::kDecoded), or null: every posting
  // as its docID and its impact tf / (tf + norm) rounded to float, in list order, so that the
  // OR kernel reads two coalesced words per posting instead of decoding blocks and gathering
  // length norms. Block b's postings are [block_posting_begin[b], block_posting_begin[b + 1]).
  const std::uint32_t* decoded_docs = nullptr;
  const float* decoded_impacts = nullptr;
  const std::uint64_t* block_posting_begin = nullptr;
};

struct TermDesc {
  std::uint64_t first_block;
  std::uint32_t num_blocks;  // 0: absent from this shard
  std::uint32_t df_shard;
  double weight;             // term_weight of the score formula
  float max_impact;          // largest impact in this shard's list
  std::uint32_t pad;
};

// Kernel algorithm flags.
enum : std::uint32_t {
  kRunAnd = 1u << 0,        // intersect (and, and-or)
  kRunOr = 1u << 1,         // union (or; and-or when the AND answer has fewer than k)
  kOrOnlyIfAndShort = 1u << 2,
  kPruneBlockMax = 1u << 3,  // OR: skip windows whose block-max bound cannot enter the top-k
  kEarlyTerminate = 1u << 4, // stop once the k-th score reaches the GS bound (paper 000)
  kOrByThreads = 1u << 5,    // OR by block-max WAND, docID space split over the block's threads
};

struct QueryDesc {
  std::uint32_t term_begin;  // index of the first TermDesc (query term order)
  std::uint32_t num_terms;
  std::uint32_t shortest;    // AND: position (0-based, query order) of the shortest list
  std::uint32_t flags;
  double static_weight;
  double gs_bound_factor;    // score(d) <= factor * GS(d); < 0: no early termination
  std::uint32_t and_order_begin;  // AND: term positions by increasing list length (u8 each)
  std::uint32_t slot;             // result slot of this query in the batch
  std::uint32_t and_segment_begin, and_segment_count;  // rows of the AND phase's segments
  std::uint32_t or_segment_begin, or_segment_count;    // rows of the OR phase's segments
  double theta_seed;  // OR: a lower bound of the query's k-th score to start from (0: none)
};

// One thread block's share of one query: docIDs [doc_lo, doc_hi).
struct SegmentDesc {
  std::uint32_t query;  // position of the query in the batch
  std::uint32_t doc_lo, doc_hi;
  std::uint32_t pad;
};

// Per query results and counters (counters as QueryCounters).
struct QueryOut {
  std::uint32_t num_hits;     // AND hits (and, and-or) or OR hits (or)
  std::uint32_t num_or_hits;  // and-or: OR hits when the AND answer was short
  unsigned long long and_matches;
  unsigned long long postings_decoded;
  unsigned long long blocks_decoded;
  unsigned long long blocks_skipped;
  unsigned long long docs_scored;
  std::uint32_t early_terminated;
  std::uint32_t or_ran;
  unsigned long long bytes_read;    // compressed posting bytes the kernels read
  unsigned long long rounds_saved;  // early termination: AND rounds / OR windows not processed
};

struct HitOut {
  double score;
  std::uint32_t doc;
  std::uint32_t pad;
};

}  // namespace gpusearch::gpu
