// Feature extraction on the GPU (paper 004, 3.3): the FSM over each candidate's token stream, one
// warp per document (the stream decoded 32 bytes at a time) and every candidate of a request in
// one launch. The FSM's state and its features are common/ranker/document_features.hpp's, the
// code the CPU twin runs.
#include "gpu/cuda_util.hpp"
#include "gpu/ranker_kernels.hpp"

namespace gpusearch::gpu {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr unsigned kWarpsPerBlock = 4;
constexpr unsigned kChunksPerStep = 8;  // 32-byte chunks a warp loads at once
// Walk 1 keeps up to this many occurrences per warp in shared memory; walk 2 then reads them
// instead of decoding the stream again.
constexpr unsigned kKeptOccurrences = 256;
constexpr unsigned kMinBlocksPerSm = 8;  // 32 warps per multiprocessor: at most 64 registers

// The query-term occurrences of one document's vbyte stream, decoded by a whole warp and handed
// to `sink(pos, slot)` on every lane (the same arguments on all: the walks' state is spread over
// the lanes) in document order, as the CPU twin's walk_occurrences does one token at a time. The
// lanes read 32 consecutive bytes at a time (coalesced); a byte without the continuation bit ends
// a token, which that lane decodes from the bytes of the lanes before it (shuffles) and the open
// code carried from the chunk before; a token's position is the tokens before its chunk plus
// the ends before its lane. Stops after the first
// chunk where `stop()` (warp-uniform) says so: the walk would ignore the rest.
template <typename Sink, typename Stop>
__device__ void warp_walk_occurrences(const std::uint8_t* __restrict__ stream, std::uint32_t bytes,
                                      const ranker::ConsideredTerms& q, unsigned lane, Sink&& sink,
                                      Stop&& stop) {
  const unsigned below = (1u << lane) - 1;
  std::uint32_t tokens_before = 0;
  // The low bits of a code that began in an earlier chunk, and how many bits they are.
  std::uint32_t carry = 0, carry_bits = 0;
  for (std::uint32_t step = 0; step < bytes; step += 32 * kChunksPerStep) {
    // The step's loads first, all in flight at once (a warp walking one stream alone is bound by
    // the latency of its loads, not by bandwidth).
    std::uint8_t loaded[kChunksPerStep];
#pragma unroll
    for (unsigned c = 0; c < kChunksPerStep; ++c) {
      const std::uint32_t at = step + 32 * c + lane;
      loaded[c] = at < bytes ? stream[at] : 0x80;
    }
#pragma unroll
    for (unsigned c = 0; c < kChunksPerStep; ++c) {
      const std::uint32_t at = step + 32 * c + lane;
      const bool valid = at < bytes;
      const std::uint8_t b = loaded[c];
      const bool is_end = valid && !(b & 0x80);
      const unsigned ends = __ballot_sync(kFullMask, is_end);
      // Every lane: the value of the code bytes from the lane after the previous end up to its
      // own, gathered by shuffles (a verified stream's codes are at most five bytes long).
      const unsigned before = ends & below;
      const unsigned first_lane = before ? 32 - __clz(before) : 0;
      const unsigned n = lane - first_lane + 1;
      std::uint32_t v = 0;
#pragma unroll
      for (unsigned d = 0; d < 5; ++d) {
        const std::uint32_t bd = __shfl_up_sync(kFullMask, std::uint32_t(b), d);
        if (d < n && n <= 5) v |= (bd & 0x7f) << (7 * (n - 1 - d));
      }
      if (first_lane == 0 && carry_bits > 0) v = carry_bits < 32 ? carry | v << carry_bits : carry;
      // A code still open at lane 31 carries into the next chunk.
      const std::uint32_t v31 = __shfl_sync(kFullMask, v, 31);
      if (ends >> 31) {
        carry = 0, carry_bits = 0;
      } else {
        carry = v31;
        carry_bits = ends ? 7 * __clz(ends) : carry_bits + 7 * 32;
      }
      int slot = -1;
      std::uint32_t pos = 0;
      if (is_end) {
        pos = tokens_before + __popc(before);
        slot = q.slot(v);
      }
      unsigned matches = __ballot_sync(kFullMask, slot >= 0);
      while (matches) {
        const int src = __ffs(matches) - 1;
        sink(__shfl_sync(kFullMask, pos, src), unsigned(__shfl_sync(kFullMask, slot, src)));
        matches &= matches - 1;
      }
      tokens_before += __popc(ends);
      if (stop()) return;
    }
  }
}

__device__ std::uint32_t warp_min(std::uint32_t v) {
  for (unsigned d = 16; d > 0; d /= 2) v = min(v, __shfl_xor_sync(kFullMask, v, d));
  return v;
}

// Walk 1 (ranker::OccurrenceWalk) with its state spread over the warp: lane j holds slot j's
// count, first and last positions; the pair distances are rows in shared memory, row j written
// by lane j only: row_j[i] is the least distance from an occurrence of i back to j's last one
// (OccurrenceWalk's pair_min{i, j} is min(row_j[i], row_i[j])). Uniform parts are on every lane.
struct WarpOccurrenceWalk {
  std::uint32_t tf = 0, first = ranker::kNoPosition, last = ranker::kNoPosition;
  std::uint32_t* pair_row = nullptr;  // [kMaxPairTerms]; lanes below kMaxPairTerms
  std::uint32_t bigrams = 0, head_tf = 0, head_terms = 0;
  std::uint32_t prev_pos = ranker::kNoPosition;
  int prev_slot = -1;
  unsigned lane = 0;

