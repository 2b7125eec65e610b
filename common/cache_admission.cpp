#include "common/cache_admission.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <memory>
#include <numeric>
#include <queue>

#include <tbb/parallel_for.h>

#include "common/lazy_list.hpp"
#include "common/scoring.hpp"
#include "common/serving_gaps.hpp"
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

// The budget a log leaves unused, filled with whole lists no query of it asked for, longest
// first (a term's chance to be asked for grows with its document frequency, and a long list costs
// the most to ship). H200, 2.5M documents at 2.5x the cache budget: the training log's lists all
// fit in 0.35 of a cache of 0.6 M, and the test queries' other lists shipped 14 MB a launch of
// 4,096 (session 39); on the build machine this fill cut the bytes 10,000 test queries ship from
// 56.7 to 18.2 MB (shortest first: 56.6). Where the spare is under 1% of the budget (every cache
// smaller than the log's lists) it does nothing, so that a plan costs no pass over the terms.
template <typename Step>
void fill_spare_budget(const ShardIndex& shard, std::uint64_t budget, std::uint64_t& used,
                       std::map<TermId, std::uint32_t>& cached, std::vector<TermId>& admission_order,
                       Step&& step) {
  if (used >= budget || budget - used < budget / 100) return;
  const auto offsets = shard.block_offsets();
  auto list_bytes = [&](const TermInfo& ti) {
    return cached_block_bytes(offsets[ti.first_block + ti.num_blocks] - offsets[ti.first_block]);
  };
  // Lists by the bit width of their length, bytes per width (cached lists counted too: an
  // over-count), so that only the longest lists, twice the spare budget's worth, are sorted.
  std::array<std::uint64_t, 33> width_bytes{};
  const TermId n = shard.num_terms();
  for (TermId t = 0; t < n; ++t) {
    step();  // a pass over every term (5.6M at 2.5M documents): pause points for the online policy
    const TermInfo& ti = shard.term(t);
    if (ti.num_blocks > 0) width_bytes[std::bit_width(ti.df_shard)] += list_bytes(ti);
  }
  const std::uint64_t wanted = 2 * (budget - used) + used;
  unsigned min_width = 32;
  for (std::uint64_t sum = 0; min_width > 0; --min_width) {
    sum += width_bytes[min_width];
    if (sum >= wanted) break;
  }
  std::vector<TermId> candidates;
  for (TermId t = 0; t < n; ++t) {
    step();
    const TermInfo& ti = shard.term(t);
    if (ti.num_blocks > 0 && std::bit_width(ti.df_shard) >= min_width && !cached.contains(t))
      candidates.push_back(t);
  }
  std::sort(candidates.begin(), candidates.end(), [&](TermId a, TermId b) {
    const std::uint32_t da = shard.term(a).df_shard, db = shard.term(b).df_shard;
    return da != db ? da > db : a < b;
  });
  for (TermId t : candidates) {
    step();
    const TermInfo& ti = shard.term(t);
    const std::uint64_t bytes = list_bytes(ti);
    if (used + bytes > budget) continue;  // a shorter one may fit
    used += bytes;
    cached[t] = ti.num_blocks;
    admission_order.push_back(t);
  }
}

}  // namespace

std::uint64_t blocks_bytes(const ShardIndex& shard, std::uint64_t first, std::uint64_t count) {
  const auto offsets = shard.block_offsets();
  return cached_block_bytes(offsets[first + count] - offsets[first]);
}

