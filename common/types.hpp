// Identifiers and small value types used across gpusearch.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace gpusearch {

// A shard-local document id. Within a shard, docIDs are in global-score (GS) order, so a smaller
// docID never has a smaller GS (paper 000, eq. 4) and early termination over docIDs is exact.
using DocId = std::uint32_t;
// A term id: the term's position in the lexicographically sorted global vocabulary.
using TermId = std::uint32_t;
// A document's position in the collection-wide total order (GS descending, input order
// ascending). It is the same for every partitioning, so it breaks score ties across shards.
using GlobalRank = std::uint32_t;

inline constexpr DocId kNoDoc = std::numeric_limits<DocId>::max();
inline constexpr unsigned kBlockSize = 128;  // postings per compressed block

// How query terms combine. and-or: AND top-k if AND finds at least k documents, else OR top-k.
enum class Mode { kAnd, kOr, kAndOr };
// bm25, or bm25-pr = alpha * PageRank' + (1 - alpha) * normalized BM25 (paper 000, eq. 3).
enum class Scoring { kBm25, kBm25Pr };

inline std::string_view to_string(Mode m) {
  switch (m) {
    case Mode::kAnd: return "and";
    case Mode::kOr: return "or";
    case Mode::kAndOr: return "and-or";
  }
  return "?";
}
inline std::string_view to_string(Scoring s) { return s == Scoring::kBm25 ? "bm25" : "bm25-pr"; }

inline Mode parse_mode(std::string_view s) {
  if (s == "and") return Mode::kAnd;
  if (s == "or") return Mode::kOr;
  if (s == "and-or") return Mode::kAndOr;
  throw InputError("--mode", 0, "unknown mode '" + std::string(s) + "' (and, or, and-or)");
}
inline Scoring parse_scoring(std::string_view s) {
  if (s == "bm25") return Scoring::kBm25;
  if (s == "bm25-pr") return Scoring::kBm25Pr;
  throw InputError("--scoring", 0, "unknown scoring '" + std::string(s) + "' (bm25, bm25-pr)");
}

}  // namespace gpusearch
