#include "isn/cpu_engine/cpu_engine.hpp"

#include <algorithm>
#include <atomic>
#include <functional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include "common/scoring.hpp"
#include "isn/cpu_engine/daat_algorithms.hpp"
#include "isn/cpu_engine/threshold_seed.hpp"
#include "isn/cpu_engine/windowed_maxscore.hpp"

namespace gpusearch::cpu {

namespace {
// Lists of at least this many postings (two blocks or more) have their seed bound in the
// KthImpactTable; shorter ones are one block, decoded per query (exact for their term).
constexpr std::uint32_t kTableMinDf = kBlockSize + 1;
}  // namespace

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kExhaustive:
      return "exhaustive";
    case Algorithm::kWand:
      return "wand";
    case Algorithm::kBmw:
      return "bmw";
    case Algorithm::kMaxScore:
      return "maxscore";
    case Algorithm::kMaxScoreDaat:
      return "maxscore-daat";
  }
  return "?";
}

std::vector<std::string> algorithm_names() {
  return {"exhaustive", "wand", "bmw", "maxscore", "maxscore-daat"};
}

Algorithm parse_algorithm(std::string_view s) {
  if (s.empty()) return kDefaultAlgorithm;
  for (Algorithm a : {Algorithm::kExhaustive, Algorithm::kWand, Algorithm::kBmw,
                      Algorithm::kMaxScore, Algorithm::kMaxScoreDaat})
    if (s == to_string(a)) return a;
  if (s == "or" || s == "ranked-or") return Algorithm::kExhaustive;
  if (s == "block-max-wand") return Algorithm::kBmw;
  if (s == "block-max-maxscore") return Algorithm::kMaxScore;
  throw InputError(
      "--algorithm", 0,
      fmt::format("unknown cpu algorithm '{}' ({})", s, fmt::join(algorithm_names(), ", ")));
}

CpuEngine::CpuEngine(const ShardIndex& shard, std::uint32_t shard_id, CpuEngineOptions options)
    : shard_(shard), shard_id_(shard_id), options_(options) {
  options_.intra_query_threads = std::max(1u, options_.intra_query_threads);
  const auto gs = shard.global_scores();
  gs_coarse_.resize((gs.size() + kGsStride - 1) / kGsStride);
  for (std::size_t i = 0; i < gs_coarse_.size(); ++i) gs_coarse_[i] = gs[i * kGsStride];
  const auto pr = shard.pagerank();
  pagerank_suffix_max_.assign(gs_coarse_.size(), 0.0f);
  for (std::size_t i = pr.size(); i-- > 0;) {
    float& m = pagerank_suffix_max_[i / kGsStride];
    m = std::max(m, pr[i]);
  }
  for (std::size_t i = pagerank_suffix_max_.size(); i-- > 1;)
    pagerank_suffix_max_[i - 1] = std::max(pagerank_suffix_max_[i - 1], pagerank_suffix_max_[i]);
  const IndexParams& ip = shard.params();
  const auto lengths = shard.doc_lengths();
  norms_.resize(lengths.size());
  for (std::size_t d = 0; d < lengths.size(); ++d)
    norms_[d] = length_norm(ip.bm25, lengths[d], ip.collection.avg_doc_length);
  {
    // Distinct lengths in increasing order, and each document's code (the index of its length).
    std::uint32_t max_length = 0;
    for (std::uint32_t l : lengths) max_length = std::max(max_length, l);
    std::vector<std::uint32_t> distinct;
    std::vector<std::int32_t> code_of;  // by length, where lengths are small enough to index
    if (max_length < (1u << 24)) {
      code_of.assign(std::size_t(max_length) + 1, -1);
      for (std::uint32_t l : lengths) code_of[l] = 0;
      for (std::uint32_t l = 0; l <= max_length; ++l)
        if (code_of[l] == 0 && distinct.size() <= 65536) {
          code_of[l] = std::int32_t(distinct.size());
          distinct.push_back(l);
        }
    } else {
      distinct.assign(lengths.begin(), lengths.end());
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    }
    if (!lengths.empty() && distinct.size() <= 65536) {
      norm_table_.resize(distinct.size());
      for (std::size_t i = 0; i < distinct.size(); ++i)
        norm_table_[i] = length_norm(ip.bm25, distinct[i], ip.collection.avg_doc_length);
      norm_codes_.resize(lengths.size());
      for (std::size_t d = 0; d < lengths.size(); ++d)
        norm_codes_[d] = std::uint16_t(
            code_of.empty()
                ? std::lower_bound(distinct.begin(), distinct.end(), lengths[d]) - distinct.begin()
                : code_of[lengths[d]]);
    }
  }
  {
    const auto block_max = shard.block_max_impact();
    best_block_.resize(shard.num_terms());
    for (TermId t = 0; t < shard.num_terms(); ++t) {
      const TermInfo& info = shard.term(t);
      const float* m = block_max.data() + info.first_block;
      best_block_[t] = std::uint32_t(std::max_element(m, m + info.num_blocks) - m);
    }
  }
  // (Exhaustive OR never seeds: no table.)
  if (options_.seed_blocks_per_term > 0 && options_.seed_from_kth_impacts &&
      options_.algorithm != Algorithm::kExhaustive)
    kth_impacts_ = std::make_unique<KthImpactTable>(shard, kTableMinDf);
  // GS bounds are exact only over a GS-ordered shard; the index promises it, check anyway.
  gs_ordered_ = std::is_sorted(gs.begin(), gs.end(), std::greater<float>());
}

