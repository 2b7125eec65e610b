// Feature extraction for one (query, document) pair (paper 004, 2.1.4 and 3.3), written once for
// the CPU twin and the GPU kernel (GPUSEARCH_HOST_DEVICE): the same arithmetic in the same order,
// so the two agree to the last bit except where a math library function (none here) differs.
//
// The document arrives as its forward-index stream (vbyte term IDs in document order). The
// finite-state machine of Figure 2.5 walks it token by token: a token that is a query term
// updates that term's state (count, first position, last position, least distance to the other
// terms' last positions, bigram with the previous token); the document's features are published
// at the end. The minimal window needs the set of matched terms, so it takes a second walk.
#pragma once

#include <cstdint>
#include <limits>

#include "common/host_device.hpp"
#include "common/ranker/feature_catalog.hpp"

namespace gpusearch::ranker {

// One query of a ranking batch: its terms are terms[first_term, first_term + num_terms) and their
// idf the same range of idf[]. The host truncates to kMaxRankerTerms.
struct FeatureQuery {
  std::uint32_t first_term = 0;
  std::uint32_t num_terms = 0;
  float idf_sum = 0;  // over the considered terms
  float alpha = 0;    // bm25-pr's alpha
};

// One candidate document: its stream is bytes [stream_offset, stream_offset + stream_bytes) of
// the batch's stream buffer.
struct FeatureDoc {
  std::uint64_t stream_offset = 0;
  std::uint32_t stream_bytes = 0;
  std::uint32_t query = 0;  // its query's index in the batch
  std::uint32_t doc_length = 0;
  float pagerank = 0;
  float gs = 0;
  std::uint32_t reserved = 0;
};
static_assert(sizeof(FeatureDoc) == 32);

struct FeatureParams {
  float k1 = 1.2f;
  float b = 0.75f;
  float avg_doc_length = 1;
};

GPUSEARCH_HOST_DEVICE inline float missing_feature() {
#if defined(__CUDA_ARCH__)
  return __int_as_float(0x7fc00000);
#else
  return std::numeric_limits<float>::quiet_NaN();
#endif
}
GPUSEARCH_HOST_DEVICE inline bool is_missing(float x) {
  return x != x;
}

namespace detail {

// One vbyte integer from [p, end) (common/forward_index.hpp's encoding); false at the end or on a
// truncated or over-long code, which ends the walk (a stream that open() verified never does).
GPUSEARCH_HOST_DEVICE inline bool next_token(const std::uint8_t*& p, const std::uint8_t* end,
                                             std::uint32_t& v) {
  std::uint32_t x = 0;
  for (unsigned shift = 0; shift < 35 && p < end; shift += 7) {
    const std::uint8_t b = *p++;
    x |= std::uint32_t(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      v = x;
      return true;
    }
  }
  return false;
}

// The query slot of token t, or -1: a 64-bit membership filter first (most tokens are not query
// terms), then a scan of at most kMaxRankerTerms terms.
GPUSEARCH_HOST_DEVICE inline int query_slot(std::uint32_t t, std::uint64_t filter,
                                            const std::uint32_t* terms, unsigned num_terms) {
  if (!((filter >> (t & 63)) & 1)) return -1;
  for (unsigned i = 0; i < num_terms; ++i)
    if (terms[i] == t) return int(i);
  return -1;
}

GPUSEARCH_HOST_DEVICE inline unsigned pair_index(unsigned i, unsigned j) {
  return i < j ? i * kMaxPairTerms + j : j * kMaxPairTerms + i;
}

}  // namespace detail

inline constexpr std::uint32_t kNoPosition = 0xffffffffu;

// The query's considered terms (the first kMaxRankerTerms), their idf, and a 64-bit membership
// filter over the term IDs.
struct ConsideredTerms {
  const std::uint32_t* terms = nullptr;
  const float* idf = nullptr;
  unsigned count = 0;
  std::uint64_t filter = 0;
  // The slot of term t, or -1.
  GPUSEARCH_HOST_DEVICE int slot(std::uint32_t t) const {
    return detail::query_slot(t, filter, terms, count);
  }
};
GPUSEARCH_HOST_DEVICE inline ConsideredTerms considered_terms(const FeatureQuery& q,
                                                              const std::uint32_t* all_terms,
                                                              const float* all_idf) {
  ConsideredTerms c;
  c.count = q.num_terms < kMaxRankerTerms ? q.num_terms : kMaxRankerTerms;
  c.terms = all_terms + q.first_term;
  c.idf = all_idf + q.first_term;
  for (unsigned i = 0; i < c.count; ++i) c.filter |= std::uint64_t(1) << (c.terms[i] & 63);
  return c;
}

// Walk 1 of the FSM, fed the document's query-term occurrences (position, slot) in document
// order: per-term counts, first positions, pairwise least distances, bigrams, the head. The CPU
// walks every token and feeds the occurrences; the GPU decodes a stream with a whole warp and
// feeds them from one lane. Same state, same order: the same features.
struct OccurrenceWalk {
  std::uint32_t tf[kMaxRankerTerms], first[kMaxRankerTerms];
  std::uint32_t last_pair[kMaxPairTerms], pair_min[kMaxPairTerms * kMaxPairTerms];
  std::uint32_t bigrams = 0, head_tf = 0, head_terms = 0;  // head_terms: a bit per slot
  std::uint32_t prev_pos = kNoPosition;                    // the previous occurrence
  int prev_slot = -1;
  static_assert(kMaxRankerTerms <= 32);

