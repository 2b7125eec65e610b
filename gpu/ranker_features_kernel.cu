// Feature extraction on the GPU (paper 004, 3.3): the FSM over each candidate's token stream, one
// warp per stream segment and every candidate of a request in one pair of launches. The FSM's
// state and its features are common/ranker/document_features.hpp's, the code the CPU twin runs.
//
// Why segments: candidate lengths are log-normal, so one warp per document leaves the whole
// launch waiting on the longest few (a 191 KB stream among 10,000 candidates of 2.8 KB on
// average: 2.15 ms for the launch, all of it that one warp's walk). A stream longer than
// `segment_bytes` is cut into segments, one warp each; a token belongs to the segment holding
// its last byte. Walk 1 runs per segment with positions relative to it and leaves its state in
// global memory; a second launch gives every segment its offset (the tokens before it) and the
// state walk 2 has on entering it (each slot's last position before it), so walk 2 also runs
// per segment; the last segment of a document to finish merges walk 1's states and publishes.
// Streams of one segment run both walks in the first launch, as before.
#include "gpu/cuda_util.hpp"
#include "gpu/ranker_kernels.hpp"

namespace gpusearch::gpu {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr unsigned kWarpsPerBlock = 4;
constexpr unsigned kChunksPerStep = 8;  // 32-byte chunks a warp loads at once
// Walk 1 keeps up to this many occurrences per segment; walk 2 then reads them instead of
// decoding the stream again.
constexpr unsigned kKeptOccurrences = 256;
constexpr unsigned kMinBlocksPerSm = 8;  // 32 warps per multiprocessor: at most 64 registers
constexpr unsigned kPairs = ranker::kMaxPairTerms;
constexpr std::uint32_t kNone = ranker::kNoPosition;

// What walk 1 leaves of one segment of a long stream (positions relative to the segment).
struct SegmentState {
  std::uint32_t tokens;       // tokens ending in the segment
  std::uint32_t occurrences;  // query-term occurrences among them
  std::uint32_t bigrams, head_tf, head_terms;
  std::uint32_t first_pos, first_slot, last_pos, last_slot;  // its first and last occurrence
  std::uint32_t tf[32], first[32], last[32];
  std::uint32_t pair_rows[kPairs * kPairs];  // row j, column i: least pos(i) - last(j) inside
  std::uint32_t kept[kKeptOccurrences];      // position << 5 | slot, if occurrences fit
};

// The query-term occurrences of stream bytes [begin, end) (tokens whose last byte lies there),
// decoded by a whole warp and handed to `sink(pos, slot)` on every lane (the same arguments on
// all: the walks' state is spread over the lanes) in document order, as the CPU twin's
// walk_occurrences does one token at a time; positions count from `first_pos`. The lanes read 32
// consecutive bytes at a time (coalesced); a byte without the continuation bit ends a token. With
// kShuffle the lane decodes its token from the bytes of the lanes before it (shuffles) and the
// code carried from the chunk before; without, it re-reads up to four bytes before it (in L1:
// just read). Stops after the first chunk where `stop()` (warp-uniform) says so. Returns the
// tokens of the walked bytes.
template <bool kShuffle, typename Sink, typename Stop>
__device__ std::uint32_t warp_walk_occurrences(const std::uint8_t* __restrict__ stream,
                                               std::uint32_t begin, std::uint32_t end,
                                               std::uint32_t first_pos,
                                               const ranker::ConsideredTerms& q, unsigned lane,
                                               Sink&& sink, Stop&& stop) {
  const unsigned below = (1u << lane) - 1;
  std::uint32_t tokens_before = first_pos;
  // kShuffle: the low bits of a code that began before the chunk, and how many bits they are.
  std::uint32_t carry = 0, carry_bits = 0;
  if (kShuffle) {
    // A segment may start inside a code: its first bytes are before `begin`.
    for (std::uint32_t k = begin; k > 0 && carry_bits < 28 && (stream[k - 1] & 0x80); --k) {
      carry = carry << 7 | (stream[k - 1] & 0x7f);
      carry_bits += 7;
    }
  }
  for (std::uint32_t step = begin; step < end; step += 32 * kChunksPerStep) {
    // The step's loads first, all in flight at once (a warp walking one stream alone is bound by
    // the latency of its loads, not by bandwidth).
    std::uint8_t loaded[kChunksPerStep];
#pragma unroll
    for (unsigned c = 0; c < kChunksPerStep; ++c) {
      const std::uint32_t at = step + 32 * c + lane;
      loaded[c] = at < end ? stream[at] : 0x80;
    }
#pragma unroll
    for (unsigned c = 0; c < kChunksPerStep; ++c) {
      const std::uint32_t at = step + 32 * c + lane;
      const bool valid = at < end;
      const std::uint8_t b = loaded[c];
      const bool is_end = valid && !(b & 0x80);
      const unsigned ends = __ballot_sync(kFullMask, is_end);
      const unsigned before = ends & below;
      std::uint32_t v = 0;
      if (kShuffle) {
        // The code's bytes from the lane after the previous end up to this one (a verified
        // stream's codes are at most five bytes long), then the part carried from before.
        const unsigned first_lane = before ? 32 - __clz(before) : 0;
        const unsigned n = lane - first_lane + 1;
#pragma unroll
        for (unsigned d = 0; d < 5; ++d) {
          const std::uint32_t bd = __shfl_up_sync(kFullMask, std::uint32_t(b), d);
          if (d < n && n <= 5) v |= (bd & 0x7f) << (7 * (n - 1 - d));
        }
        if (first_lane == 0 && carry_bits > 0) v = carry_bits < 32 ? carry | v << carry_bits : carry;
        const std::uint32_t v31 = __shfl_sync(kFullMask, v, 31);
        if (ends >> 31) {
          carry = 0, carry_bits = 0;
        } else {
          carry = v31;
          carry_bits = ends ? 7 * __clz(ends) : carry_bits + 7 * 32;
        }
      }
      int slot = -1;
      std::uint32_t pos = 0;
      if (is_end) {
        if (!kShuffle) {
          std::uint32_t start = at;
          while (start > 0 && at - start < 4 && (stream[start - 1] & 0x80)) --start;
          for (std::uint32_t k = start, shift = 0; k <= at; ++k, shift += 7)
            v |= std::uint32_t(stream[k] & 0x7f) << shift;
        }
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
      if (stop()) return tokens_before - first_pos;
    }
  }
  return tokens_before - first_pos;
}

__device__ std::uint32_t warp_min(std::uint32_t v) {
  for (unsigned d = 16; d > 0; d /= 2) v = min(v, __shfl_xor_sync(kFullMask, v, d));
  return v;
}

// Walk 1 (ranker::OccurrenceWalk) with its state spread over the warp: lane j holds slot j's
// count, first and last positions; the pair distances are rows in shared memory, row j written
// by lane j only: row_j[i] is the least distance from an occurrence of i back to j's last one
// (OccurrenceWalk's pair_min{i, j} is min(row_j[i], row_i[j])). Uniform parts are on every lane.
// `head` is kHeadTokens for a walk from the stream's start and 0 for a later segment (its
// relative positions are not the document's; the first segment holds the whole head).
struct WarpOccurrenceWalk {
  std::uint32_t tf = 0, first = kNone, last = kNone;
  std::uint32_t* pair_row = nullptr;  // [kMaxPairTerms]; lanes below kMaxPairTerms
  std::uint32_t bigrams = 0, head_tf = 0, head_terms = 0, head = ranker::kHeadTokens;
  std::uint32_t prev_pos = kNone;
  int prev_slot = -1;
  unsigned lane = 0;

  __device__ void add(std::uint32_t pos, unsigned i) {
    if (i > 0 && prev_slot == int(i) - 1 && prev_pos + 1 == pos) ++bigrams;
    if (pos < head) ++head_tf, head_terms |= 1u << i;
    if (i < kPairs && lane < kPairs && lane != i && last != kNone) {
      const std::uint32_t dist = pos - last;
      if (dist < pair_row[i]) pair_row[i] = dist;
    }
    if (lane == i) {
      ++tf;
      if (first == kNone) first = pos;
      last = pos;
    }
    prev_pos = pos, prev_slot = int(i);
  }
};

// Walk 2 (ranker::WindowWalk) spread over the warp: lane j holds slot j's last position.
struct WarpWindowWalk {
  std::uint32_t last = kNone;
  unsigned seen = 0, matched = 0, nt = 0, lane = 0;  // seen: a bit per slot
  std::uint32_t window = kNone;
  __device__ bool done() const { return window <= matched; }
  __device__ void add(std::uint32_t pos, unsigned slot) {
    if (done()) return;
    seen |= 1u << slot;
    if (lane == slot) last = pos;
    if (unsigned(__popc(seen)) < matched) return;
    const std::uint32_t start = warp_min(lane < nt && last != kNone ? last : pos);
    if (pos - start + 1 < window) window = pos - start + 1;
  }
};

// Lane 0 gathers the walks' state into the CPU twin's OccurrenceWalk and publishes the features
// with its code. Not inlined: its registers stay out of the walks' budget.
__device__ __noinline__ void publish(const ranker::FeatureParams& params,
                                     const ranker::FeatureQuery& query,
                                     const ranker::ConsideredTerms& q,
                                     const ranker::FeatureDoc& doc, const std::uint32_t* tf,
                                     const std::uint32_t* first, const std::uint32_t* pair_rows,
                                     std::uint32_t bigrams, std::uint32_t head_tf,
                                     std::uint32_t head_terms, std::uint32_t window, float* out) {
  ranker::OccurrenceWalk all;
  for (unsigned s = 0; s < ranker::kMaxRankerTerms; ++s) all.tf[s] = tf[s], all.first[s] = first[s];
  for (unsigned a = 0; a < kPairs; ++a)
    for (unsigned b = 0; b < kPairs; ++b)
      all.pair_min[ranker::detail::pair_index(a, b)] =
          min(pair_rows[b * kPairs + a], pair_rows[a * kPairs + b]);
  all.bigrams = bigrams, all.head_tf = head_tf, all.head_terms = head_terms;
  ranker::publish_document_features(params, query, q, doc, all, window, out);
}

struct WarpShared {
  std::uint32_t pair_rows[kWarpsPerBlock][kPairs * kPairs];
  std::uint32_t tfs[kWarpsPerBlock][32], firsts[kWarpsPerBlock][32];
  std::uint32_t kept[kWarpsPerBlock][kKeptOccurrences];  // position << 5 | slot
};

// Launch 1: one warp per unit. A whole stream runs both walks and publishes; a segment of a long
// stream runs walk 1 and leaves its SegmentState.
template <bool kShuffle>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, kMinBlocksPerSm)
    extract_features_kernel(FeatureLaunch f) {
  __shared__ WarpShared sh;
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const std::uint32_t u = blockIdx.x * kWarpsPerBlock + warp;
  if (u >= f.num_units) return;  // warp-uniform
  const FeatureUnit unit = f.units[u];
  const ranker::FeatureDoc doc = f.docs[unit.doc];
  const ranker::FeatureQuery query = f.queries[doc.query];
  const ranker::ConsideredTerms q = ranker::considered_terms(query, f.terms, f.idf);
  const std::uint8_t* stream = f.streams + doc.stream_offset;
  const bool whole = unit.segments == 1;
  const std::uint32_t begin = unit.segment * f.segment_bytes;
  const std::uint32_t end = whole ? doc.stream_bytes : min(begin + f.segment_bytes, doc.stream_bytes);
  std::uint32_t* rows_of_warp = sh.pair_rows[warp];
  for (unsigned k = lane; k < kPairs * kPairs; k += 32) rows_of_warp[k] = kNone;
  __syncwarp();
  WarpOccurrenceWalk w;
  w.lane = lane;
  w.head = unit.segment == 0 ? ranker::kHeadTokens : 0;
  w.pair_row = rows_of_warp + (lane < kPairs ? lane : 0) * kPairs;
  SegmentState* state = whole ? nullptr : reinterpret_cast<SegmentState*>(f.segment_states) + unit.state;
  std::uint32_t* kept = whole ? sh.kept[warp] : state->kept;
  std::uint32_t occurrences = 0, first_occurrence = 0;  // warp-uniform
  bool keepable = true;                                  // every position fits 27 bits
  const std::uint32_t tokens = warp_walk_occurrences<kShuffle>(
      stream, begin, end, 0, q, lane,
      [&](std::uint32_t pos, unsigned slot) {
        if (occurrences == 0) first_occurrence = pos << 5 | slot;
        w.add(pos, slot);
        if (occurrences < kKeptOccurrences && lane == 0) kept[occurrences] = pos << 5 | slot;
        keepable = keepable && pos < (1u << 27);
        ++occurrences;
      },
      [] { return false; });
  if (!whole) {
    // Lanes write the per-slot arrays; lane 0 the rest. Launch 2 reads it.
    state->tf[lane] = w.tf, state->first[lane] = w.first, state->last[lane] = w.last;
    __syncwarp();
    for (unsigned k = lane; k < kPairs * kPairs; k += 32) state->pair_rows[k] = rows_of_warp[k];
    if (lane == 0) {
      state->tokens = tokens;
      state->occurrences = keepable ? occurrences : kKeptOccurrences + 1;
      state->bigrams = w.bigrams, state->head_tf = w.head_tf, state->head_terms = w.head_terms;
      state->first_pos = first_occurrence >> 5, state->first_slot = first_occurrence & 31;
      state->last_pos = w.prev_pos, state->last_slot = std::uint32_t(w.prev_slot);
    }
    return;
  }
  const unsigned matched = __popc(__ballot_sync(kFullMask, lane < q.count && w.tf != 0));
  std::uint32_t window = matched == 0 ? kNone : 1;
  if (matched >= 2) {
    WarpWindowWalk ww;
    ww.lane = lane, ww.matched = matched, ww.nt = q.count;
    if (keepable && occurrences <= kKeptOccurrences) {
      __syncwarp();
      for (std::uint32_t k = 0; k < occurrences && !ww.done(); ++k)
        ww.add(kept[k] >> 5, kept[k] & 31);
    } else {
      warp_walk_occurrences<kShuffle>(
          stream, 0, doc.stream_bytes, 0, q, lane,
          [&](std::uint32_t pos, unsigned slot) { ww.add(pos, slot); }, [&] { return ww.done(); });
    }
    window = ww.window;
  }
  sh.tfs[warp][lane] = w.tf, sh.firsts[warp][lane] = w.first;
  __syncwarp();
  if (lane == 0)
    publish(f.params, query, q, doc, sh.tfs[warp], sh.firsts[warp], rows_of_warp, w.bigrams,
            w.head_tf, w.head_terms, window, f.rows + std::size_t(unit.doc) * ranker::kFeatureStride);
}

// Launch 2: one warp per segment of a long stream. Walk 2 over the segment, entered with the
// state the serial walk would have there (each slot's last position in the segments before);
// then the document's last segment to finish merges walk 1's states in order and publishes.
template <bool kShuffle>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    finish_segmented_kernel(FeatureLaunch f) {
  __shared__ WarpShared sh;
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const std::uint32_t u = blockIdx.x * kWarpsPerBlock + warp;
  if (u >= f.num_segmented_units) return;  // warp-uniform
  const FeatureUnit unit = f.segmented_units[u];
  const ranker::FeatureDoc doc = f.docs[unit.doc];
  const ranker::FeatureQuery query = f.queries[doc.query];
  const ranker::ConsideredTerms q = ranker::considered_terms(query, f.terms, f.idf);
  const std::uint32_t first_state = unit.state - unit.segment;
  const SegmentState* states = reinterpret_cast<const SegmentState*>(f.segment_states) + first_state;
  // Zeroed before the launch: segments done, and the complement of the least window (so that
  // zero means none and atomicMax takes the least).
  std::uint32_t* done_count = f.segment_sync + 2 * std::size_t(first_state);
  std::uint32_t* doc_window = done_count + 1;

  // The tokens before this segment, each slot's last position before it and its count in all.
  std::uint32_t offset = 0, last_before = kNone, tf_all = 0;
  for (std::uint32_t s = 0; s < unit.segments; ++s) {
    const std::uint32_t tf = states[s].tf[lane];
    if (s < unit.segment && tf != 0) last_before = offset + states[s].last[lane];
    tf_all += tf;
    if (s < unit.segment) offset += states[s].tokens;
  }
  const unsigned matched = __popc(__ballot_sync(kFullMask, lane < q.count && tf_all != 0));
  if (matched >= 2) {
    WarpWindowWalk ww;
    ww.lane = lane, ww.matched = matched, ww.nt = q.count;
    ww.last = last_before;
    ww.seen = __ballot_sync(kFullMask, last_before != kNone);
    const SegmentState& mine = states[unit.segment];
    const std::uint32_t occurrences = mine.occurrences;
    if (occurrences <= kKeptOccurrences) {
      for (std::uint32_t k = 0; k < occurrences && !ww.done(); ++k) {
        const std::uint32_t o = mine.kept[k];
        ww.add(offset + (o >> 5), o & 31);
      }
    } else {
      const std::uint32_t begin = unit.segment * f.segment_bytes;
      warp_walk_occurrences<kShuffle>(
          f.streams + doc.stream_offset, begin, min(begin + f.segment_bytes, doc.stream_bytes),
          offset, q, lane, [&](std::uint32_t pos, unsigned slot) { ww.add(pos, slot); },
          [&] { return ww.done(); });
    }
    if (lane == 0 && ww.window != kNone) atomicMax(doc_window, ~ww.window);
  }
  // The last segment to get here merges (the others' states and windows are visible to it).
  __threadfence();
  unsigned last_one = 0;
  if (lane == 0) last_one = atomicAdd(done_count, 1u) == unit.segments - 1;
  if (!__shfl_sync(kFullMask, last_one, 0)) return;
  __threadfence();

  // Merge walk 1 in segment order: counts add; first positions come from the first segment
  // holding the slot; pair distances are the segments' own, or from a slot's first occurrence in
  // a segment back to the other slot's last one before it; a bigram may straddle two segments.
  std::uint32_t* rows = sh.pair_rows[warp];  // row j (lane j) column i
  std::uint32_t row[kPairs];
#pragma unroll
  for (unsigned i = 0; i < kPairs; ++i) row[i] = kNone;
  std::uint32_t tf = 0, first = kNone, last = kNone, bigrams = 0;
  std::uint32_t prev_pos = kNone, prev_slot = kNone;
  offset = 0;
  for (std::uint32_t s = 0; s < unit.segments; ++s) {
    const SegmentState& st = states[s];
    const std::uint32_t tf_s = st.tf[lane];
    if (lane < kPairs) {
#pragma unroll
      for (unsigned i = 0; i < kPairs; ++i) {
        if (i == lane) continue;
        row[i] = min(row[i], st.pair_rows[lane * kPairs + i]);
        if (last != kNone && st.tf[i] != 0) row[i] = min(row[i], offset + st.first[i] - last);
      }
    }
    if (tf_s != 0) {
      if (tf == 0) first = offset + st.first[lane];
      last = offset + st.last[lane];
      tf += tf_s;
    }
    bigrams += st.bigrams;
    if (st.occurrences != 0) {
      const std::uint32_t p = offset + st.first_pos, i = st.first_slot;
      if (i > 0 && prev_slot == i - 1 && prev_pos + 1 == p) ++bigrams;
      prev_pos = offset + st.last_pos, prev_slot = st.last_slot;
    }
    offset += st.tokens;
  }
  if (lane < kPairs)
#pragma unroll
    for (unsigned i = 0; i < kPairs; ++i) rows[lane * kPairs + i] = row[i];
  sh.tfs[warp][lane] = tf, sh.firsts[warp][lane] = first;
  __syncwarp();
  const std::uint32_t window =
      matched == 0 ? kNone : matched == 1 ? 1u : ~*reinterpret_cast<volatile std::uint32_t*>(doc_window);
  if (lane == 0)
    publish(f.params, query, q, doc, sh.tfs[warp], sh.firsts[warp], rows, bigrams,
            states[0].head_tf, states[0].head_terms, window,
            f.rows + std::size_t(unit.doc) * ranker::kFeatureStride);
}

}  // namespace

std::size_t feature_segment_state_bytes() {
  return sizeof(SegmentState);
}

void launch_extract_features(const FeatureLaunch& f, bool shuffle_decode, cudaStream_t stream) {
  if (f.num_units == 0) return;
  const unsigned blocks = (f.num_units + kWarpsPerBlock - 1) / kWarpsPerBlock;
  // Small blocks (4 warps) spread a request of a few hundred documents over many multiprocessors.
  if (shuffle_decode)
    extract_features_kernel<true><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(f);
  else
    extract_features_kernel<false><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(f);
  GPUSEARCH_CUDA_CHECK_LAUNCH("extract_features_kernel");
  if (f.num_segmented_units == 0) return;
  const unsigned blocks2 = (f.num_segmented_units + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (shuffle_decode)
    finish_segmented_kernel<true><<<blocks2, kWarpsPerBlock * 32, 0, stream>>>(f);
  else
    finish_segmented_kernel<false><<<blocks2, kWarpsPerBlock * 32, 0, stream>>>(f);
  GPUSEARCH_CUDA_CHECK_LAUNCH("finish_segmented_kernel");
}

}  // namespace gpusearch::gpu
