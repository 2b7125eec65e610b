// A feature-extraction request (paper 004, 3.3, Figure 3.4 in spirit: many documents per
// launch): the queries of a ranking batch, their terms and idf, every candidate document with
// its token stream, and the collection's BM25 parameters.
//
// The streams are either gathered into `streams` (the request owns them), or referenced in a
// mapped forward index (`external_streams`: stream_offset indexes it, nothing is copied). The
// CPU twin reads either in place. The GPU copies the request to the device (the per-query data
// of paper 004, 3.6: what the copy share of GPU time measures); referenced streams it either
// finds resident on the device (the shard's forward index uploaded once) or gathers into the
// copy.
#pragma once

#include <cstdint>
#include <vector>

#include "common/ranker/document_features.hpp"

namespace gpusearch::ranker {

struct FeatureBatch {
  FeatureParams params;
  std::vector<FeatureQuery> queries;
  std::vector<std::uint32_t> terms;   // all queries' terms, each query's a range (FeatureQuery)
  std::vector<float> idf;             // parallel to terms
  std::vector<FeatureDoc> docs;       // candidates, grouped by query, in candidate order
  std::vector<std::uint8_t> streams;  // candidates' forward-index streams, back to back
  const std::uint8_t* external_streams = nullptr;  // set: streams live here instead
  std::uint64_t external_bytes = 0;

  void clear() {
    queries.clear(), terms.clear(), idf.clear(), docs.clear(), streams.clear();
    external_streams = nullptr, external_bytes = 0;
  }
  const std::uint8_t* stream_data() const {
    return external_streams ? external_streams : streams.data();
  }
  // The candidates' stream bytes (gathered or referenced).
  std::uint64_t stream_bytes() const {
    std::uint64_t b = 0;
    for (const FeatureDoc& d : docs) b += d.stream_bytes;
    return b;
  }
  std::size_t num_docs() const { return docs.size(); }
  // Bytes a copy of the request with its streams moves.
  std::uint64_t bytes() const {
    return queries.size() * sizeof(FeatureQuery) + terms.size() * 4 + idf.size() * 4 +
           docs.size() * sizeof(FeatureDoc) + stream_bytes();
  }
  // Features of candidate i into out[0, kFeatureStride).
  void extract(std::size_t i, float* out) const {
    const FeatureDoc& d = docs[i];
    extract_document_features(params, queries[d.query], terms.data(), idf.data(), d,
                              stream_data() + d.stream_offset, out);
  }
};

}  // namespace gpusearch::ranker
