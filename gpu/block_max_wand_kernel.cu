// OR by block-max WAND with a segment's docID space split across the P threads of its block
// (paper 002): thread j runs sequential BMW (Ding and Suel) over its 1/P of the segment with
// its own top-k, pruning against the larger of its own k-th score and the best k-th score any
// thread of the block (or, at the start, any segment of the query) has published, a lower
// bound of the final k-th score, so pruning stays exact; the local top-k lists are merged at
// the end. Posting lists are read by per-thread streaming cursors that decode one posting at a
// time straight from the compressed block (O(1) state per list, no per-thread block buffers).
// Scores are computed in double in the reference's order.
#include "gpu/cuda_util.hpp"
#include "gpu/kernel_limits.hpp"
#include "gpu/segment_output.cuh"
#include "gpu/shard_access.cuh"

namespace gpusearch::gpu {

namespace {

struct BmwLayout {
  std::size_t state, counters, theta, top_score, top_doc, total;
};
__host__ __device__ constexpr BmwLayout bmw_layout(unsigned k, unsigned threads) {
  BmwLayout l{};
  std::size_t o = 0;
  l.state = o; o = align16(o + sizeof(TopKState) + 16);
  l.counters = o; o = align16(o + kNumCounters * sizeof(unsigned long long));
  l.theta = o; o = align16(o + sizeof(unsigned long long));
  const unsigned cap = topk_capacity(k, 2 * threads);
  l.top_score = o; o = align16(o + cap * 8);
  l.top_doc = o; o = align16(o + cap * 4);
  l.total = o;
  return l;
}


struct StreamCursor {
  std::uint64_t block, list_end;
  const std::uint32_t* doc_words;  // docID part of the current block (global memory)
  const std::uint32_t* freq_words;
  std::uint32_t doc;  // current docID, kEndDoc past the end
  std::uint32_t index, count;
  std::uint32_t doc_header, freq_header;
  std::uint32_t doc_exception, freq_exception;  // next exception to patch, by position order
  std::uint64_t first_block;
};

// Global-memory words through the read-only cache.
struct LdgLoad {
  __device__ __forceinline__ std::uint32_t operator()(const std::uint32_t* p) const {
    return __ldg(p);
  }
};

// Value i of the block at `block` (header word already read), through the shared block layout
// (common/block_layout.hpp). Exceptions are patched with a cursor over their ascending
// positions, so a forward walk over the block reads each position once.
__device__ __forceinline__ std::uint32_t extract(const std::uint32_t* block, std::uint32_t header,
                                                 unsigned i, std::uint32_t* exception_cursor) {
  const BlockHeader h = read_header(header);
  const std::uint32_t* packed = block + 1;
  std::uint32_t x = codec::packed_value(packed, h, i, LdgLoad{});
  if (h.exceptions != 0) {  // positions ascend: skip those before i, patch if one is at i
    const std::uint32_t* positions = packed + packed_words(h);
    unsigned j = *exception_cursor;
    unsigned p = 0;
    while (j < h.exceptions && (p = codec::exception_position(positions, j, LdgLoad{})) < i) ++j;
    if (j < h.exceptions && p == i) {
      x |= codec::exception_high_bits(positions, h, j, LdgLoad{});
      ++j;
    }
    *exception_cursor = j;
  }
  return x;
}

// Positions the cursor at the first posting of block b, whose docIDs start after prev_doc.
__device__ __forceinline__ void enter_block(const ShardView& s, StreamCursor& c, std::uint64_t b,
                                            unsigned long long* blocks_decoded) {
  c.block = b;
  if (b >= c.list_end) {
    c.doc = kEndDoc;
    return;
  }
  c.doc_words = s.postings + __ldg(s.block_offsets + b);
  c.doc_header = __ldg(c.doc_words);
  const BlockHeader h = read_header(c.doc_header);
  c.freq_words = c.doc_words + codec::words_for(h);
  c.freq_header = __ldg(c.freq_words);
  c.count = h.count;
  c.index = 0;
  c.doc_exception = 0;
  c.freq_exception = 0;
  const std::uint32_t prev = b == c.first_block ? 0xffffffffu : __ldg(s.block_last_docid + b - 1);
  c.doc = prev + extract(c.doc_words, c.doc_header, 0, &c.doc_exception) + 1u;
  ++*blocks_decoded;
}

__device__ __forceinline__ void cursor_next(const ShardView& s, StreamCursor& c,
                                            unsigned long long* postings,
                                            unsigned long long* blocks_decoded) {
  if (++c.index < c.count) {
    c.doc += extract(c.doc_words, c.doc_header, c.index, &c.doc_exception) + 1u;
    ++*postings;
  } else {
    enter_block(s, c, c.block + 1, blocks_decoded);
    if (c.doc != kEndDoc) ++*postings;
  }
}

__device__ __forceinline__ void cursor_next_geq(const ShardView& s, StreamCursor& c,
                                                std::uint32_t target, unsigned long long* postings,
                                                unsigned long long* blocks_decoded,
                                                unsigned long long* blocks_skipped) {
  if (c.doc >= target) return;
  if (__ldg(s.block_last_docid + c.block) < target) {
    const std::uint64_t b = gallop_block(s, c.block + 1, c.list_end, target);
    *blocks_skipped += b - c.block - 1;
    enter_block(s, c, b, blocks_decoded);
    if (c.doc == kEndDoc) return;
    ++*postings;
  }
  while (c.doc < target) cursor_next(s, c, postings, blocks_decoded);
}

__device__ __forceinline__ std::uint32_t cursor_freq(StreamCursor& c) {
  return extract(c.freq_words, c.freq_header, c.index, &c.freq_exception) + 1u;
}

__global__ void block_max_wand_kernel(ShardView shard, BatchPointers batch) {
  extern __shared__ __align__(16) char smem[];
  const std::uint32_t row = blockIdx.x;
  const SegmentDesc seg = batch.or_segments[row];
  const QueryDesc q = batch.queries[seg.query];
  QueryOut& out = batch.out[q.slot];
  if (!(q.flags & kOrByThreads) || !or_phase_runs(q, out, batch.k)) return;
  const unsigned P = blockDim.x, tid = threadIdx.x, T = q.num_terms, k = batch.k;
  const BmwLayout L = bmw_layout(k, P);
  auto& st = *carve<TopKState>(smem, L.state);
  auto* counters = carve<unsigned long long>(smem, L.counters);
  auto* shared_theta = carve<unsigned long long>(smem, L.theta);  // bits of the best local k-th
  double* top_score = carve<double>(smem, L.top_score);
  std::uint32_t* top_doc = carve<std::uint32_t>(smem, L.top_doc);
  const TermDesc* terms = batch.terms + q.term_begin;
  unsigned long long* theta_query = batch.theta_or + seg.query;
  topk_init(st, k);
  if (tid < kNumCounters) counters[tid] = 0;
  // Other segments of the query may already hold a k-th score: a lower bound of the final one.
  if (tid == 0) {
    if (q.theta_seed > 0.0) raise_theta(theta_query, q.theta_seed);  // the host's seed
    *shared_theta = *reinterpret_cast<const volatile unsigned long long*>(theta_query);
  }
  __syncthreads();

  unsigned long long postings = 0, blocks_decoded = 0, blocks_skipped = 0, scored = 0;
  // This thread's docID range: its share of the segment.
  const std::uint64_t span = seg.doc_hi - seg.doc_lo;
  const std::uint32_t r_lo = seg.doc_lo + static_cast<std::uint32_t>(span * tid / P);
  const std::uint32_t r_hi = seg.doc_lo + static_cast<std::uint32_t>(span * (tid + 1) / P);
  StreamCursor cur[kBmwMaxTerms];
  double max_score[kBmwMaxTerms];
  unsigned order[kBmwMaxTerms];
  double local_score[kBmwMaxK];
  std::uint32_t local_doc[kBmwMaxK];
  unsigned local_n = 0;
  for (unsigned t = 0; t < T; ++t) {
    const TermDesc& term = terms[t];
    StreamCursor& c = cur[t];
    c.list_end = term.first_block + term.num_blocks;
    c.first_block = term.first_block;
    max_score[t] = __dmul_rn(term.weight, static_cast<double>(term.max_impact));
    order[t] = t;
    c.doc = kEndDoc;
    c.block = term.first_block;
    if (term.num_blocks > 0 && r_lo < r_hi) {
      // Blocks before this thread's range belong to other threads: not counted as skipped.
      const std::uint64_t b = gallop_block(shard, term.first_block, c.list_end, r_lo);
      enter_block(shard, c, b, &blocks_decoded);
      if (c.doc != kEndDoc) {
        ++postings;
        while (c.doc < r_lo) cursor_next(shard, c, &postings, &blocks_decoded);
      }
    }
  }
  const double static_bound = q.static_weight;  // PR' <= 1
  // Bounds are scaled by bound_scale (1, except in the test that weakens them).
  const double scale = batch.bound_scale;
  while (true) {
    // Threshold: own k-th, or the best k-th any thread published.
    double theta = -1.0;
    if (local_n == k) theta = local_score[k - 1];
    const double published = __longlong_as_double(static_cast<long long>(
        *reinterpret_cast<volatile unsigned long long*>(shared_theta)));
    if (published > theta) theta = published;
    // Sort lists by current docID (insertion sort; T is small).
    for (unsigned a = 1; a < T; ++a) {
      const unsigned x = order[a];
      unsigned b = a;
      while (b > 0 && cur[order[b - 1]].doc > cur[x].doc) {
        order[b] = order[b - 1];
        --b;
      }
      order[b] = x;
    }
    // Pivot: the first list at which the sum of list maxima reaches theta.
    double bound = static_bound;
    unsigned p = T;
    for (unsigned a = 0; a < T; ++a) {
      if (cur[order[a]].doc == kEndDoc) break;
      bound += max_score[order[a]];
      if (bound * scale >= theta) {
        p = a;
        break;
      }
    }
    if (p == T) break;
    const std::uint32_t pivot = cur[order[p]].doc;
    if (pivot >= r_hi) break;
    while (p + 1 < T && cur[order[p + 1]].doc == pivot) ++p;  // every list at the pivot
    // Block-max bound at the pivot, from the blocks that would hold it (shallow moves).
    double block_bound = static_bound;
    std::uint32_t next_boundary = kEndDoc;
    for (unsigned a = 0; a <= p; ++a) {
      const StreamCursor& c = cur[order[a]];
      const std::uint64_t b = gallop_block(shard, c.block, c.list_end, pivot);
      if (b < c.list_end) {
        block_bound += __dmul_rn(terms[order[a]].weight,
                                 static_cast<double>(__ldg(shard.block_max_impact + b)));
        const std::uint32_t last = __ldg(shard.block_last_docid + b);
        if (last < next_boundary) next_boundary = last;
      }
    }
    if (block_bound * scale >= theta) {
      if (cur[order[0]].doc == pivot) {
        // Score the pivot in query term order, as the reference does.
        const double norm = shard.length_norm[pivot];
        double score = 0.0;
        for (unsigned t = 0; t < T; ++t)
          if (cur[t].doc == pivot)
            score = __dadd_rn(score, contribution(terms[t].weight, cursor_freq(cur[t]), norm));
        score = __dadd_rn(score, __dmul_rn(q.static_weight,
                                           static_cast<double>(shard.pagerank[pivot])));
        ++scored;
        if (local_n < k ||
            ranks_before(score, pivot, local_score[local_n - 1], local_doc[local_n - 1])) {
          unsigned at = local_n < k ? local_n++ : k - 1;
          while (at > 0 && ranks_before(score, pivot, local_score[at - 1], local_doc[at - 1])) {
            local_score[at] = local_score[at - 1];
            local_doc[at] = local_doc[at - 1];
            --at;
          }
          local_score[at] = score;
          local_doc[at] = pivot;
          if (local_n == k)
            atomicMax(shared_theta, static_cast<unsigned long long>(
                                        __double_as_longlong(local_score[k - 1])));
        }
        for (unsigned a = 0; a <= p; ++a)
          cursor_next(shard, cur[order[a]], &postings, &blocks_decoded);
      } else {
        // Move a list that lags behind the pivot up to it.
        cursor_next_geq(shard, cur[order[0]], pivot, &postings, &blocks_decoded, &blocks_skipped);
      }
    } else {
      // No document up to the nearest block end can reach theta: jump past it.
      std::uint32_t target = next_boundary == kEndDoc ? kEndDoc : next_boundary + 1;
      if (p + 1 < T && cur[order[p + 1]].doc < target) target = cur[order[p + 1]].doc;
      if (target <= pivot) target = pivot + 1;
      cursor_next_geq(shard, cur[order[0]], target, &postings, &blocks_decoded, &blocks_skipped);
    }
  }
  atomicAdd(&counters[kPostings], postings);
  atomicAdd(&counters[kBlocksDecoded], blocks_decoded);
  atomicAdd(&counters[kBlocksSkipped], blocks_skipped);
  atomicAdd(&counters[kDocsScored], scored);
  // Merge the local top-k lists: pass j offers every thread's j-th entry.
  for (unsigned j = 0; j < k; ++j) {
    if (j < local_n) topk_offer(st, top_score, top_doc, local_score[j], local_doc[j]);
    topk_maybe_flush(st, top_score, top_doc, 2 * P);
  }
  topk_flush(st, top_score, top_doc);
  write_partial(st, top_score, top_doc, batch, row);
  if (tid == 0) {
    if (st.full) raise_theta(theta_query, st.threshold_score);
    out.or_ran = 1;
  }
  add_counters(out, counters, 0);
}
}  // namespace

std::size_t bmw_kernel_shared_bytes(unsigned k, unsigned threads) {
  return bmw_layout(k, threads).total;
}

void launch_bmw_kernel(const ShardView& shard, const BatchPointers& batch, unsigned threads,
                       cudaStream_t stream) {
  if (batch.num_or_segments == 0) return;
  const std::size_t bytes = bmw_kernel_shared_bytes(batch.k, threads);
  check_shared_budget(bytes, reinterpret_cast<const void*>(block_max_wand_kernel),
                      "block_max_wand_kernel", "lower k or --bmw-threads");
  block_max_wand_kernel<<<batch.num_or_segments, threads, bytes, stream>>>(shard, batch);
  GPUSEARCH_CUDA_CHECK_LAUNCH("block_max_wand_kernel");
}

void register_bmw_kernel(KernelRegistry& registry) {
  registry.add(reinterpret_cast<const void*>(block_max_wand_kernel));
}

}  // namespace gpusearch::gpu
