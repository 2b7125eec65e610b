#include "common/reference_engine.hpp"

#include <algorithm>

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "common/scoring.hpp"

namespace gpusearch {

namespace {

// Dense per-thread accumulators over the shard's documents; `touched` lists the documents with
// a nonzero match count so that clearing costs only what was used.
struct Accumulators {
  std::vector<double> score;
  std::vector<std::uint32_t> matched_terms;
  std::vector<DocId> touched;
  std::vector<DocId> docs;
  std::vector<std::uint32_t> freqs;
  void ensure(std::size_t n) {
    if (score.size() < n) score.assign(n, 0.0), matched_terms.assign(n, 0u);
  }
};

std::vector<RankedDoc> best(std::vector<RankedDoc> v, std::size_t depth) {
  const std::size_t n = std::min(depth, v.size());
  std::partial_sort(v.begin(), v.begin() + std::ptrdiff_t(n), v.end(), ranks_before);
  v.resize(n);
  return v;
}

ReferenceShardAnswer search_with(Accumulators& acc, const ShardIndex& shard,
                                 std::uint32_t shard_id, const Query& query,
                                 const SearchParams& params, std::size_t depth) {
  ReferenceShardAnswer ans;
  if (query.terms.empty()) return ans;
  const IndexParams& ip = shard.params();
  std::vector<std::uint32_t> dfs;
  for (TermId t : query.terms) dfs.push_back(shard.term(t).df_global);
  const QueryWeights w =
      make_query_weights(params.scoring, params.alpha, ip.bm25, ip.collection.num_docs, dfs);
  acc.ensure(shard.num_docs());
  const auto lengths = shard.doc_lengths();
  for (std::size_t i = 0; i < query.terms.size(); ++i) {
    shard.decode_list(query.terms[i], acc.docs, acc.freqs);
    ans.counters.postings_decoded += acc.docs.size();
    ans.counters.blocks_decoded += shard.term(query.terms[i]).num_blocks;
    for (std::size_t j = 0; j < acc.docs.size(); ++j) {
      const DocId d = acc.docs[j];
      const double norm = length_norm(ip.bm25, lengths[d], ip.collection.avg_doc_length);
      if (acc.matched_terms[d]++ == 0) acc.touched.push_back(d);
      acc.score[d] += w.term_weight[i] * impact(acc.freqs[j], norm);
    }
  }
  std::vector<RankedDoc> and_docs, or_docs;
  or_docs.reserve(acc.touched.size());
  const auto pagerank = shard.pagerank();
  const auto ranks = shard.global_ranks();
  for (DocId d : acc.touched) {
    const RankedDoc r{acc.score[d] + w.static_weight * double(pagerank[d]), ranks[d], shard_id, d};
    or_docs.push_back(r);
    if (acc.matched_terms[d] == query.terms.size()) and_docs.push_back(r);
    acc.score[d] = 0.0;
    acc.matched_terms[d] = 0;
  }
  acc.touched.clear();
  ans.counters.docs_scored = or_docs.size();
  ans.and_matches = and_docs.size();
  ans.or_matches = or_docs.size();
  ans.and_hits = best(std::move(and_docs), depth);
  ans.or_hits = best(std::move(or_docs), depth);
  return ans;
}

tbb::enumerable_thread_specific<Accumulators>& thread_accumulators() {
  static tbb::enumerable_thread_specific<Accumulators> acc;
  return acc;
}

}  // namespace

ReferenceShardAnswer reference_search_shard(const ShardIndex& shard, std::uint32_t shard_id,
                                            const Query& query, const SearchParams& params,
                                            std::size_t depth) {
  return search_with(thread_accumulators().local(), shard, shard_id, query, params, depth);
}

ReferenceAnswer reference_answer(const Index& index, const Query& query, const SearchParams& params,
                                 std::size_t depth) {
  std::vector<RankedDoc> and_all, or_all;
  std::uint64_t and_matches = 0, or_matches = 0;
  for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
    auto a = reference_search_shard(index.shard(s), index.shard_id(s), query, params, depth);
    and_all.insert(and_all.end(), a.and_hits.begin(), a.and_hits.end());
    or_all.insert(or_all.end(), a.or_hits.begin(), a.or_hits.end());
    and_matches += a.and_matches;
    or_matches += a.or_matches;
  }
  ReferenceAnswer r;
  const bool use_or = params.mode == Mode::kOr || (params.mode == Mode::kAndOr && and_matches < params.k);
  r.answered_by_or = use_or && params.mode == Mode::kAndOr;
  r.hits = best(use_or ? std::move(or_all) : std::move(and_all), depth);
  r.total_matches = use_or ? or_matches : and_matches;
  return r;
}

void ReferenceEngine::search(std::span<const Query> queries, const SearchParams& params,
                             std::span<ShardResult> out) {
  tbb::parallel_for(std::size_t(0), queries.size(), [&](std::size_t q) {
    auto a = reference_search_shard(shard_, shard_id_, queries[q], params, params.k);
    ShardResult& r = out[q];
    r = ShardResult{};
    r.counters = a.counters;
    switch (params.mode) {
      case Mode::kAnd: r.hits = std::move(a.and_hits); break;
      case Mode::kOr: r.hits = std::move(a.or_hits); break;
      case Mode::kAndOr:
        r.hits = std::move(a.and_hits);
        r.and_matches = a.and_matches;
        if (a.and_matches < params.k) r.or_hits = std::move(a.or_hits);
        break;
    }
  });
}

}  // namespace gpusearch
