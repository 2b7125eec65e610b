#include "partition/cache_planner.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <queue>

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include "common/error.hpp"
#include "common/index_format.hpp"
#include "common/progress.hpp"
#include "common/query.hpp"
#include "common/scoring.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

namespace {

// Blocks of term t's list that a read up to docID `up_to` touches (a prefix of the list).
std::uint32_t blocks_up_to(const ShardIndex& shard, const TermInfo& t, DocId up_to) {
  const auto last = shard.block_last_docid();
  const auto* begin = last.data() + t.first_block;
  const auto* end = begin + t.num_blocks;
  const auto* it = std::lower_bound(begin, end, up_to);  // first block whose last >= up_to
  return static_cast<std::uint32_t>(std::min<std::ptrdiff_t>(it - begin + 1, t.num_blocks));
}

// The prefix (in blocks) of each of the query's lists that ranked AND with GS early
// termination reads: the shortest list up to the last candidate processed, every other list up
// to the last candidate that reached it (lists by increasing length, as the engine probes them).
std::vector<std::pair<TermId, std::uint32_t>> simulate_and_reads(const ShardIndex& shard,
                                                                 const Query& q,
                                                                 const CachePlanOptions& o) {
  std::vector<std::pair<TermId, std::uint32_t>> reads;
  const std::size_t u = q.terms.size();
  if (u == 0) return reads;
  for (TermId t : q.terms)
    if (shard.term(t).num_blocks == 0) return reads;  // an empty AND: the engine reads nothing
  const IndexParams& ip = shard.params();
  std::vector<std::uint32_t> dfs;
  for (TermId t : q.terms) dfs.push_back(shard.term(t).df_global);
  const QueryWeights w = make_query_weights(o.scoring, ip.gs_alpha, ip.bm25,
                                            ip.collection.num_docs, dfs);
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
  std::vector<std::uint32_t> tf(u);
  std::priority_queue<double, std::vector<double>, std::greater<>> top;  // the k best scores
  const auto gs = shard.global_scores();
  const auto lengths = shard.doc_lengths();
  const auto pr = shard.pagerank();
  const std::size_t n0 = shard.term(q.terms[order[0]]).df_shard;
  for (std::size_t c = 0; c < n0; ++c) {
    const DocId d = docs[0][c];
    if (factor && top.size() == o.k &&
        *factor * double(gs[d]) * (1.0 + kBoundSlack) < top.top())
      break;  // early termination: no later document can enter the top-k
    read_to[0] = d;
    tf[0] = freqs[0][c];
    bool in_all = true;
    for (std::size_t i = 1; i < u && in_all; ++i) {
      read_to[i] = d;
      const auto& l = docs[i];
      const std::size_t n = shard.term(q.terms[order[i]]).df_shard;
      pos[i] = std::size_t(std::lower_bound(l.begin() + pos[i], l.begin() + n, d) - l.begin());
      in_all = pos[i] < n && l[pos[i]] == d;
      if (in_all) tf[i] = freqs[i][pos[i]];
    }
    if (!in_all || o.k == 0) continue;
    const double norm = length_norm(ip.bm25, lengths[d], ip.collection.avg_doc_length);
    double score = w.static_weight * double(pr[d]);
    for (std::size_t i = 0; i < u; ++i) score += w.term_weight[order[i]] * impact(tf[i], norm);
    if (top.size() < o.k) top.push(score);
    else if (score > top.top()) {
      top.pop();
      top.push(score);
    }
  }
  for (std::size_t i = 0; i < u; ++i) {
    if (read_to[i] == kNoDoc) continue;
    const TermId t = q.terms[order[i]];
    reads.push_back({t, blocks_up_to(shard, shard.term(t), read_to[i])});
  }
  return reads;
}

}  // namespace

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
    const auto offsets = shard.block_offsets();
    auto block_bytes = [&](std::uint64_t b) { return cached_block_bytes(offsets[b + 1] - offsets[b]); };
    // Simulated block reads of every training query: per term, the prefix lengths.
    std::map<TermId, std::vector<std::uint32_t>> prefixes;
    {
      std::vector<std::vector<std::pair<TermId, std::uint32_t>>> per_query(queries.size());
      Progress progress(fmt::format("cache plan, shard {}: training queries", index.shard_id(si)),
                        queries.size(), "queries", o.progress);
      tbb::parallel_for(std::size_t(0), queries.size(), [&](std::size_t i) {
        per_query[i] = simulate_and_reads(shard, queries[i], o);
        progress.add(1);
      });
      progress.finish();
      for (const auto& reads : per_query)
        for (const auto& [t, blocks] : reads) prefixes[t].push_back(blocks);
    }
    std::map<TermId, std::uint32_t> cached;  // term -> blocks admitted
    std::uint64_t used = 0;
    if (o.policy == CachePolicy::kVfb) {
      // Candidate blocks (term, j) with their visiting frequency vf = #prefixes longer than j.
      struct Candidate {
        std::uint64_t vf, qf;
        TermId term;
        std::uint32_t block;
      };
      std::vector<Candidate> candidates;
      for (auto& [t, lens] : prefixes) {
        std::sort(lens.begin(), lens.end(), std::greater<>());
        const TermInfo& ti = shard.term(t);
        const std::uint32_t cap = std::max<std::uint32_t>(
            1, static_cast<std::uint32_t>(o.lambda * double(ti.num_blocks)));
        for (std::uint32_t j = 0; j < std::min(cap, lens.front()); ++j) {
          // lens is descending: the count of entries > j.
          const auto vf = std::uint64_t(
              std::upper_bound(lens.begin(), lens.end(), j, std::greater<>()) - lens.begin());
          candidates.push_back({vf, qf_of[t], t, j});
        }
      }
      std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
        if (a.vf != b.vf) return a.vf > b.vf;
        if (a.qf != b.qf) return a.qf > b.qf;
        if (a.term != b.term) return a.term < b.term;
        return a.block < b.block;
      });
      std::map<TermId, bool> closed;  // a block that did not fit ends its list's prefix
      for (const Candidate& c : candidates) {
        if (closed[c.term]) continue;
        std::uint32_t& have = cached[c.term];
        if (have != c.block) continue;  // keeps prefixes (vf never rises along a list)
        const std::uint64_t bytes = block_bytes(shard.term(c.term).first_block + c.block);
        if (used + bytes > o.budget_bytes) {
          closed[c.term] = true;
          continue;
        }
        used += bytes;
        ++have;
      }
    } else {
      std::vector<std::pair<double, TermId>> order;
      for (const auto& [t, f] : qf_of) {
        const TermInfo& ti = shard.term(t);
        if (ti.num_blocks == 0) continue;
        order.push_back({o.policy == CachePolicy::kQtf ? double(f) : double(f) / double(ti.df_shard), t});
      }
      std::stable_sort(order.begin(), order.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      for (const auto& [value, t] : order) {
        const TermInfo& ti = shard.term(t);
        std::uint64_t bytes = 0;
        for (std::uint32_t j = 0; j < ti.num_blocks; ++j) bytes += block_bytes(ti.first_block + j);
        if (used + bytes > o.budget_bytes) continue;  // whole lists only
        used += bytes;
        cached[t] = ti.num_blocks;
      }
    }
    ShardCachePlan sp;
    sp.shard = index.shard_id(si);
    for (const auto& [t, blocks] : cached) {
      if (blocks == 0) continue;
      const TermInfo& ti = shard.term(t);
      std::uint64_t bytes = 0;
      for (std::uint32_t j = 0; j < blocks; ++j) bytes += block_bytes(ti.first_block + j);
      sp.lists.push_back({t, blocks, bytes});
      sp.bytes += bytes;
      sp.blocks += blocks;
    }
    for (const auto& [t, lens] : prefixes) {
      const auto it = cached.find(t);
      const std::uint32_t have = it == cached.end() ? 0 : it->second;
      for (std::uint32_t len : lens) {
        sp.training_block_reads += len;
        sp.training_block_reads_cached += std::min(len, have);
      }
    }
    plan.shards.push_back(std::move(sp));
  }
  return plan;
}

}  // namespace gpusearch
