#include "isn/ranker/feature_dump.hpp"

#include <numeric>

#include <fmt/format.h>

#include "common/forward_index.hpp"
#include "common/ranker/feature_catalog.hpp"
#include "common/shard_index.hpp"
#include "isn/ranker/cpu_ranker.hpp"
#include "isn/ranker/second_stage.hpp"

namespace gpusearch::ranker {

nlohmann::json dump_features(const FeatureDumpOptions& options, std::ostream& out) {
  const Index index = Index::open(options.index_dir);
  if (options.candidates == 0 || options.candidates > kMaxCandidates)
    throw InputError("--candidates", 0, fmt::format("must be 1..{}", kMaxCandidates));
  SearchParams params = options.params;
  params.alpha = std::isnan(options.alpha) ? index.params().gs_alpha : options.alpha;
  params.k = options.candidates;
  std::vector<ForwardIndex> forward;
  std::vector<std::unique_ptr<QueryEngine>> engines;
  for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
    forward.push_back(ForwardIndex::open(index.shard(s)));
    engines.push_back(make_engine(options.engine, index.shard(s), index.shard_id(s)));
  }
  const QueryFile file = read_query_file(options.queries_path);
  std::vector<Query> queries;
  std::uint64_t skipped = file.problems.size();
  for (const QueryText& qt : file.queries) {
    Query q;
    QueryProblem p;
    if (resolve_query(index.shard(0), qt, options.limits, q, p, options.queries_path.string()))
      queries.push_back(std::move(q));
    else
      ++skipped;
  }
  out << "qid\tdocid";
  for (std::uint32_t f = 0; f < kNumFeatures; ++f) out << '\t' << feature_name(f);
  out << '\n';
  std::vector<std::size_t> all(queries.size());
  std::iota(all.begin(), all.end(), std::size_t(0));
  std::uint64_t rows_written = 0;
  FeatureBatch batch;
  std::vector<float> rows;
  std::vector<ShardResult> results(queries.size());
  for (std::size_t s = 0; s < engines.size(); ++s) {
    results.assign(queries.size(), ShardResult{});
    engines[s]->search(queries, params, results);
    build_feature_batch(index.shard(s), forward[s], queries, all, results, params.alpha, batch);
    rows.resize(batch.num_docs() * kFeatureStride);
    extract_features(batch, rows);
    std::size_t i = 0;
    for (std::size_t q = 0; q < queries.size(); ++q)
      for (const auto* list : {&results[q].hits, &results[q].or_hits})
        for (const RankedDoc& h : *list) {
          out << queries[q].id << '\t' << index.shard(s).external_id(h.doc);
          for (std::uint32_t f = 0; f < kNumFeatures; ++f) {
            const float v = rows[i * kFeatureStride + f];
            out << '\t' << (v != v ? std::string("nan") : fmt::format("{:.9g}", v));
          }
          out << '\n';
          ++i, ++rows_written;
        }
  }
  if (!out) throw Error("write failed (features)");
  return {{"queries", queries.size()},
          {"rows", rows_written},
          {"skipped_queries", skipped},
          {"candidates", options.candidates},
          {"shards", index.num_open_shards()}};
}

}  // namespace gpusearch::ranker