std::vector<ListRead> simulate_and_reads(const ShardIndex& shard, const Query& q, unsigned k,
                                         Scoring scoring) {
  std::vector<ListRead> reads;
  const std::size_t u = q.terms.size();
  if (u == 0) return reads;
  for (TermId t : q.terms)
    if (shard.term(t).num_blocks == 0) return reads;  // an empty AND: the engine reads nothing
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
  std::vector<std::unique_ptr<LazyList>> lists;
  for (std::size_t i = 0; i < u; ++i)
    lists.push_back(std::make_unique<LazyList>(shard, q.terms[order[i]]));
  std::vector<DocId> read_to(u, kNoDoc);
  std::vector<std::uint32_t> tf(u);
  std::priority_queue<double, std::vector<double>, std::greater<>> top;  // the k best scores
  const auto gs = shard.global_scores();
  const auto lengths = shard.doc_lengths();
  const auto pr = shard.pagerank();
  bool stopped = false;
  LazyList& driver = *lists[0];
  for (std::uint32_t j = 0; j < driver.num_blocks() && !stopped; ++j) {
    driver.load(j);
    for (unsigned c = 0; c < driver.count(); ++c) {
      const DocId d = driver.doc(c);
      if (factor && top.size() == k && *factor * double(gs[d]) * (1.0 + kBoundSlack) < top.top()) {
        stopped = true;  // early termination: no later document can enter the top-k
        break;
      }
      read_to[0] = d;
      tf[0] = driver.freq(c);
      bool in_all = true;
      for (std::size_t i = 1; i < u && in_all; ++i) {
        read_to[i] = d;
        in_all = lists[i]->seek(d) && lists[i]->current_doc() == d;
        if (in_all) tf[i] = lists[i]->current_freq();
      }
      if (!in_all || k == 0) continue;
      const double norm = length_norm(ip.bm25, lengths[d], ip.collection.avg_doc_length);
      double score = w.static_weight * double(pr[d]);
      for (std::size_t i = 0; i < u; ++i) score += w.term_weight[order[i]] * impact(tf[i], norm);
      if (top.size() < k) top.push(score);
      else if (score > top.top()) {
        top.pop();
        top.push(score);
      }
    }
  }
  for (std::size_t i = 0; i < u; ++i) {
    if (read_to[i] == kNoDoc) continue;
    const TermId t = q.terms[order[i]];
    reads.push_back({t, blocks_up_to(shard, shard.term(t), read_to[i])});
  }
  return reads;
}

