// The host side of the GPU list cache (common/list_cache) and its CPU twin
// (isn/cached_cpu_engine): the planner's replay and VFB's admission, the batches' shipping and
// re-pointed block offsets (checked by decoding every available block through a host copy of
// the pool and the lane tables, as the kernels address them), horizons, and exact answers for
// every policy, lambda, budget, mode and scoring, with post-processing exercised and counted.
// The directory's placement, moves and compaction: list_cache_directory_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <set>
#include <cmath>
#include <cstring>

#include "common/cache_admission.hpp"
#include "common/list_cache.hpp"
#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "common/scoring.hpp"
#include "common/shard_index.hpp"
#include "isn/cached_cpu_engine.hpp"
#include "partition/cache_planner.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "list_cache_fixture.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

namespace {

using HostPool = gpusearch::testing::HostPool;
class ListCacheTest : public gpusearch::testing::ListCacheIndex {};

// The planner's replay (lists decoded block by block as the read reaches them) against the
// same replay over fully decoded lists.
std::vector<ListRead> eager_and_reads(const ShardIndex& shard, const Query& q, unsigned k,
                                      Scoring scoring) {
  std::vector<ListRead> reads;
  const std::size_t u = q.terms.size();
  if (u == 0) return reads;
  for (TermId t : q.terms)
    if (shard.term(t).num_blocks == 0) return reads;
  const IndexParams& ip = shard.params();
  std::vector<std::uint32_t> dfs;
  for (TermId t : q.terms) dfs.push_back(shard.term(t).df_global);
  const QueryWeights w =
      make_query_weights(scoring, ip.gs_alpha, ip.bm25, ip.collection.num_docs, dfs);
  const auto factor = gs_bound_factor(w, ip.gs_alpha);
  std::vector<std::size_t> order(u);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return shard.term(q.terms[a]).df_shard < shard.term(q.terms[b]).df_shard;
  });
  std::vector<std::vector<DocId>> docs(u);
  std::vector<std::vector<std::uint32_t>> freqs(u);
  for (std::size_t i = 0; i < u; ++i) shard.decode_list(q.terms[order[i]], docs[i], freqs[i]);
  std::vector<std::size_t> pos(u, 0);
  std::vector<DocId> read_to(u, kNoDoc);
  std::vector<double> top;  // min-heap of the k best scores
  for (std::size_t c = 0; c < docs[0].size(); ++c) {
    const DocId d = docs[0][c];
    if (factor && top.size() == k &&
        *factor * double(shard.global_scores()[d]) * (1.0 + kBoundSlack) < top.front())
      break;
    read_to[0] = d;
    double score = w.static_weight * double(shard.pagerank()[d]);
    const double norm = length_norm(ip.bm25, shard.doc_lengths()[d], ip.collection.avg_doc_length);
    score += w.term_weight[order[0]] * impact(freqs[0][c], norm);
    bool in_all = true;
    for (std::size_t i = 1; i < u && in_all; ++i) {
      read_to[i] = d;
      const auto& l = docs[i];
      pos[i] = std::size_t(std::lower_bound(l.begin() + pos[i], l.end(), d) - l.begin());
      in_all = pos[i] < l.size() && l[pos[i]] == d;
      if (in_all) score += w.term_weight[order[i]] * impact(freqs[i][pos[i]], norm);
    }
    if (!in_all || k == 0) continue;
    if (top.size() < k) {
      top.push_back(score);
      std::push_heap(top.begin(), top.end(), std::greater<>());
    } else if (score > top.front()) {
      std::pop_heap(top.begin(), top.end(), std::greater<>());
      top.back() = score;
      std::push_heap(top.begin(), top.end(), std::greater<>());
    }
  }
  const auto last = shard.block_last_docid();
  for (std::size_t i = 0; i < u; ++i) {
    if (read_to[i] == kNoDoc) continue;
    const TermInfo& ti = shard.term(q.terms[order[i]]);
    const auto* b = last.data() + ti.first_block;
    const auto it = std::lower_bound(b, b + ti.num_blocks, read_to[i]);
    reads.push_back(
        {q.terms[order[i]], std::uint32_t(std::min<std::ptrdiff_t>(it - b + 1, ti.num_blocks))});
  }
  return reads;
}

