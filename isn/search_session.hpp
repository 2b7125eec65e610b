// In-process search over every shard of an index: what `gpusearch search` runs. Queries are
// read and resolved, cut into batches, answered by one engine per shard, merged exactly as the
// aggregator merges, and written as a TREC run; the metrics come back as JSON.
#pragma once

#include <cmath>
#include <filesystem>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/query.hpp"
#include "common/search_result.hpp"
#include "isn/engine_factory.hpp"
#include "isn/ranker/ranking_options.hpp"

namespace gpusearch {

struct SearchSessionOptions {
  std::filesystem::path index_dir;
  std::filesystem::path queries_path;
  SearchParams params;
  double alpha = NAN;  // bm25-pr alpha; NaN: the index's GS alpha
  EngineOptions engine;
  std::string run_tag = "gpusearch";
  std::size_t batch_size = 4096;
  QueryLimits limits;
  bool skip_checksums = false;
  bool progress = true;
  ranker::RankingOptions ranking;  // the second stage (issue 12); off without a store
};

nlohmann::json run_search_session(const SearchSessionOptions& options, std::ostream& run);
void print_search_summary(const nlohmann::json& metrics, const std::string& run_path,
                          std::ostream& out);

}  // namespace gpusearch
