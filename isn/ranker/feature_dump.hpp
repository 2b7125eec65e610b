// `gpusearch features`: the feature rows a second stage would see, for training a ranker
// (launch/train-ranker.sh). Every shard's first stage keeps its top `candidates` per query, as
// `gpusearch search --candidates N` does, and each candidate's features (the whole catalog, the
// same extraction code as the rankers) go out as one TSV line:
//   qid <TAB> docid <TAB> feature values in catalog order (%.9g: exact for float; "nan" missing)
// after a header line naming the columns.
#pragma once

#include <cmath>
#include <filesystem>
#include <ostream>

#include <nlohmann/json.hpp>

#include "common/query.hpp"
#include "common/search_result.hpp"
#include "isn/engine_factory.hpp"

namespace gpusearch::ranker {

struct FeatureDumpOptions {
  std::filesystem::path index_dir;
  std::filesystem::path queries_path;
  SearchParams params;  // mode, scoring; k is set to `candidates`
  double alpha = NAN;   // NaN: the index's
  std::uint32_t candidates = 100;
  EngineOptions engine;
  QueryLimits limits;
};

// Returns counts (queries, rows, skipped query lines) as JSON.
nlohmann::json dump_features(const FeatureDumpOptions& options, std::ostream& out);

}  // namespace gpusearch::ranker
