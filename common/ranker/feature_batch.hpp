// A feature-extraction request (paper 004, 3.3, Figure 3.4 in spirit: many documents per
// launch): the queries of a ranking batch, their terms and idf, every candidate document with
// its token stream, and the collection's BM25 parameters. The CPU twin reads it in place; the
// GPU copies it to the device as it is (the per-query data of 3.6), which is what the copy share
// of GPU time measures.
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

  void clear() { queries.clear(), terms.clear(), idf.clear(), docs.clear(), streams.clear(); }
  std::size_t num_docs() const { return docs.size(); }
  // Bytes a copy of the request to the device moves.
  std::uint64_t bytes() const {
    return queries.size() * sizeof(FeatureQuery) + terms.size() * 4 + idf.size() * 4 +
           docs.size() * sizeof(FeatureDoc) + streams.size();
  }
  // Features of candidate i into out[0, kFeatureStride).
  void extract(std::size_t i, float* out) const {
    const FeatureDoc& d = docs[i];
    extract_document_features(params, queries[d.query], terms.data(), idf.data(), d,
                              streams.data() + d.stream_offset, out);
  }
};

}  // namespace gpusearch::ranker
