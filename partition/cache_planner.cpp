#include "partition/cache_planner.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include "common/cache_admission.hpp"
#include "common/error.hpp"
#include "common/index_format.hpp"
#include "common/progress.hpp"
#include "common/query.hpp"
#include "common/scoring.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

CachePlan make_cache_plan(const Index& index, const std::filesystem::path& training_queries,
                          const CachePlanOptions& o) {
  if (!(o.lambda > 0.0 && o.lambda <= 1.0))
    throw InputError("--lambda", 0, fmt::format("must be in (0, 1], got {}", o.lambda));
  if (o.budget_bytes == 0) throw InputError("--budget", 0, "must be more than 0 bytes");
  if (o.k == 0) throw InputError("--k", 0, "must be at least 1");
  const QueryFile qf = read_query_file(training_queries);
  const ShardIndex& vocabulary = index.shard(0);
  std::vector<Query> queries;
  for (const QueryText& qt : qf.queries) {
    Query q;
    QueryProblem problem;
    if (resolve_query(vocabulary, qt, QueryLimits{}, q, problem, training_queries.string()) &&
        !q.terms.empty())
      queries.push_back(std::move(q));
  }
  if (queries.empty())
    throw InputError(training_queries.string(), 0, "no training query has a known term");
  // Query frequency of each term in the training log.
  std::map<TermId, std::uint64_t> qf_of;
  for (const Query& q : queries)
    for (TermId t : q.terms) ++qf_of[t];

  CachePlan plan;
  plan.policy = o.policy;
  plan.lambda = o.lambda;
  plan.budget_bytes = o.budget_bytes;
  plan.k = o.k;
  plan.scoring = std::string(to_string(o.scoring));
  plan.training_file = training_queries.string();
  plan.training_queries = queries.size();
  plan.index_manifest_xxh3 = xxh3_of_file(index.dir() / kRootManifestName);

  for (std::size_t si = 0; si < index.num_open_shards(); ++si) {
    const ShardIndex& shard = index.shard(si);
    // Simulated block reads of every training query: per term, the prefix lengths read.
    VisitLog visits;
    for (const auto& [t, f] : qf_of) visits[t].query_frequency = double(f);
    {
      std::vector<std::vector<ListRead>> per_query(queries.size());
      Progress progress(fmt::format("cache plan, shard {}: training queries", index.shard_id(si)),
                        queries.size(), "queries", o.progress);
      tbb::parallel_for(std::size_t(0), queries.size(), [&](std::size_t i) {
        per_query[i] = simulate_and_reads(shard, queries[i], o.k, o.scoring);
        progress.add(1);
      });
      progress.finish();
      for (const auto& reads : per_query)
        for (const ListRead& r : reads) visits[r.term].prefixes.push_back({r.blocks, 1.0});
    }
    std::vector<CachedList> admitted = admit_lists(shard, visits,
                                                   {.policy = o.policy,
                                                    .lambda = o.lambda,
                                                    .budget_bytes = o.budget_bytes,
                                                    .fill_spare = o.fill_spare});
    std::sort(admitted.begin(), admitted.end(),
              [](const CachedList& a, const CachedList& b) { return a.term < b.term; });
    ShardCachePlan sp;
    sp.shard = index.shard_id(si);
    std::map<TermId, std::uint32_t> cached;
    for (const CachedList& l : admitted) {
      sp.bytes += l.bytes;
      sp.blocks += l.blocks;
      cached[l.term] = l.blocks;
      if (!qf_of.contains(l.term)) ++sp.unqueried_lists, sp.unqueried_bytes += l.bytes;
    }
    sp.lists = std::move(admitted);
    for (const auto& [t, v] : visits) {
      const auto it = cached.find(t);
      const std::uint32_t have = it == cached.end() ? 0 : it->second;
      for (const auto& [len, weight] : v.prefixes) {
        sp.training_block_reads += len;
        sp.training_block_reads_cached += std::min(len, have);
      }
    }
    plan.shards.push_back(std::move(sp));
  }
  return plan;
}

}  // namespace gpusearch