  __device__ void add(std::uint32_t pos, unsigned i) {
    if (i > 0 && prev_slot == int(i) - 1 && prev_pos + 1 == pos) ++bigrams;
    if (pos < ranker::kHeadTokens) ++head_tf, head_terms |= 1u << i;
    if (i < ranker::kMaxPairTerms) {
      if (lane < ranker::kMaxPairTerms && lane != i && last != ranker::kNoPosition) {
        const std::uint32_t dist = pos - last;
        if (dist < pair_row[i]) pair_row[i] = dist;
      }
      if (lane == i) last = pos;
    }
    if (lane == i) {
      ++tf;
      if (first == ranker::kNoPosition) first = pos;
    }
    prev_pos = pos, prev_slot = int(i);
  }
};

// Walk 2 (ranker::WindowWalk) spread over the warp: lane j holds slot j's last position.
struct WarpWindowWalk {
  std::uint32_t last = ranker::kNoPosition;
  unsigned seen = 0, matched = 0, nt = 0, lane = 0;  // seen: a bit per slot
  std::uint32_t window = ranker::kNoPosition;
  __device__ bool done() const { return window <= matched; }
  __device__ void add(std::uint32_t pos, unsigned slot) {
    if (done()) return;
    seen |= 1u << slot;
    if (lane == slot) last = pos;
    if (unsigned(__popc(seen)) < matched) return;
    const std::uint32_t start = warp_min(lane < nt && last != ranker::kNoPosition ? last : pos);
    if (pos - start + 1 < window) window = pos - start + 1;
  }
};

// One warp per candidate document, every candidate of a request in one launch; lane 0 publishes.
// Lane 0 gathers the walks' state into the CPU twin's OccurrenceWalk and publishes the features
// with its code. Not inlined: its registers stay out of the walks' budget.
__device__ __noinline__ void publish(const ranker::FeatureParams& params,
                                     const ranker::FeatureQuery& query,
                                     const ranker::ConsideredTerms& q,
                                     const ranker::FeatureDoc& doc, const std::uint32_t* tf,
                                     const std::uint32_t* first, const std::uint32_t* pair_rows,
                                     std::uint32_t bigrams, std::uint32_t head_tf,
                                     std::uint32_t head_terms, std::uint32_t window, float* out) {
  constexpr unsigned kPairs = ranker::kMaxPairTerms;
  ranker::OccurrenceWalk all;
  for (unsigned s = 0; s < ranker::kMaxRankerTerms; ++s) all.tf[s] = tf[s], all.first[s] = first[s];
  for (unsigned a = 0; a < kPairs; ++a)
    for (unsigned b = 0; b < kPairs; ++b)
      all.pair_min[ranker::detail::pair_index(a, b)] =
          min(pair_rows[b * kPairs + a], pair_rows[a * kPairs + b]);
  all.bigrams = bigrams, all.head_tf = head_tf, all.head_terms = head_terms;
  ranker::publish_document_features(params, query, q, doc, all, window, out);
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32, kMinBlocksPerSm)
    extract_features_kernel(ranker::FeatureParams params,
                            const ranker::FeatureQuery* __restrict__ queries,
                            const std::uint32_t* __restrict__ terms, const float* __restrict__ idf,
                            const ranker::FeatureDoc* __restrict__ docs, std::uint32_t num_docs,
                            const std::uint8_t* __restrict__ streams, float* __restrict__ rows) {
  constexpr unsigned kPairs = ranker::kMaxPairTerms;
  __shared__ std::uint32_t pair_rows[kWarpsPerBlock][kPairs * kPairs];
  __shared__ std::uint32_t tfs[kWarpsPerBlock][32], firsts[kWarpsPerBlock][32];
  __shared__ std::uint32_t kept[kWarpsPerBlock][kKeptOccurrences];  // position << 5 | slot
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const std::uint32_t i = blockIdx.x * kWarpsPerBlock + warp;
  if (i >= num_docs) return;  // warp-uniform
  const ranker::FeatureDoc doc = docs[i];
  const ranker::FeatureQuery query = queries[doc.query];
  const ranker::ConsideredTerms q = ranker::considered_terms(query, terms, idf);
  const std::uint8_t* stream = streams + doc.stream_offset;
  std::uint32_t* rows_of_warp = pair_rows[warp];
  std::uint32_t* tf_of_warp = tfs[warp];
  std::uint32_t* first_of_warp = firsts[warp];
  for (unsigned k = lane; k < kPairs * kPairs; k += 32) rows_of_warp[k] = ranker::kNoPosition;
  __syncwarp();
  WarpOccurrenceWalk w;
  w.lane = lane;
  w.pair_row = rows_of_warp + (lane < kPairs ? lane : 0) * kPairs;
  std::uint32_t* kept_of_warp = kept[warp];
  std::uint32_t occurrences = 0;  // warp-uniform
  bool keepable = true;           // every position fits 27 bits
  warp_walk_occurrences(
      stream, doc.stream_bytes, q, lane,
      [&](std::uint32_t pos, unsigned slot) {
        w.add(pos, slot);
        if (occurrences < kKeptOccurrences && lane == 0)
          kept_of_warp[occurrences] = pos << 5 | slot;
        keepable = keepable && pos < (1u << 27);
        ++occurrences;
      },
      [] { return false; });
  const unsigned matched = __popc(__ballot_sync(kFullMask, lane < q.count && w.tf != 0));
  std::uint32_t window = matched == 0 ? ranker::kNoPosition : 1;
  if (matched >= 2) {
    WarpWindowWalk ww;
    ww.lane = lane, ww.matched = matched, ww.nt = q.count;
    if (keepable && occurrences <= kKeptOccurrences) {
      __syncwarp();
      for (std::uint32_t k = 0; k < occurrences && !ww.done(); ++k)
        ww.add(kept_of_warp[k] >> 5, kept_of_warp[k] & 31);
    } else {
      warp_walk_occurrences(
          stream, doc.stream_bytes, q, lane,
          [&](std::uint32_t pos, unsigned slot) { ww.add(pos, slot); }, [&] { return ww.done(); });
    }
    window = ww.window;
  }
  tf_of_warp[lane] = w.tf, first_of_warp[lane] = w.first;
  __syncwarp();
  if (lane == 0)
    publish(params, query, q, doc, tf_of_warp, first_of_warp, rows_of_warp, w.bigrams, w.head_tf,
            w.head_terms, window, rows + std::size_t(i) * ranker::kFeatureStride);
}

}  // namespace

void launch_extract_features(const ranker::FeatureParams& params,
                             const ranker::FeatureQuery* queries, const std::uint32_t* terms,
                             const float* idf, const ranker::FeatureDoc* docs,
                             std::uint32_t num_docs, const std::uint8_t* streams, float* rows,
                             cudaStream_t stream) {
  if (num_docs == 0) return;
  // Small blocks (4 warps) spread a request of a few hundred documents over many multiprocessors.
  const unsigned blocks = (num_docs + kWarpsPerBlock - 1) / kWarpsPerBlock;
  extract_features_kernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
      params, queries, terms, idf, docs, num_docs, streams, rows);
  GPUSEARCH_CUDA_CHECK_LAUNCH("extract_features_kernel");
}

}  // namespace gpusearch::gpu