namespace {

void merge_into(std::vector<RankedDoc>& all, std::size_t k) {
  const auto before = [](const RankedDoc& a, const RankedDoc& b) { return ranks_before(a, b); };
  const std::size_t n = std::min(k, all.size());
  // One range and no running documents: already in order (TopK::take_sorted).
  if (!std::is_sorted(all.begin(), all.end(), before))
    std::partial_sort(all.begin(), all.begin() + std::ptrdiff_t(n), all.end(), before);
  all.resize(n);
}

// run_range's vectors, one set per thread, reused from run to run: a run is a leaf of the
// engine's work (no oneTBB wait inside it, so no other run starts on its thread before it ends).
// Four quarter shards make four times one shard's runs a query; their allocations were 3% of the
// instructions (issue 16, bench_shared_shards under callgrind).
struct RunScratch {
  std::vector<std::uint32_t> dfs;
  QueryWeights weights;
  std::vector<PostingCursor> cursors;
  std::vector<std::uint32_t> best_blocks;  // starting_threshold
};
thread_local RunScratch run_scratch;

// The k-th best score of a running top-k, or -inf when it holds fewer than k documents.
double kth_score(std::span<const RankedDoc> running, std::size_t k) {
  if (k == 0 || running.size() < k) return -std::numeric_limits<double>::infinity();
  std::vector<RankedDoc> v(running.begin(), running.end());
  merge_into(v, k);
  return v.back().score;
}

}  // namespace