  GPUSEARCH_HOST_DEVICE void reset() {
    for (unsigned i = 0; i < kMaxRankerTerms; ++i) tf[i] = 0, first[i] = kNoPosition;
    for (unsigned i = 0; i < kMaxPairTerms; ++i) last_pair[i] = kNoPosition;
    for (unsigned i = 0; i < kMaxPairTerms * kMaxPairTerms; ++i) pair_min[i] = kNoPosition;
    bigrams = head_tf = head_terms = 0;
    prev_pos = kNoPosition, prev_slot = -1;
  }
  GPUSEARCH_HOST_DEVICE void add(std::uint32_t pos, unsigned i) {
    ++tf[i];
    if (first[i] == kNoPosition) first[i] = pos;
    // A bigram: the token just before is the previous query term's occurrence.
    if (i > 0 && prev_slot == int(i) - 1 && prev_pos + 1 == pos) ++bigrams;
    if (pos < kHeadTokens) ++head_tf, head_terms |= 1u << i;
    if (i < kMaxPairTerms) {
      // The least distance between occurrences of terms i and j is between an occurrence and
      // the other term's last occurrence before it, seen from one side or the other.
      for (unsigned j = 0; j < kMaxPairTerms; ++j) {
        if (j == i || last_pair[j] == kNoPosition) continue;
        const std::uint32_t dist = pos - last_pair[j];
        std::uint32_t& m = pair_min[detail::pair_index(i, j)];
        if (dist < m) m = dist;
      }
      last_pair[i] = pos;
    }
    prev_pos = pos, prev_slot = int(i);
  }
  GPUSEARCH_HOST_DEVICE unsigned matched(unsigned nt) const {
    unsigned m = 0;
    for (unsigned i = 0; i < nt; ++i) m += tf[i] != 0;
    return m;
  }
};

// Walk 2 (two or more matched terms): the shortest span holding every matched term ends at an
// occurrence and starts at the earliest of the other terms' last occurrences before it. Done
// once the span is as short as it can be (one token per matched term).
struct WindowWalk {
  std::uint32_t last[kMaxRankerTerms];
  unsigned seen = 0, matched = 0, nt = 0;
  std::uint32_t window = kNoPosition;

