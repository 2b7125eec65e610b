#include "isn/ranker/second_stage.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "common/scoring.hpp"

namespace gpusearch::ranker {

namespace {
using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxFallbackMessages = 20;
}  // namespace

void keep_top_k(std::vector<RankedDoc>& hits, unsigned k) {
  const std::size_t n = std::min<std::size_t>(k, hits.size());
  std::partial_sort(hits.begin(), hits.begin() + std::ptrdiff_t(n), hits.end(), ranks_before);
  hits.resize(n);
}

void build_feature_batch(const ShardIndex& shard, const ForwardIndex& forward,
                         std::span<const Query> queries, std::span<const std::size_t> members,
                         std::span<const ShardResult> results, double alpha, FeatureBatch& batch,
                         bool gather) {
  batch.clear();
  if (!gather) {
    batch.external_streams = forward.data().data();
    batch.external_bytes = forward.data().size();
  }
  const IndexParams& ip = shard.params();
  batch.params.k1 = float(ip.bm25.k1);
  batch.params.b = float(ip.bm25.b);
  batch.params.avg_doc_length = float(ip.collection.avg_doc_length);
  const auto lengths = shard.doc_lengths();
  const auto pagerank = shard.pagerank();
  const auto gs = shard.global_scores();
  for (const std::size_t q : members) {
    FeatureQuery fq;
    fq.first_term = std::uint32_t(batch.terms.size());
    fq.num_terms = std::uint32_t(std::min<std::size_t>(queries[q].terms.size(), kMaxRankerTerms));
    fq.alpha = float(alpha);
    for (std::uint32_t i = 0; i < fq.num_terms; ++i) {
      const TermId t = queries[q].terms[i];
      const float w = float(idf(ip.collection.num_docs, shard.term(t).df_global));
      batch.terms.push_back(t);
      batch.idf.push_back(w);
      fq.idf_sum += w;
    }
    const std::uint32_t query_index = std::uint32_t(batch.queries.size());
    batch.queries.push_back(fq);
    for (const auto* list : {&results[q].hits, &results[q].or_hits})
      for (const RankedDoc& h : *list) {
        const auto stream = forward.stream(h.doc);
        FeatureDoc d;
        d.stream_offset = gather ? batch.streams.size() : forward.stream_offset(h.doc);
        d.stream_bytes = std::uint32_t(stream.size());
        d.query = query_index;
        d.doc_length = lengths[h.doc];
        d.pagerank = pagerank[h.doc];
        d.gs = gs[h.doc];
        batch.docs.push_back(d);
        if (gather) batch.streams.insert(batch.streams.end(), stream.begin(), stream.end());
      }
  }
}

SecondStageRanker::SecondStageRanker(const ShardIndex& shard, const ForwardIndex& forward,
                                     RankerCache& cache, RankerBackend& backend,
                                     bool resident_streams)
    : shard_(shard), forward_(forward), cache_(cache), backend_(backend) {
  streams_resident_ = resident_streams && backend_.attach_streams(forward_.data());
}

void SecondStageRanker::rank(std::span<const Query> queries, const SearchParams& params,
                             std::span<ShardResult> results) {
  // The batch's queries by ranker, in order of first appearance.
  std::vector<std::pair<std::string, std::vector<std::size_t>>> groups;
  std::map<std::string, std::size_t, std::less<>> group_of;
  for (std::size_t q = 0; q < queries.size(); ++q) {
    if (queries[q].ranker.empty()) {
      keep_top_k(results[q].hits, params.k);
      keep_top_k(results[q].or_hits, params.k);
      continue;
    }
    auto [it, fresh] = group_of.try_emplace(queries[q].ranker, groups.size());
    if (fresh) groups.push_back({queries[q].ranker, {}});
    groups[it->second].second.push_back(q);
  }
  for (const auto& [name, members] : groups) {
    const ResidentRanker* ranker = nullptr;
    try {
      ranker = &cache_.acquire(name, members.size());
    } catch (const Error& e) {
      fallbacks_ += members.size();
      if (fallback_messages_.size() < kMaxFallbackMessages) fallback_messages_.push_back(e.what());
      for (const std::size_t q : members) {
        results[q].ranker_fallback = true;
        keep_top_k(results[q].hits, params.k);
        keep_top_k(results[q].or_hits, params.k);
      }
      continue;
    }
    const auto t0 = Clock::now();
    build_feature_batch(shard_, forward_, queries, members, results, params.alpha, batch_);
    gather_ms_ += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    scores_.resize(batch_.num_docs());
    if (!batch_.docs.empty()) times_.add(backend_.rank(*ranker, batch_, scores_));
    ++calls_;
    std::size_t i = 0;
    for (const std::size_t q : members) {
      for (auto* list : {&results[q].hits, &results[q].or_hits}) {
        for (RankedDoc& h : *list) {
          const float s = scores_[i++];
          // A non-finite score (an overflowing model) sorts last instead of breaking the order.
          h.score = std::isfinite(s) ? double(s) : -std::numeric_limits<double>::infinity();
        }
        keep_top_k(*list, params.k);
      }
    }
    queries_ranked_ += members.size();
    candidates_scored_ += batch_.num_docs();
  }
}

nlohmann::json SecondStageRanker::stats() const {
  return {{"backend", std::string(backend_.name())},
          {"queries_ranked", queries_ranked_},
          {"candidates_scored", candidates_scored_},
          {"ranker_calls", calls_},
          {"ranker_fallbacks", fallbacks_},
          {"fallback_messages", fallback_messages_},
          {"gather_ms", gather_ms_},
          {"streams_resident_on_device", streams_resident_},
          {"rank_ms", times_.total_ms},
          {"copy_ms", times_.copy_ms},
          {"features_ms", times_.features_ms},
          {"model_ms", times_.model_ms},
          {"bytes_to_device", times_.bytes_to_device},
          {"cache", cache_.stats_json()},
          {"backend_stats", backend_.stats()}};
}

}  // namespace gpusearch::ranker