CpuEngine::ModeRun CpuEngine::run_range(const Query& query, const SearchParams& params,
                                        bool conjunctive, DocId begin, DocId end,
                                        SharedThreshold& shared, bool concurrent, bool whole_shard,
                                        QueryCounters& counters) const {
  const IndexParams& ip = shard_.params();
  RunScratch& scratch = run_scratch;
  std::vector<std::uint32_t>& dfs = scratch.dfs;
  dfs.clear();
  for (TermId t : query.terms) dfs.push_back(shard_.term(t).df_global);
  QueryWeights& w = scratch.weights;
  make_query_weights(w, params.scoring, params.alpha, ip.bm25, ip.collection.num_docs, dfs);

  QueryContext ctx;
  ctx.shard = &shard_;
  ctx.shard_id = shard_id_;
  ctx.num_docs = shard_.num_docs();
  ctx.range_end = std::min(end, ctx.num_docs);
  ctx.norms = norms_.data();
  if (!norm_codes_.empty()) {
    ctx.norm_codes = norm_codes_.data();
    ctx.norm_table = norm_table_.data();
  }
  ctx.pagerank = shard_.pagerank().data();
  ctx.gs_coarse = gs_coarse_.data();
  ctx.pagerank_suffix_max = pagerank_suffix_max_.data();
  ctx.ranks = shard_.global_ranks().data();
  ctx.static_weight = w.static_weight;
  ctx.index_alpha = gs_ordered_ ? ip.gs_alpha : 0.0;  // 0: static part bounded by its weight
  if (options_.gs_early_termination && gs_ordered_) ctx.gs_factor = gs_bound_factor(w, ip.gs_alpha);

  std::vector<PostingCursor>& cursors = scratch.cursors;
  cursors.resize(query.terms.size());
  for (std::size_t i = 0; i < cursors.size(); ++i)
    cursors[i].open(shard_, query.terms[i], w.term_weight[i], begin, end, &counters,
                    options_.bound_scale);

  TopK top(params.k, &shared, concurrent, shard_.global_ranks().data(),
           options_.shared_threshold_refresh);
  RunStats stats;
  const Algorithm a = options_.algorithm;
  if (conjunctive) {
    stats = ranked_and(ctx, cursors, top, counters, a != Algorithm::kExhaustive);
  } else {
    // Pruning OR algorithms start from a lower bound of the k-th score (threshold_seed.hpp).
    if (a != Algorithm::kExhaustive && options_.seed_blocks_per_term > 0)
      top.raise_floor(starting_threshold(query, params, ctx, cursors, whole_shard,
                                         shared.has_external(), top.threshold()));
    switch (a) {
      case Algorithm::kExhaustive:
        stats = ranked_or(ctx, cursors, top, counters);
        break;
      case Algorithm::kWand:
        stats = wand(ctx, cursors, top, counters);
        break;
      case Algorithm::kBmw:
        stats = block_max_wand(ctx, cursors, top, counters);
        break;
      case Algorithm::kMaxScore: {
        std::uint64_t postings = 0;
        for (const PostingCursor& c : cursors) postings += c.df();
        if (cursors.size() == 1)
          stats = single_list_top_k(ctx, cursors[0], top, counters);
        else if (postings * options_.daat_docs_per_posting < ctx.num_docs)
          stats = block_max_maxscore(ctx, cursors, top, counters);
        else
          stats = windowed_maxscore(
              ctx, cursors, top, counters,
              options_.window_docs ? options_.window_docs : window_docs_for(ctx.num_docs));
        break;
      }
      case Algorithm::kMaxScoreDaat:
        stats = block_max_maxscore(ctx, cursors, top, counters);
        break;
    }
  }
  for (PostingCursor& c : cursors) c.finish();
  return {top.take_sorted(shard_id_), stats.and_matches, stats.early_terminated};
}

double CpuEngine::starting_threshold(const Query& query, const SearchParams& params,
                                     const QueryContext& ctx,
                                     std::span<const PostingCursor> cursors,
                                     bool whole_shard, bool sharing, double known) const {
  double floor = -std::numeric_limits<double>::infinity();
  std::uint32_t below_df = std::numeric_limits<std::uint32_t>::max();
  // Sharing with the node's other shards: the collection's bounds (set_collection_seeds).
  const KthImpactTable* table =
      sharing && collection_seeds_ ? collection_seeds_.get() : kth_impacts_.get();
  if (table && kth_impacts_ && whole_shard && params.k <= KthImpactTable::kLadder.back()) {
    // A long list's k-th largest impact (bounded below) times its weight: k documents of the
    // shard score at least that much for that term alone, so at least that much in all (the
    // scores add non-negative parts with monotone rounding; the float is rounded down). Short
    // lists (not in the table) decode their best block as below.
    for (std::size_t i = 0; i < cursors.size(); ++i) {
      const double b = table->lower_bound(query.terms[i], params.k);
      if (b > 0) floor = std::max(floor, cursors[i].weight() * b);
    }
    below_df = kTableMinDf;
  }
  std::vector<std::uint32_t>& best = run_scratch.best_blocks;  // called inside run_range
  best.resize(query.terms.size());
  for (std::size_t i = 0; i < best.size(); ++i) best[i] = best_block_[query.terms[i]];
  return seed_threshold(ctx, cursors, params.k, options_.seed_blocks_per_term, options_.seed_scale,
                        best, floor, below_df, known);
}