std::vector<CachedList> admit_lists(const ShardIndex& shard, VisitLog& visits,
                                    const AdmissionOptions& o, ServingGaps* gaps) {
  // Pause points every few thousand steps (the online policy plans only between serving calls;
  // at 2.5M documents one admission sorts about a million candidate blocks).
  std::uint32_t steps = 0;
  auto step = [&] {
    if (gaps && (++steps & 4095u) == 0) gaps->pause_point();
  };
  const auto offsets = shard.block_offsets();
  auto block_bytes = [&](std::uint64_t b) {
    return cached_block_bytes(offsets[b + 1] - offsets[b]);
  };
  std::map<TermId, std::uint32_t> cached;  // term -> blocks admitted
  std::vector<TermId> admission_order;
  std::uint64_t used = 0;
  if (o.policy == CachePolicy::kVfb) {
    // Candidate blocks (term, j) with their visiting frequency vf = weight of prefixes longer
    // than j, taken most visited first (ties: the more queried term, then term and block), each
    // admitted where it continues its list's prefix and fits; a block that does not fit ends
    // its list's prefix (`closed`). Along a list vf never rises, so each list's candidates are
    // already in that order: merging the lists gives the order the sort gives.
    struct ListCandidates {
      TermId term = 0;
      double qf = 0;
      const std::vector<std::pair<std::uint32_t, double>>* lens = nullptr;  // longest first
      std::vector<double> cumulative;  // weight of the longest i prefixes
      std::uint32_t end = 0;           // blocks [0, end) may be candidates (lambda, visits)
      std::size_t covering = 0;        // prefixes [0, covering) are longer than `block`
      std::uint32_t block = 0;
      double vf = 0;
      std::uint64_t first_block = 0;  // the list's, in the shard
      std::uint32_t admitted = 0;     // blocks admitted (merge)
      // Moves to block j; false where no prefix covers it (or past `end`): the list's last.
      bool at(std::uint32_t j) {
        if (j >= end) return false;
        while (covering > 0 && (*lens)[covering - 1].first <= j) --covering;
        block = j;
        vf = cumulative[covering];
        return vf > 0.0;
      }
    };
    std::map<TermId, bool> closed;  // a block that did not fit ends its list's prefix
    std::vector<ListCandidates> lists;
    lists.reserve(visits.size());
    for (auto& [t, v] : visits) {
      auto& lens = v.prefixes;
      if (lens.empty()) continue;
      step();
      std::sort(lens.begin(), lens.end(),
                [](const auto& a, const auto& b) { return a.first > b.first; });
      ListCandidates c;
      c.term = t;
      c.qf = v.query_frequency;
      c.lens = &lens;
      c.cumulative.assign(lens.size() + 1, 0.0);
      for (std::size_t i = 0; i < lens.size(); ++i)
        c.cumulative[i + 1] = c.cumulative[i] + lens[i].second;
      const TermInfo& ti = shard.term(t);
      const std::uint32_t cap =
          std::max<std::uint32_t>(1, static_cast<std::uint32_t>(o.lambda * double(ti.num_blocks)));
      c.end = std::min({cap, lens.front().first, ti.num_blocks});
      c.covering = lens.size();
      c.first_block = ti.first_block;
      if (c.at(0)) lists.push_back(std::move(c));
    }
    // a before b in admission order.
    auto before = [](double vf_a, double qf_a, TermId ta, std::uint32_t ja, double vf_b,
                     double qf_b, TermId tb, std::uint32_t jb) {
      if (vf_a != vf_b) return vf_a > vf_b;
      if (qf_a != qf_b) return qf_a > qf_b;
      if (ta != tb) return ta < tb;
      return ja < jb;
    };
    if (o.merge_candidates) {
      auto later = [&](std::size_t a, std::size_t b) {  // the heap's order: a after b
        const ListCandidates &x = lists[a], &y = lists[b];
        return before(y.vf, y.qf, y.term, y.block, x.vf, x.qf, x.term, x.block);
      };
      std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(later)> heap(later);
      for (std::size_t i = 0; i < lists.size(); ++i) heap.push(i);
      while (!heap.empty()) {
        const std::size_t i = heap.top();
        heap.pop();
        ListCandidates& c = lists[i];  // its blocks come in order: c.block is the next
        // The list's blocks in a run while they stay ahead of every other list's next one
        // (visiting frequencies change only where a visited prefix ends).
        for (;;) {
          step();
          const std::uint64_t bytes = block_bytes(c.first_block + c.block);
          if (used + bytes > o.budget_bytes) {
            closed[c.term] = true;
            break;
          }
          if (c.block == 0) admission_order.push_back(c.term);
          used += bytes;
          c.admitted = c.block + 1;
          if (!c.at(c.block + 1)) break;
          if (!heap.empty() && later(i, heap.top())) {
            heap.push(i);
            break;
          }
        }
      }
      for (const ListCandidates& c : lists)
        if (c.admitted > 0) cached[c.term] = c.admitted;
    } else {
      struct Candidate {
        double vf, qf;
        TermId term;
        std::uint32_t block;
      };
      std::vector<Candidate> candidates;
      for (ListCandidates& c : lists) {
        step();
        do candidates.push_back({c.vf, c.qf, c.term, c.block});
        while (c.at(c.block + 1));
      }
      std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
        step();
        return before(a.vf, a.qf, a.term, a.block, b.vf, b.qf, b.term, b.block);
      });
      for (const Candidate& c : candidates) {
        step();
        if (closed[c.term]) continue;
        std::uint32_t& have = cached[c.term];
        if (have != c.block) continue;  // keeps prefixes (vf never rises along a list)
        const std::uint64_t bytes = block_bytes(shard.term(c.term).first_block + c.block);
        if (used + bytes > o.budget_bytes) {
          closed[c.term] = true;
          continue;
        }
        if (have == 0) admission_order.push_back(c.term);
        used += bytes;
        ++have;
      }
    }
    // Blocks no training query visited are the last tie class (vf = 0), and ties go to the
    // more queried term (3.3.1): lists of queried terms grow past their visited prefix, most
    // queried first, while the budget and lambda allow. With a cache larger than the visited
    // blocks this keeps the lists where test queries read a little further than training ones.
    std::vector<std::pair<double, TermId>> by_frequency;
    for (const auto& [t, v] : visits)
      if (v.query_frequency > 0 && shard.term(t).num_blocks > 0) by_frequency.push_back({v.query_frequency, t});
    std::stable_sort(by_frequency.begin(), by_frequency.end(), [&](const auto& a, const auto& b) {
      step();
      return a.first > b.first;
    });
    for (const auto& [frequency, t] : by_frequency) {
      step();
      if (closed[t]) continue;
      const TermInfo& ti = shard.term(t);
      const auto& lens = visits.at(t).prefixes;
      const std::uint32_t cap =
          std::max<std::uint32_t>(1, static_cast<std::uint32_t>(o.lambda * double(ti.num_blocks)));
      const std::uint32_t visited = lens.empty() ? 0 : std::min(lens.front().first, ti.num_blocks);
      std::uint32_t& have = cached[t];
      if (have < std::min(visited, cap)) continue;  // its visited blocks did not all fit
      while (have < cap) {
        const std::uint64_t bytes = block_bytes(ti.first_block + have);
        if (used + bytes > o.budget_bytes) break;
        if (have == 0) admission_order.push_back(t);
        used += bytes;
        ++have;
      }
    }
  } else {
    std::vector<std::pair<double, TermId>> order;
    for (const auto& [t, v] : visits) {
      const TermInfo& ti = shard.term(t);
      if (ti.num_blocks == 0 || v.query_frequency <= 0) continue;
      order.push_back({o.policy == CachePolicy::kQtf ? v.query_frequency
                                                     : v.query_frequency / double(ti.df_shard),
                       t});
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [value, t] : order) {
      const TermInfo& ti = shard.term(t);
      const std::uint64_t bytes = blocks_bytes(shard, ti.first_block, ti.num_blocks);
      if (used + bytes > o.budget_bytes) continue;  // whole lists only
      used += bytes;
      cached[t] = ti.num_blocks;
      admission_order.push_back(t);
    }
  }
  // Whole lists only: vfb with lambda < 1 caps every list, and leaves the spare budget empty.
  if (o.fill_spare && (o.policy != CachePolicy::kVfb || o.lambda >= 1.0))
    fill_spare_budget(shard, o.budget_bytes, used, cached, admission_order, step);
  std::vector<CachedList> lists;
  lists.reserve(admission_order.size());
  for (TermId t : admission_order) {
    const std::uint32_t blocks = cached[t];
    if (blocks == 0) continue;
    lists.push_back({t, blocks, blocks_bytes(shard, shard.term(t).first_block, blocks)});
  }
  return lists;
}

std::vector<CachedList> plan_shard_cache(const ShardIndex& shard, std::span<const Query> training,
                                         const AdmissionOptions& options, unsigned k,
                                         Scoring scoring) {
  std::vector<std::vector<ListRead>> reads(training.size());
  tbb::parallel_for(std::size_t(0), training.size(), [&](std::size_t i) {
    reads[i] = simulate_and_reads(shard, training[i], k, scoring);
  });
  VisitLog visits;
  for (std::size_t i = 0; i < training.size(); ++i) {
    for (TermId t : training[i].terms) visits[t].query_frequency += 1;
    for (const ListRead& r : reads[i]) visits[r.term].prefixes.push_back({r.blocks, 1.0});
  }
  return admit_lists(shard, visits, options);
}

}  // namespace gpusearch