TEST_F(ListCacheTest, ReplayDecodingOnDemandReadsWhatAFullDecodeReads) {
  std::size_t short_reads = 0;
  for (Scoring scoring : {Scoring::kBm25, Scoring::kBm25Pr}) {
    for (unsigned k : {1u, 10u, 1000u}) {
      for (const Query& q : *queries_) {
        const auto lazy = simulate_and_reads(shard(), q, k, scoring);
        const auto eager = eager_and_reads(shard(), q, k, scoring);
        ASSERT_EQ(lazy.size(), eager.size()) << q.id;
        for (std::size_t i = 0; i < lazy.size(); ++i) {
          ASSERT_EQ(lazy[i].term, eager[i].term) << q.id;
          ASSERT_EQ(lazy[i].blocks, eager[i].blocks) << q.id << " term " << lazy[i].term;
          short_reads += lazy[i].blocks < shard().term(lazy[i].term).num_blocks;
        }
      }
    }
  }
  EXPECT_GT(short_reads, 100u) << "early termination should stop some reads before the end";
}

// VFB's admission merging each list's candidate blocks (the default) admits what sorting all
// of them admits, list for list and in the same order: visit logs from the training queries'
// simulated reads (weights 1: many ties in visiting frequency; and random weights), budgets from
// one block to half the postings, lambda 0.1 to 1.
TEST_F(ListCacheTest, VfbAdmissionByMergeEqualsTheSort) {
  const QueryFile train = read_query_file(*dir_ / "idx" / "queries.train.tsv");
  std::vector<std::vector<ListRead>> reads;
  std::vector<Query> qs;
  for (const QueryText& qt : train.queries) {
    Query q;
    QueryProblem p;
    if (!resolve_query(shard(), qt, QueryLimits{}, q, p, "train") || q.terms.empty()) continue;
    reads.push_back(simulate_and_reads(shard(), q, 10, Scoring::kBm25));
    qs.push_back(std::move(q));
  }
  ASSERT_GT(qs.size(), 100u);
  std::mt19937_64 rng(23);
  std::size_t nonempty = 0;
  for (bool random_weights : {false, true})
    for (std::uint64_t budget : {std::uint64_t(64), index_bytes() / 50, index_bytes() / 10,
                                 index_bytes() / 2})
      for (double lambda : {0.1, 0.5, 1.0}) {
        VisitLog log;
        for (std::size_t i = 0; i < qs.size(); ++i) {
          const double w = random_weights ? std::exp2(-double(rng() % 64) / 8.0) : 1.0;
          for (TermId t : qs[i].terms) log[t].query_frequency += w;
          for (const ListRead& r : reads[i]) log[r.term].prefixes.push_back({r.blocks, w});
        }
        VisitLog copy = log;
        AdmissionOptions o{CachePolicy::kVfb, lambda, budget};
        const std::vector<CachedList> merged = admit_lists(shard(), log, o);
        o.merge_candidates = false;
        const std::vector<CachedList> sorted = admit_lists(shard(), copy, o);
        ASSERT_EQ(merged.size(), sorted.size()) << budget << " " << lambda;
        for (std::size_t i = 0; i < merged.size(); ++i) {
          ASSERT_EQ(merged[i].term, sorted[i].term) << "list " << i;
          ASSERT_EQ(merged[i].blocks, sorted[i].blocks) << "list " << i;
          ASSERT_EQ(merged[i].bytes, sorted[i].bytes) << "list " << i;
        }
        nonempty += !merged.empty();
      }
  EXPECT_GT(nonempty, 18u);
}

