// The interface every engine of an ISN implements (reference, CPU, GPU): a batch of queries on
// one shard in, one ShardResult per query out. Engines are interchangeable and must agree with
// the reference engine (ARCHITECTURE.md, "Exactness").
#pragma once

#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/query.hpp"
#include "common/search_result.hpp"

namespace gpusearch {

class QueryEngine {
 public:
  virtual ~QueryEngine() = default;
  virtual std::string_view name() const = 0;
  // out.size() == queries.size(). Throws gpusearch::Error on failure.
  virtual void search(std::span<const Query> queries, const SearchParams& params,
                      std::span<ShardResult> out) = 0;
  // Engine-specific figures for the metrics JSON (per-batch times, bytes moved, memory).
  virtual nlohmann::json stats() const { return nlohmann::json::object(); }
  // Whether search() already spreads a batch over the machine (the CPU engine's oneTBB loop,
  // the GPU engine's launches): such an engine is never wrapped in another parallel loop.
  virtual bool runs_batch_in_parallel() const { return false; }
  // Work the engine would otherwise do in its first batch with these parameters, done ahead at
  // start-up (the scheduler's cost predictor trains on them), so that no batch is charged for
  // it. Default: nothing. Throws gpusearch::Error on failure; the first batch then tries again.
  virtual void prepare(const SearchParams& /*params*/) {}
};

}  // namespace gpusearch