  GPUSEARCH_HOST_DEVICE void reset(unsigned matched_terms, unsigned considered) {
    for (unsigned i = 0; i < kMaxRankerTerms; ++i) last[i] = kNoPosition;
    seen = 0, matched = matched_terms, nt = considered, window = kNoPosition;
  }
  GPUSEARCH_HOST_DEVICE bool done() const { return window <= matched; }
  GPUSEARCH_HOST_DEVICE void add(std::uint32_t pos, unsigned slot) {
    if (done()) return;
    if (last[slot] == kNoPosition) ++seen;
    last[slot] = pos;
    if (seen < matched) return;
    std::uint32_t start = pos;
    for (unsigned i = 0; i < nt; ++i)
      if (last[i] != kNoPosition && last[i] < start) start = last[i];
    if (pos - start + 1 < window) window = pos - start + 1;
  }
};

// The query-term occurrences of a stream, in order, to `sink(pos, slot)`; stops early when
// `stop()` says so.
template <typename Sink, typename Stop>
GPUSEARCH_HOST_DEVICE void walk_occurrences(const std::uint8_t* stream, std::uint32_t bytes,
                                            const ConsideredTerms& q, Sink&& sink, Stop&& stop) {
  const std::uint8_t* s = stream;
  const std::uint8_t* const end = stream + bytes;
  std::uint32_t t = 0;
  for (std::uint32_t pos = 0; !stop() && detail::next_token(s, end, t); ++pos) {
    const int slot = q.slot(t);
    if (slot >= 0) sink(pos, unsigned(slot));
  }
}

// The document's features from the two walks.
GPUSEARCH_HOST_DEVICE inline void publish_document_features(const FeatureParams& p,
                                                            const FeatureQuery& q,
                                                            const ConsideredTerms& c,
                                                            const FeatureDoc& d,
                                                            const OccurrenceWalk& w,
                                                            std::uint32_t window, float* out) {
  constexpr std::uint32_t kNone = kNoPosition;
  const unsigned nt = c.count;
  const float* idf = c.idf;
  const std::uint32_t* tf = w.tf;
  const std::uint32_t* first = w.first;
  const std::uint32_t bigrams = w.bigrams, head_tf = w.head_tf, head_terms = w.head_terms;
  const float len = float(d.doc_length);
  const float norm =
      p.k1 * (1.0f - p.b + p.b * len / (p.avg_doc_length > 0 ? p.avg_doc_length : 1.0f));
  unsigned matched = 0;
  float tf_sum = 0, tf_max = 0, tf_min = 0, tfidf_sum = 0, tfidf_max = 0;
  float idf_m_sum = 0, idf_m_max = 0, idf_m_min = 0, bm25 = 0, bm25_pr_terms = 0;
  float bm25_t_max = 0, bm25_t_min = 0, first_sum = 0;
  std::uint32_t first_any = kNone;
  for (unsigned i = 0; i < nt; ++i) {
    const float f = float(tf[i]);
    tf_sum += f;
    if (i == 0 || f > tf_max) tf_max = f;
    if (i == 0 || f < tf_min) tf_min = f;
    const float ti = f * idf[i];
    tfidf_sum += ti;
    if (i == 0 || ti > tfidf_max) tfidf_max = ti;
    if (tf[i] == 0) continue;
    const float impact = f / (f + norm);
    const float term_bm25 = idf[i] * impact * (p.k1 + 1.0f);
    bm25 += term_bm25;
    if (q.idf_sum > 0) bm25_pr_terms += idf[i] / q.idf_sum * impact;
    if (matched == 0 || idf[i] > idf_m_max) idf_m_max = idf[i];
    if (matched == 0 || idf[i] < idf_m_min) idf_m_min = idf[i];
    if (matched == 0 || term_bm25 > bm25_t_max) bm25_t_max = term_bm25;
    if (matched == 0 || term_bm25 < bm25_t_min) bm25_t_min = term_bm25;
    idf_m_sum += idf[i];
    first_sum += float(first[i]);
    if (first[i] < first_any) first_any = first[i];
    ++matched;
  }
  unsigned head_matched = 0;
  float head_idf = 0;
  for (unsigned i = 0; i < nt; ++i)
    if ((head_terms >> i) & 1u) ++head_matched, head_idf += idf[i];
  unsigned pairs = 0;
  std::uint32_t pair_least = kNone;
  float pair_sum = 0;
  const unsigned np = nt < kMaxPairTerms ? nt : kMaxPairTerms;
  for (unsigned i = 0; i < np; ++i)
    for (unsigned j = i + 1; j < np; ++j) {
      if (tf[i] == 0 || tf[j] == 0) continue;
      const std::uint32_t m = w.pair_min[detail::pair_index(i, j)];
      if (m < pair_least) pair_least = m;
      pair_sum += float(m);
      ++pairs;
    }

  const float missing = missing_feature();
  out[std::uint32_t(Feature::kDocLength)] = len;
  out[std::uint32_t(Feature::kPagerank)] = d.pagerank;
  out[std::uint32_t(Feature::kGlobalScore)] = d.gs;
  out[std::uint32_t(Feature::kQueryTerms)] = float(nt);
  out[std::uint32_t(Feature::kQueryIdfSum)] = q.idf_sum;
  out[std::uint32_t(Feature::kBm25)] = bm25;
  out[std::uint32_t(Feature::kBm25Pr)] = q.alpha * d.pagerank + (1.0f - q.alpha) * bm25_pr_terms;
  out[std::uint32_t(Feature::kMatchedTerms)] = float(matched);
  out[std::uint32_t(Feature::kMatchedFraction)] = nt > 0 ? float(matched) / float(nt) : 0.0f;
  out[std::uint32_t(Feature::kTfSum)] = tf_sum;
  out[std::uint32_t(Feature::kTfMax)] = tf_max;
  out[std::uint32_t(Feature::kTfMin)] = tf_min;
  out[std::uint32_t(Feature::kTfMean)] = nt > 0 ? tf_sum / float(nt) : 0.0f;
  out[std::uint32_t(Feature::kTfNormSum)] = d.doc_length > 0 ? tf_sum / len : 0.0f;
  out[std::uint32_t(Feature::kIdfMatchedSum)] = idf_m_sum;
  out[std::uint32_t(Feature::kIdfMatchedMax)] = idf_m_max;
  out[std::uint32_t(Feature::kIdfMatchedMin)] = idf_m_min;
  out[std::uint32_t(Feature::kTfIdfSum)] = tfidf_sum;
  out[std::uint32_t(Feature::kTfIdfMax)] = tfidf_max;
  out[std::uint32_t(Feature::kBm25TermMax)] = bm25_t_max;
  out[std::uint32_t(Feature::kBm25TermMin)] = bm25_t_min;
  out[std::uint32_t(Feature::kFirstOccurrence)] = matched > 0 ? float(first_any) : missing;
  out[std::uint32_t(Feature::kFirstOccurrenceFraction)] =
      matched > 0 ? float(first_any) / len : missing;
  out[std::uint32_t(Feature::kFirstOccurrenceMean)] =
      matched > 0 ? first_sum / float(matched) : missing;
  out[std::uint32_t(Feature::kMinWindow)] = window == kNone ? missing : float(window);
  out[std::uint32_t(Feature::kWindowDensity)] =
      window == kNone ? missing : float(matched) / float(window);
  out[std::uint32_t(Feature::kPairDistanceMin)] = pairs > 0 ? float(pair_least) : missing;
  out[std::uint32_t(Feature::kPairDistanceMean)] = pairs > 0 ? pair_sum / float(pairs) : missing;
  out[std::uint32_t(Feature::kOrderedBigrams)] = float(bigrams);
  out[std::uint32_t(Feature::kHeadTfSum)] = float(head_tf);
  out[std::uint32_t(Feature::kHeadMatchedFraction)] =
      nt > 0 ? float(head_matched) / float(nt) : 0.0f;
  out[std::uint32_t(Feature::kHeadIdfFraction)] = q.idf_sum > 0 ? head_idf / q.idf_sum : 0.0f;
  for (std::uint32_t f = kNumFeatures; f < kFeatureStride; ++f) out[f] = 0;
}

// Fills out[0, kFeatureStride) for document d of query q (catalog order, padding as 0): the
// CPU twin, one token after the other.
GPUSEARCH_HOST_DEVICE inline void extract_document_features(
    const FeatureParams& p, const FeatureQuery& q, const std::uint32_t* all_terms,
    const float* all_idf, const FeatureDoc& d, const std::uint8_t* stream, float* out) {
  const ConsideredTerms c = considered_terms(q, all_terms, all_idf);
  OccurrenceWalk w;
  w.reset();
  walk_occurrences(
      stream, d.stream_bytes, c, [&](std::uint32_t pos, unsigned slot) { w.add(pos, slot); },
      [] { return false; });
  const unsigned matched = w.matched(c.count);
  std::uint32_t window = matched == 0 ? kNoPosition : 1;
  if (matched >= 2) {
    WindowWalk ww;
    ww.reset(matched, c.count);
    walk_occurrences(
        stream, d.stream_bytes, c, [&](std::uint32_t pos, unsigned slot) { ww.add(pos, slot); },
        [&] { return ww.done(); });
    window = ww.window;
  }
  publish_document_features(p, q, c, d, w, window, out);
}

}  // namespace gpusearch::ranker