// Every batch fits the shipping region; through two lanes' tables (stale entries from earlier
// batches left in place), every block a query's batch makes available reads back right, and
// every list is complete below the query's horizon.
void check_batches(const ShardIndex& shard, const ListCacheDirectory& cache,
                   const std::vector<Query>& queries, const ListBatchOptions& o,
                   std::uint64_t* truncated_out = nullptr) {
  const DeviceBlockNumbering& n = cache.numbering();
  std::vector<std::size_t> order(queries.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  const auto batches = plan_list_batches(cache, queries, order, o);
  const std::uint64_t ship_words = o.ship_capacity_bytes / 4;
  // The cache region as the device holds it, then one table per lane.
  HostPool pool(cache.capacity_words() + 2 * ship_words + 1, n.num_slots());
  for (const auto& [t, e] : cache.entries())
    pool.copy(shard, {shard.block_offsets()[shard.term(t).first_block], e.words, e.word_offset}, 0);
  pool.patch(cache.table_entries(), 0);
  std::vector<HostPool> lanes(2, pool);
  std::size_t next = 0;
  std::uint64_t truncated = 0;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const ListBatch& b = batches[i];
    ASSERT_EQ(b.begin, next);
    ASSERT_GT(b.end, b.begin);
    ASSERT_LE(b.end - b.begin, o.max_queries);
    next = b.end;
    ASSERT_LE(b.region_bytes(), o.ship_capacity_bytes);
    const std::uint64_t base = cache.capacity_words() + (i % 2) * ship_words;
    HostPool& lane = lanes[i % 2];
    for (const ShippedList& s : b.shipped) lane.copy(shard, s.copy, base);
    lane.patch(b.patches, base);
    for (std::size_t pos = b.begin; pos < b.end; ++pos) {
      const Query& q = queries[order[pos]];
      DocId horizon = shard.num_docs();
      for (TermId t : q.terms) {
        const std::uint32_t a = b.available_blocks(cache, t);
        ASSERT_TRUE(lane.addresses(shard, n, t, a)) << "batch " << i;
        horizon = std::min(horizon, list_prefix_end(shard, t, a));
      }
      ASSERT_EQ(b.horizon[pos - b.begin], horizon);
      if (horizon < shard.num_docs()) ++truncated;
      for (TermId t : q.terms) {  // below the horizon, the available blocks hold the list
        const TermInfo& ti = shard.term(t);
        const std::uint32_t a = b.available_blocks(cache, t);
        if (a < ti.num_blocks && horizon > 0) {
          ASSERT_GE(list_prefix_end(shard, t, a), horizon);
        }
      }
    }
    // After the batch's kernels the lane's table holds the cache again (ship_tails restores).
    lane.patch(b.restores, 0);
    for (const ShippedList& s : b.shipped) {
      if (const CacheEntry* e = cache.find(s.term)) {
        ASSERT_TRUE(lane.addresses(shard, n, s.term, e->blocks)) << "restore of " << s.term;
      }
    }
  }
  ASSERT_EQ(next, queries.size());
  if (truncated_out) *truncated_out = truncated;
}

