// The features a second-stage ranker can use (paper 004, 2.1.4 and 3.3): static document
// features from the index, query features, dynamic features from the query terms' occurrences,
// and proximity features from their positions in the document's token stream (the forward
// index). Feature extraction always fills the whole catalog, one row of kFeatureStride floats per
// (query, document); a ranker's feature map (paper 004, Figure 3.9) names the features it reads.
//
// Missing values are NaN: a proximity feature where too few query terms occur. A decision tree
// sends NaN down its node's default branch (as XGBoost does); the single-feature transforms map
// NaN to 0 (common/ranker/model_layout.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpusearch::ranker {

// Dynamic features look at the first kMaxRankerTerms query terms (in query order); pairwise
// distances at the first kMaxPairTerms of them. Longer queries rank on that prefix.
inline constexpr unsigned kMaxRankerTerms = 32;
inline constexpr unsigned kMaxPairTerms = 8;
// The document's head: its first kHeadTokens tokens, where a title or a lead sentence sits (a
// stand-in for paper 004's title stream, as the forward index keeps one stream per document).
inline constexpr unsigned kHeadTokens = 16;

enum class Feature : std::uint32_t {
  // Static (per document, from the index).
  kDocLength,    // tokens in the document
  kPagerank,     // PageRank / max PageRank
  kGlobalScore,  // GS(d) (paper 000, eq. 4)
  // Query (the same for every candidate of a query).
  kQueryTerms,   // query terms considered (at most kMaxRankerTerms)
  kQueryIdfSum,  // sum of their idf
  // Dynamic (term occurrences).
  kBm25,             // BM25 over the considered terms (float)
  kBm25Pr,           // bm25-pr (paper 000, eq. 3) with the query's alpha
  kMatchedTerms,     // query terms occurring in the document
  kMatchedFraction,  // matched / query terms
  kTfSum,
  kTfMax,
  kTfMin,
  kTfMean,     // term frequencies over the query terms (absent ones as 0)
  kTfNormSum,  // tf sum / document length
  kIdfMatchedSum,
  kIdfMatchedMax,
  kIdfMatchedMin,  // idf over the matched terms (0 if none)
  kTfIdfSum,
  kTfIdfMax,  // tf * idf over the query terms
  kBm25TermMax,
  kBm25TermMin,  // one term's BM25 contribution, over the matched terms
  // Proximity (positions are token offsets from 0).
  kFirstOccurrence,          // first position of any query term; NaN if none occurs
  kFirstOccurrenceFraction,  // that / document length
  kFirstOccurrenceMean,      // mean over matched terms of their first position
  kMinWindow,                // tokens in the shortest span holding every matched term; NaN if none
  kWindowDensity,            // matched terms / min window
  kPairDistanceMin,   // least distance between occurrences of two different matched terms (of the
                      // first kMaxPairTerms); NaN with fewer than two such terms
  kPairDistanceMean,  // mean over those pairs of their least distance
  kOrderedBigrams,    // positions where query term i is followed by query term i + 1
  // The head (the first kHeadTokens tokens).
  kHeadTfSum,            // query-term occurrences in the head
  kHeadMatchedFraction,  // query terms occurring in the head / query terms
  kHeadIdfFraction,      // their idf / the query's idf sum
  kCount
};

inline constexpr std::uint32_t kNumFeatures = std::uint32_t(Feature::kCount);
// One row per document: the catalog padded to 32 floats (128 bytes, aligned rows).
inline constexpr std::uint32_t kFeatureStride = 32;
static_assert(kNumFeatures <= kFeatureStride);

inline constexpr std::array<std::string_view, kNumFeatures> kFeatureNames = {
    "doc_length",
    "pagerank",
    "gs",
    "query_terms",
    "query_idf_sum",
    "bm25",
    "bm25_pr",
    "matched_terms",
    "matched_fraction",
    "tf_sum",
    "tf_max",
    "tf_min",
    "tf_mean",
    "tf_norm_sum",
    "idf_matched_sum",
    "idf_matched_max",
    "idf_matched_min",
    "tfidf_sum",
    "tfidf_max",
    "bm25_term_max",
    "bm25_term_min",
    "first_occurrence",
    "first_occurrence_fraction",
    "first_occurrence_mean",
    "min_window",
    "window_density",
    "pair_distance_min",
    "pair_distance_mean",
    "ordered_bigrams",
    "head_tf_sum",
    "head_matched_fraction",
    "head_idf_fraction",
};

inline std::string_view feature_name(std::uint32_t f) {
  return f < kNumFeatures ? kFeatureNames[f] : std::string_view("?");
}
inline std::optional<std::uint32_t> find_feature(std::string_view name) {
  for (std::uint32_t f = 0; f < kNumFeatures; ++f)
    if (kFeatureNames[f] == name) return f;
  return std::nullopt;
}

}  // namespace gpusearch::ranker
