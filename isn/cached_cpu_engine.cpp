#include "isn/cached_cpu_engine.hpp"

#include <numeric>

#include <nlohmann/json.hpp>

namespace gpusearch {

CachedCpuEngine::CachedCpuEngine(const ShardIndex& shard, std::uint32_t shard_id,
                                 const ListCacheDirectory& cache, ListBatchOptions batching,
                                 cpu::CpuEngineOptions cpu_options)
    : shard_(shard), cache_(cache), batching_(batching), cpu_(shard, shard_id, cpu_options) {}

void CachedCpuEngine::search(std::span<const Query> queries, const SearchParams& params,
                             std::span<ShardResult> out) {
  std::vector<std::size_t> order(queries.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  for (const ListBatch& batch : plan_list_batches(cache_, queries, order, batching_)) {
    counters_.add(batch);
    for (std::size_t pos = batch.begin; pos < batch.end; ++pos) {
      const Query& q = queries[order[pos]];
      const DocId horizon = batch.horizon[pos - batch.begin];
      ShardResult prefix = horizon > 0 ? cpu_.search_range(q, params, 0, horizon) : ShardResult{};
      if (horizon == 0) ++counters_.cpu_only;
      if (horizon >= shard_.num_docs() ||
          prefix_answer_is_final(shard_, q, params, horizon, prefix, bound_scale_)) {
        out[order[pos]] = std::move(prefix);
        continue;
      }
      ++counters_.post_processed;
      ShardResult done = cpu_.resume(q, params, horizon, prefix);
      done.counters.add(prefix.counters);
      out[order[pos]] = std::move(done);
    }
  }
}

nlohmann::json CachedCpuEngine::stats() const {
  nlohmann::json j = counters_.to_json();
  j["engine"] = "cpu-list-cache";
  j["cache_bytes"] = cache_.used_words() * 4;
  j["cache_lists"] = cache_.lists();
  return j;
}

}  // namespace gpusearch