TEST_F(ListCacheTest, BatchesFitTheShippingRegionAndAddressEveryAvailableBlock) {
  const DeviceBlockNumbering n(shard());
  const CachePlan p = plan(CachePolicy::kVfb, index_bytes() / 10, 0.5);
  ListCacheDirectory cache(shard(), n, index_bytes() / 10);
  cache.apply(p.shards[0].lists);
  std::uint64_t truncated = 0;
  check_batches(shard(), cache, *queries_, {64, index_bytes() / 100}, &truncated);
  EXPECT_GT(truncated, 0u) << "cached prefixes truncate lists";
  check_batches(shard(), cache, *queries_, {4096, index_bytes()}, &truncated);
  EXPECT_GT(truncated, 0u) << "cached prefixes truncate lists";
  // With ship_tails and room for everything, lists cached in part ship whole: nothing is cut;
  // with a small region some are cut again.
  check_batches(shard(), cache, *queries_, {4096, 2 * index_bytes(), true}, &truncated);
  EXPECT_EQ(truncated, 0u);
  check_batches(shard(), cache, *queries_, {64, index_bytes() / 400, true}, &truncated);
  EXPECT_GT(truncated, 0u);
  // No cache: with room for every list nothing is truncated; a small region cuts lists.
  ListCacheDirectory empty(shard(), n, 0);
  check_batches(shard(), empty, *queries_, {64, index_bytes()}, &truncated);
  EXPECT_EQ(truncated, 0u);
  check_batches(shard(), empty, *queries_, {64, index_bytes() / 400}, &truncated);
  EXPECT_GT(truncated, 0u) << "a small shipping region cuts long lists";
  // A zero cache and a zero shipping region: every query's horizon is 0 (CPU only).
  std::vector<std::size_t> order(queries_->size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  for (const ListBatch& b : plan_list_batches(empty, *queries_, order, {16, 0}))
    for (DocId h : b.horizon) ASSERT_EQ(h, 0u);
  check_batches(shard(), empty, *queries_, {16, 4096});
}

// Batches planned in storage a previous call left (the GPU engine reuses its last call's) are
// the batches planned afresh: larger and smaller calls, shipping regions, ship_tails and caches
// in turn, so that every reused batch held more, or less, than it holds now.
TEST_F(ListCacheTest, BatchesPlannedInReusedStorageEqualFreshOnes) {
  const DeviceBlockNumbering n(shard());
  const CachePlan p = plan(CachePolicy::kVfb, index_bytes() / 10, 0.5);
  ListCacheDirectory cache(shard(), n, index_bytes() / 10);
  cache.apply(p.shards[0].lists);
  ListCacheDirectory empty(shard(), n, 0);
  struct Case {
    const ListCacheDirectory* cache;
    ListBatchOptions options;
    std::size_t queries;
  };
  const std::vector<Case> cases = {{&cache, {64, index_bytes() / 100}, queries_->size()},
                                   {&cache, {4096, index_bytes()}, 40},
                                   {&empty, {64, index_bytes() / 400}, queries_->size()},
                                   {&cache, {4096, 2 * index_bytes(), true}, queries_->size()},
                                   {&empty, {16, 0}, 100},
                                   {&cache, {32, index_bytes() / 400, true}, queries_->size()}};
  std::vector<ListBatch> storage;
  std::size_t reused = 0;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    const std::span<const Query> qs(queries_->data(), k.queries);
    std::vector<std::size_t> order(qs.size());
    std::iota(order.rbegin(), order.rend(), std::size_t(0));  // another order than the last
    if (c % 2) std::iota(order.begin(), order.end(), std::size_t(0));
    reused += storage.size();
    std::vector<ListBatch> again = plan_list_batches(*k.cache, qs, order, k.options, &storage);
    const std::vector<ListBatch> fresh = plan_list_batches(*k.cache, qs, order, k.options);
    ASSERT_EQ(again.size(), fresh.size()) << "case " << c;
    for (std::size_t i = 0; i < fresh.size(); ++i) {
      const ListBatch &a = again[i], &b = fresh[i];
      const std::string at = "case " + std::to_string(c) + ", batch " + std::to_string(i);
      EXPECT_EQ(a.begin, b.begin) << at;
      EXPECT_EQ(a.end, b.end) << at;
      EXPECT_EQ(a.horizon, b.horizon) << at;
      ASSERT_EQ(a.shipped.size(), b.shipped.size()) << at;
      for (std::size_t j = 0; j < b.shipped.size(); ++j) {
        EXPECT_EQ(a.shipped[j].term, b.shipped[j].term) << at;
        EXPECT_EQ(a.shipped[j].blocks, b.shipped[j].blocks) << at;
        EXPECT_EQ(a.shipped[j].copy.host_word_begin, b.shipped[j].copy.host_word_begin) << at;
        EXPECT_EQ(a.shipped[j].copy.words, b.shipped[j].copy.words) << at;
        EXPECT_EQ(a.shipped[j].copy.pool_word_offset, b.shipped[j].copy.pool_word_offset) << at;
      }
      auto same_entries = [&](const std::vector<OffsetPatch>& x, const std::vector<OffsetPatch>& y) {
        ASSERT_EQ(x.size(), y.size()) << at;
        for (std::size_t j = 0; j < x.size(); ++j) {
          EXPECT_EQ(x[j].slot, y[j].slot) << at;
          EXPECT_EQ(x[j].word_offset, y[j].word_offset) << at;
        }
      };
      same_entries(a.patches, b.patches);
      same_entries(a.restores, b.restores);
      EXPECT_EQ(a.shipped_words, b.shipped_words) << at;
      EXPECT_EQ(a.blocks_hit, b.blocks_hit) << at;
      EXPECT_EQ(a.blocks_shipped, b.blocks_shipped) << at;
      EXPECT_EQ(a.blocks_unavailable, b.blocks_unavailable) << at;
      EXPECT_EQ(a.bytes_hit, b.bytes_hit) << at;
      EXPECT_EQ(a.bytes_shipped, b.bytes_shipped) << at;
      EXPECT_EQ(a.bytes_unavailable, b.bytes_unavailable) << at;
      EXPECT_EQ(a.truncated_queries, b.truncated_queries) << at;
      // What the GPU sees of every term of the batch's queries.
      for (std::size_t pos = b.begin; pos < b.end; ++pos)
        for (TermId t : qs[order[pos]].terms)
          EXPECT_EQ(a.available_blocks(*k.cache, t), b.available_blocks(*k.cache, t)) << at;
    }
    for (ListBatch& b : again) storage.push_back(std::move(b));
  }
  EXPECT_GT(reused, 10u) << "the cases should reuse batches";
}

// The CPU twin against the reference on the test log; returns (checks, post-processed).
std::pair<std::size_t, std::uint64_t> check_twin(const Index& index, const std::vector<Query>& qs,
                                                 const ListCacheDirectory& cache,
                                                 const ListBatchOptions& batching,
                                                 const SearchParams& params,
                                                 const std::vector<ReferenceAnswer>& refs,
                                                 const std::string& what, double scale = 1.0,
                                                 std::size_t* failures = nullptr) {
  CachedCpuEngine twin(index.shard(0), index.shard_id(0), cache, batching);
  twin.set_bound_scale(scale);
  std::vector<ShardResult> out(qs.size());
  twin.search(qs, params, out);
  std::size_t checks = 0;
  for (std::size_t i = 0; i < qs.size(); ++i) {
    const ShardResult* r = &out[i];
    const QueryResult merged =
        merge_shard_results(params, std::span<const ShardResult* const>(&r, 1));
    const auto diff = compare_top_k(refs[i].hits, refs[i].total_matches, params.k, merged.hits);
    if (failures) {
      if (diff) ++*failures;
    } else {
      EXPECT_FALSE(diff.has_value()) << what << " query " << qs[i].id << ": " << diff.value_or("");
    }
    ++checks;
  }
  return {checks, twin.counters().post_processed};
}