CpuEngine::ModeRun CpuEngine::run_mode(const Query& query, const SearchParams& params,
                                       bool conjunctive, DocId from_doc,
                                       std::span<const RankedDoc> running, QueryCounters& counters,
                                       const ThresholdSlot& external,
                                       const ThresholdSlot& moot) const {
  ModeRun result;
  result.hits.assign(running.begin(), running.end());
  const DocId n = shard_.num_docs();
  if (query.terms.empty() || params.k == 0 || from_doc >= n) {
    merge_into(result.hits, params.k);
    return result;
  }
  SharedThreshold shared(external, moot);
  shared.raise(kth_score(running, params.k));

  // Equal docID ranges of at least 1024 documents each.
  const DocId span = n - from_doc;
  const unsigned parts =
      std::max(1u, std::min<unsigned>(options_.intra_query_threads, span / 1024));
  if (parts == 1) {
    // With an external slot other processes raise the threshold while this part runs.
    ModeRun r = run_range(query, params, conjunctive, from_doc, kNoDoc, shared,
                          shared.has_external(), from_doc == 0, counters);
    result.hits.insert(result.hits.end(), r.hits.begin(), r.hits.end());
    result.and_matches = r.and_matches;
    result.early_terminated = r.early_terminated;
  } else {
    std::vector<ModeRun> runs(parts);
    std::vector<QueryCounters> part_counters(parts);
    tbb::parallel_for(0u, parts, [&](unsigned p) {
      const DocId b = from_doc + DocId(std::uint64_t(span) * p / parts);
      const DocId e =
          p + 1 == parts ? kNoDoc : from_doc + DocId(std::uint64_t(span) * (p + 1) / parts);
      runs[p] = run_range(query, params, conjunctive, b, e, shared, true, from_doc == 0,
                          part_counters[p]);
    });
    for (unsigned p = 0; p < parts; ++p) {
      result.hits.insert(result.hits.end(), runs[p].hits.begin(), runs[p].hits.end());
      result.and_matches += runs[p].and_matches;
      result.early_terminated = result.early_terminated || runs[p].early_terminated;
      counters.add(part_counters[p]);
    }
  }
  merge_into(result.hits, params.k);
  return result;
}

void CpuEngine::set_collection_seeds(std::shared_ptr<const KthImpactTable> table) {
  if (table && table->num_terms() != shard_.num_terms())
    throw Error(fmt::format("set_collection_seeds: a table of {} terms for a shard of {}",
                            table->num_terms(), shard_.num_terms()));
  collection_seeds_ = std::move(table);
}

ShardResult CpuEngine::resume(const Query& query, const SearchParams& params, DocId from_doc,
                              const ShardResult& running) const {
  return resume_sharing(query, params, from_doc, running, QueryThresholdSlots{});
}

ShardResult CpuEngine::resume_sharing(const Query& query, const SearchParams& params,
                                      DocId from_doc, const ShardResult& running,
                                      const QueryThresholdSlots& shared) const {
  ShardResult r;
  bool early = false;
  switch (params.mode) {
    case Mode::kAnd:
    case Mode::kOr: {
      const bool conjunctive = params.mode == Mode::kAnd;
      ModeRun m = run_mode(query, params, conjunctive, from_doc, running.hits, r.counters,
                           shared.of(conjunctive));
      r.hits = std::move(m.hits);
      early = m.early_terminated;
      break;
    }
    case Mode::kAndOr:
      and_phase_sharing(query, params, from_doc, running, shared, r, early);
      or_phase_sharing(query, params, from_doc, running, shared, r, early);
      break;
  }
  r.counters.early_terminations = early ? 1 : 0;
  return r;
}

