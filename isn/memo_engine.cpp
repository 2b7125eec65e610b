#include "isn/memo_engine.hpp"

#include <cstring>

namespace gpusearch {

MemoEngine::MemoEngine(std::unique_ptr<QueryEngine> inner) : inner_(std::move(inner)) {}

std::string MemoEngine::key(const Query& q, const SearchParams& params) {
  std::string k;
  k.reserve(32 + 4 * q.terms.size() + q.ranker.size());
  auto put = [&k](const auto& v) {
    char bytes[sizeof(v)];
    std::memcpy(bytes, &v, sizeof(v));
    k.append(bytes, sizeof(v));
  };
  put(std::uint32_t(params.mode));
  put(std::uint32_t(params.scoring));
  put(params.alpha);
  put(params.k);
  put(params.candidates);
  put(std::uint32_t(q.terms.size()));
  for (TermId t : q.terms) put(t);
  k.append(q.ranker);  // last: its length is implied
  return k;
}

void MemoEngine::search(std::span<const Query> queries, const SearchParams& params,
                        std::span<ShardResult> out) {
  std::vector<std::size_t> missing;
  std::vector<std::string> keys(queries.size());
  for (std::size_t i = 0; i < queries.size(); ++i) {
    keys[i] = key(queries[i], params);
    if (auto it = memory_.find(keys[i]); it != memory_.end()) {
      out[i] = it->second;
      ++hits_;
    } else {
      missing.push_back(i);
    }
  }
  if (missing.empty()) return;
  misses_ += missing.size();
  std::vector<Query> batch;
  batch.reserve(missing.size());
  for (std::size_t i : missing) batch.push_back(queries[i]);
  std::vector<ShardResult> results(batch.size());
  inner_->search(batch, params, results);
  for (std::size_t j = 0; j < missing.size(); ++j) {
    // A partial answer (a failing engine part) is not remembered: it would outlive the failure.
    if (!results[j].partial) memory_.emplace(keys[missing[j]], results[j]);
    out[missing[j]] = std::move(results[j]);
  }
}

nlohmann::json MemoEngine::stats() const {
  nlohmann::json s = inner_->stats();
  if (!s.is_object()) s = nlohmann::json::object();
  s["memo"] = {
      {"answered_from_memory", hits_}, {"searched", misses_}, {"distinct_queries", memory_.size()}};
  return s;
}

}  // namespace gpusearch