TEST_F(ListCacheTest, CpuTwinIsExactForEveryPolicyLambdaBudgetModeAndScoring) {
  const DeviceBlockNumbering n(shard());
  std::vector<Query> qs(queries_->begin(),
                        queries_->begin() + std::min<std::size_t>(120, queries_->size()));
  // The smallest block of the shard: a cache of one block.
  std::uint64_t one_block = ~0ull;
  for (TermId t = 0; t < shard().num_terms(); ++t)
    if (shard().term(t).num_blocks > 0)
      one_block = std::min(one_block, blocks_bytes(shard(), shard().term(t).first_block, 1));
  struct PlanCase {
    CachePolicy policy;
    double lambda;
  };
  const std::vector<PlanCase> plans = {{CachePolicy::kVfb, 0.1},
                                       {CachePolicy::kVfb, 0.5},
                                       {CachePolicy::kVfb, 1.0},
                                       {CachePolicy::kQtf, 1.0},
                                       {CachePolicy::kQtfDf, 1.0}};
  const std::vector<std::uint64_t> budgets = {0, one_block, index_bytes() / 10,
                                              index_bytes() * 2 / 5};
  std::map<std::string, std::uint64_t> post_processed;  // per mode and scoring
  std::size_t checks = 0;
  for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
    for (Scoring scoring : {Scoring::kBm25, Scoring::kBm25Pr}) {
      const SearchParams params{mode, scoring, 0.3, 10};
      std::vector<ReferenceAnswer> refs;
      for (const Query& q : qs) refs.push_back(reference_answer(*index_, q, params, 40));
      const std::string setting =
          std::string(to_string(mode)) + " " + std::string(to_string(scoring));
      for (const PlanCase& pc : plans) {
        for (std::uint64_t budget : budgets) {
          ListCacheDirectory cache(shard(), n, budget);
          if (budget > 0) cache.apply(plan(pc.policy, budget, pc.lambda).shards[0].lists);
          if (budget == one_block) {
            EXPECT_LE(cache.cached_blocks_total(), 1u);
          }
          // Shipping regions: none, a small one (lists cut), room for everything; lists cached
          // in part kept as prefixes or shipped whole where they fit.
          const std::uint64_t small = index_bytes() / 200, all = 2 * index_bytes();
          for (const ListBatchOptions& o :
               {ListBatchOptions{32, 0}, ListBatchOptions{32, small},
                ListBatchOptions{32, small, true}, ListBatchOptions{32, all},
                ListBatchOptions{32, all, true}}) {
            const std::string what =
                setting + " " + std::string(to_string(pc.policy)) + " lambda " +
                std::to_string(pc.lambda) + " budget " + std::to_string(budget) + " ship " +
                std::to_string(o.ship_capacity_bytes) + (o.ship_tails ? " tails" : "");
            const auto [c, pp] = check_twin(*index_, qs, cache, o, params, refs, what);
            checks += c;
            post_processed[setting] += pp;
          }
        }
      }
    }
  }
  EXPECT_GT(checks, 10000u);
  for (const auto& [setting, count] : post_processed)
    EXPECT_GT(count, 100u) << setting << ": post-processing was not exercised";
}

TEST_F(ListCacheTest, AWeakenedFinalityBoundGivesWrongAnswers) {
  const DeviceBlockNumbering n(shard());
  const CachePlan p = plan(CachePolicy::kVfb, index_bytes() / 10, 0.5);
  ListCacheDirectory cache(shard(), n, index_bytes() / 10);
  cache.apply(p.shards[0].lists);
  std::size_t wrong = 0;
  for (Mode mode : {Mode::kAnd, Mode::kOr}) {
    const SearchParams params{mode, Scoring::kBm25, 0.3, 10};
    std::vector<ReferenceAnswer> refs;
    for (const Query& q : *queries_) refs.push_back(reference_answer(*index_, q, params, 40));
    check_twin(*index_, *queries_, cache, {32, index_bytes() / 200}, params, refs, "weakened", 0.5,
               &wrong);
  }
  EXPECT_GT(wrong, 0u) << "halving the bound past the horizon should lose documents";
}

}  // namespace