void CpuEngine::and_phase_sharing(const Query& query, const SearchParams& params, DocId from_doc,
                                  const ShardResult& running, const QueryThresholdSlots& shared,
                                  ShardResult& r, bool& early) const {
  ModeRun a = run_mode(query, params, true, from_doc, running.hits, r.counters, shared.conjunctive);
  r.hits = std::move(a.hits);
  r.and_matches = running.and_matches + a.and_matches;
  early = early || a.early_terminated;
}

void CpuEngine::or_phase_sharing(const Query& query, const SearchParams& params, DocId from_doc,
                                 const ShardResult& running, const QueryThresholdSlots& shared,
                                 ShardResult& r, bool& early) const {
  // A finite shared AND threshold: some shard holds k AND matches, or the shards' published AND
  // matches come to k, so the query's answer is the AND answer and this shard's OR top-k would
  // be dropped.
  auto and_answer_certain = [&] {
    return shared.conjunctive.get() > -std::numeric_limits<double>::infinity();
  };
  if (r.and_matches >= params.k || and_answer_certain()) return;
  // The OR phase stops once another shard's AND matches complete the k (moot): its answer,
  // partial then, is dropped here, as the merge would drop a whole one.
  ModeRun o = run_mode(query, params, false, from_doc, running.or_hits, r.counters,
                       shared.disjunctive, shared.conjunctive);
  if (and_answer_certain()) {
    ++r.counters.or_phases_stopped;
    return;
  }
  r.or_hits = std::move(o.hits);
  early = early || o.early_terminated;
}

ShardResult CpuEngine::resume(const Query& query, const SearchParams& params, DocId from_doc,
                              std::span<const RankedDoc> running_top_k) const {
  if (params.mode == Mode::kAndOr)
    throw InputError("CpuEngine::resume", 0,
                     "and-or needs the running AND and OR answers (the ShardResult overload)");
  ShardResult running;
  running.hits.assign(running_top_k.begin(), running_top_k.end());
  return resume(query, params, from_doc, running);
}

ShardResult CpuEngine::search_range(const Query& query, const SearchParams& params, DocId begin,
                                    DocId end) const {
  ShardResult r;
  const DocId n = shard_.num_docs();
  if (query.terms.empty() || params.k == 0 || begin >= n || begin >= end) return r;
  bool early = false;
  auto run = [&](bool conjunctive) {
    SharedThreshold shared;
    ModeRun m = run_range(query, params, conjunctive, begin, end, shared, false,
                          begin == 0 && end >= n, r.counters);
    merge_into(m.hits, params.k);
    early = early || m.early_terminated;
    return m;
  };
  if (params.mode != Mode::kAndOr) {
    r.hits = run(params.mode == Mode::kAnd).hits;
  } else {
    ModeRun a = run(true);
    r.hits = std::move(a.hits);
    r.and_matches = a.and_matches;
    if (r.and_matches < params.k) r.or_hits = run(false).hits;
  }
  r.counters.early_terminations = early ? 1 : 0;
  return r;
}

ShardResult CpuEngine::search_one(const Query& query, const SearchParams& params) const {
  return resume(query, params, 0, ShardResult{});
}

ShardResult CpuEngine::search_one(const Query& query, const SearchParams& params,
                                  const QueryThresholdSlots& shared) const {
  if (params.candidates > 0 && (shared.conjunctive.linked() || shared.disjunctive.linked()))
    throw InputError("CpuEngine::search", 0,
                     "shared thresholds with two-stage ranking: each shard must keep its own "
                     "top candidates");
  return resume_sharing(query, params, 0, ShardResult{}, shared);
}

namespace {

// fn(q) for every query of the batch on the arena's threads.
template <class Fn>
void for_each_query(std::size_t n, const Fn& fn) {
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, 1),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      for (std::size_t q = range.begin(); q < range.end(); ++q) fn(q);
                    });
}

// fn(q) for every query of the batch, handed out in batch order, one at a time, to the arena's
// threads (CpuEngineOptions::sharing_in_batch_order). A batch then ends within one query's time
// of its last hand-out, where for_each_query's recursive split may leave a chunk of several
// queries to one thread; and the node's shards, which start the batch together, run each query
// at about the same moment. Measured on the H200 host (four ISNs, batch 1,024; NOTES-cluster.md,
// session 42): the batch's slowest ISN 1.1-1.4% over the four's mean compute instead of about 3%,
// but 2% more documents scored (a query's shards seldom find another's finished answer in the
// union), so no gain in throughput: off by default.
template <class Fn>
void for_each_query_in_order(std::size_t n, const Fn& fn) {
  std::atomic<std::size_t> next{0};
  const std::size_t workers =
      std::min<std::size_t>(n, std::size_t(std::max(1, tbb::this_task_arena::max_concurrency())));
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, workers, 1),
      [&](const tbb::blocked_range<std::size_t>&) {
        for (std::size_t q = next.fetch_add(1, std::memory_order_relaxed); q < n;
             q = next.fetch_add(1, std::memory_order_relaxed))
          fn(q);
      },
      tbb::simple_partitioner());
}

}  // namespace

void CpuEngine::search(std::span<const Query> queries, const SearchParams& params,
                       std::span<ShardResult> out, std::span<const QueryThresholdSlots> shared) {
  if (shared.size() != queries.size())
    throw InputError(
        "CpuEngine::search", 0,
        fmt::format("{} threshold slot pairs for {} queries", shared.size(), queries.size()));
  const bool linked = std::any_of(shared.begin(), shared.end(), [](const QueryThresholdSlots& s) {
    return s.conjunctive.linked() || s.disjunctive.linked();
  });
  // Every query of the batch through fn, in batch order where the shards share and that is asked.
  const auto each = [&](const auto& fn) {
    if (linked && options_.sharing_in_batch_order)
      for_each_query_in_order(queries.size(), fn);
    else
      for_each_query(queries.size(), fn);
  };
  if (params.mode != Mode::kAndOr || !linked || params.candidates > 0 ||
      !options_.sharing_and_phases_first) {
    each([&](std::size_t q) { out[q] = search_one(queries[q], params, shared[q]); });
    return;
  }
  // and-or shared between shards: every query's AND phase first, then the OR phases still
  // needed (CpuEngineOptions::sharing_and_phases_first). A shard with fewer than k AND matches
  // of its own cannot tell whether the other shards' complete the k until their AND phases
  // have published them; run right after its own AND phase, its OR phase was wasted in about
  // one query in eight on four quarter shards of the 1M synthetic index, and cost 4% of the
  // documents scored.
  const ShardResult none;
  std::vector<char> early(queries.size(), 0);
  each([&](std::size_t q) {
    out[q] = ShardResult{};
    bool e = false;
    and_phase_sharing(queries[q], params, 0, none, shared[q], out[q], e);
    early[q] = e;
  });
  each([&](std::size_t q) {
    bool e = early[q];
    or_phase_sharing(queries[q], params, 0, none, shared[q], out[q], e);
    out[q].counters.early_terminations = e ? 1 : 0;
  });
}

void CpuEngine::search(std::span<const Query> queries, const SearchParams& params,
                       std::span<ShardResult> out) {
  for_each_query(queries.size(), [&](std::size_t q) { out[q] = search_one(queries[q], params); });
}

}  // namespace gpusearch::cpu
