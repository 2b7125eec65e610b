#include "isn/cpu_engine/daat_algorithms.hpp"

#include <algorithm>
#include <array>
#include <vector>

namespace gpusearch::cpu {

namespace {

// Score of document d from every cursor standing on it, in query-term order (as the reference).
inline double score_in_term_order(const QueryContext& ctx, std::span<PostingCursor> terms,
                                  DocId d) {
  const double norm = ctx.norm(d);
  double s = 0;
  for (PostingCursor& c : terms)
    if (c.docid() == d) s += c.weight() * impact(c.freq(), norm);
  return s;
}

inline bool by_docid(const PostingCursor* a, const PostingCursor* b) {
  return a->docid() < b->docid();
}

// Cursors that hold at least one posting in the range.
std::vector<PostingCursor*> live_cursors(std::span<PostingCursor> terms) {
  std::vector<PostingCursor*> v;
  v.reserve(terms.size());
  for (PostingCursor& c : terms)
    if (c.docid() != kNoDoc) v.push_back(&c);
  return v;
}

// Restores docID order after ord[i] moved forward.
inline void bubble_up(std::vector<PostingCursor*>& ord, std::size_t i) {
  for (; i + 1 < ord.size() && ord[i]->docid() > ord[i + 1]->docid(); ++i)
    std::swap(ord[i], ord[i + 1]);
}

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

}  // namespace

RunStats ranked_or(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
                   QueryCounters& counters) {
  for (;;) {
    DocId d = kNoDoc;
    for (const PostingCursor& c : terms) d = std::min(d, c.docid());
    if (d == kNoDoc) break;
    const double norm = ctx.norm(d);
    double s = 0;
    for (PostingCursor& c : terms) {
      if (c.docid() != d) continue;
      s += c.weight() * impact(c.freq(), norm);
      c.next();
      ctx.prefetch(c.docid());  // the next candidate's length, a likely cache miss
    }
    ++counters.docs_scored;
    ctx.offer(top, d, s);
  }
  return {};
}

RunStats ranked_and(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
                    QueryCounters& counters, bool block_max) {
  RunStats stats;
  if (terms.empty()) return stats;
  std::vector<PostingCursor*> ord;
  for (PostingCursor& c : terms) ord.push_back(&c);
  // Shortest list leads: every other list is only probed at its candidates.
  std::sort(ord.begin(), ord.end(), [](auto* a, auto* b) { return a->df() < b->df(); });
  PostingCursor& lead = *ord[0];
  DocId d = lead.docid();
  for (PostingCursor* c : ord)
    if (c->docid() == kNoDoc) d = kNoDoc;
  while (d != kNoDoc) {
    if (block_max) {
      const double threshold = top.threshold();
      if (threshold > kMinusInf) {
        if (ctx.gs_stop(d, threshold)) {
          stats.early_terminated = true;
          break;
        }
        // Every document up to the first block end keeps the same (or a smaller) bound; skip
        // shallowly (no decoding) while the bound stays below the threshold.
        DocId next = d;
        for (;;) {
          double bound = ctx.static_bound(next);
          DocId bound_last = kNoDoc;
          for (PostingCursor* c : ord) {
            bound += c->block_max_score(next);
            bound_last = std::min(bound_last, c->block_max_last());
          }
          if (!(bound < threshold)) break;
          next = bound_last == kNoDoc ? kNoDoc : bound_last + 1;
          if (next >= ctx.num_docs) {
            next = kNoDoc;
            break;
          }
        }
        if (next != d) {
          if (next == kNoDoc) break;
          lead.next_geq(next);
          d = lead.docid();
          continue;
        }
      }
    }
    std::size_t i = 1;
    for (; i < ord.size(); ++i) {
      ord[i]->next_geq(d);
      if (ord[i]->docid() != d) break;
    }
    if (i < ord.size()) {
      if (ord[i]->docid() == kNoDoc) break;
      lead.next_geq(ord[i]->docid());
      d = lead.docid();
      continue;
    }
    ++stats.and_matches;
    ++counters.docs_scored;
    ctx.offer(top, d, score_in_term_order(ctx, terms, d));
    lead.next();
    d = lead.docid();
  }
  return stats;
}

// WAND's pivot over lists sorted by docID: the first list p at which the sum of the list upper
// bounds (plus the static part's bound) may reach the threshold. False when no list can: no
// document left can enter the top-k.
namespace {
bool find_pivot(const QueryContext& ctx, const std::vector<PostingCursor*>& ord, DocId first,
                double threshold, std::size_t& p) {
  double upper = ctx.static_bound(first);
  for (p = 0; p < ord.size() && ord[p]->docid() != kNoDoc; ++p) {
    upper += ord[p]->max_score();
    if (!(upper < threshold)) return true;
  }
  return false;
}
}  // namespace

RunStats wand(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
              QueryCounters& counters) {
  RunStats stats;
  std::vector<PostingCursor*> ord = live_cursors(terms);
  std::sort(ord.begin(), ord.end(), by_docid);
  while (!ord.empty() && ord[0]->docid() != kNoDoc) {
    const double threshold = top.threshold();
    const DocId first = ord[0]->docid();
    if (ctx.gs_stop(first, threshold)) {
      stats.early_terminated = true;
      break;
    }
    std::size_t p = 0;
    if (!find_pivot(ctx, ord, first, threshold, p)) {
      if (threshold > kMinusInf) stats.early_terminated = true;
      break;
    }
    const DocId pivot = ord[p]->docid();
    ctx.prefetch(pivot);
    if (first == pivot) {
      ++counters.docs_scored;
      ctx.offer(top, pivot, score_in_term_order(ctx, terms, pivot));
      for (PostingCursor* c : ord) {
        if (c->docid() != pivot) break;
        c->next();
      }
      std::sort(ord.begin(), ord.end(), by_docid);
    } else {
      std::size_t q = p;
      while (ord[q]->docid() == pivot) --q;
      ord[q]->next_geq(pivot);
      bubble_up(ord, q);
    }
  }
  return stats;
}

RunStats block_max_wand(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
                        QueryCounters& counters) {
  RunStats stats;
  std::vector<PostingCursor*> ord = live_cursors(terms);
  std::sort(ord.begin(), ord.end(), by_docid);
  while (!ord.empty() && ord[0]->docid() != kNoDoc) {
    const double threshold = top.threshold();
    const DocId first = ord[0]->docid();
    if (ctx.gs_stop(first, threshold)) {
      stats.early_terminated = true;
      break;
    }
    std::size_t p = 0;
    if (!find_pivot(ctx, ord, first, threshold, p)) {
      if (threshold > kMinusInf) stats.early_terminated = true;
      break;
    }
    const DocId pivot = ord[p]->docid();
    ctx.prefetch(pivot);
    while (p + 1 < ord.size() && ord[p + 1]->docid() == pivot) ++p;
    // Second check with the block maxima of the blocks that would hold the pivot.
    double block_upper = ctx.static_bound(pivot);
    for (std::size_t i = 0; i <= p; ++i) block_upper += ord[i]->block_max_score(pivot);
    if (!(block_upper < threshold)) {
      if (first != pivot) {
        // Every list before the pivot moves to it (documents before the pivot cannot
        // qualify), shallowly: a list whose pivot block is not decoded only records the pivot
        // as a lower bound. If all of them land on the pivot (as a lower bound or for real),
        // the pivot is the candidate now, with the same block maxima: go on with it.
        std::size_t q = 0;
        bool all_on_pivot = true;
        for (; ord[q]->docid() < pivot; ++q) {
          ord[q]->skip_to(pivot);
          all_on_pivot &= ord[q]->docid() == pivot;
        }
        if (!all_on_pivot) {
          for (std::size_t i = q; i-- > 0;) bubble_up(ord, i);
          continue;
        }
      }
      {
        // Lists moved shallowly (skip_to) stand on a lower bound. Before decoding them, bound
        // the pivot with the exact contributions of the decoded lists and the block maxima of
        // the pending ones (slack for the summation order); below the threshold, the pivot is
        // passed without decoding anything.
        bool any_pending = false;
        for (std::size_t i = 0; i <= p; ++i) any_pending |= ord[i]->pending();
        if (any_pending) {
          const double norm = ctx.norm(pivot);
          double bound = ctx.static_bound(pivot);
          for (std::size_t i = 0; i <= p; ++i)
            bound += ord[i]->pending() ? ord[i]->block_max_score(pivot)
                                       : ord[i]->weight() * impact(ord[i]->freq(), norm);
          if (bound * (1 + kBoundSlack) < threshold) {
            ++counters.docs_scored;
            for (std::size_t i = 0; i <= p; ++i) {
              if (ord[i]->pending())
                ord[i]->skip_to(pivot + 1);
              else
                ord[i]->next();
            }
            for (std::size_t i = p + 1; i-- > 0;) bubble_up(ord, i);
            continue;
          }
        }
        bool moved = false;
        for (std::size_t i = 0; i <= p; ++i) {
          if (!ord[i]->pending()) continue;
          ord[i]->materialize();
          moved |= ord[i]->docid() != pivot;
        }
        if (moved) {
          for (std::size_t i = p + 1; i-- > 0;) bubble_up(ord, i);
          continue;
        }
        ++counters.docs_scored;
        ctx.offer(top, pivot, score_in_term_order(ctx, terms, pivot));
        for (std::size_t i = 0; i <= p; ++i) {
          ord[i]->next();
          ctx.prefetch(ord[i]->docid());
        }
        // ord[p + 1..] is still sorted: insert the moved lists into it from the right (no full
        // sort per candidate; lists are few and move a short way).
        for (std::size_t i = p + 1; i-- > 0;) bubble_up(ord, i);
      }
    } else {
      // No document before the end of the shortest of those blocks (nor before the next list's
      // docID) can qualify: move every list at or before the pivot past it (shallowly).
      const DocId cap = p + 1 < ord.size() ? ord[p + 1]->docid() : kNoDoc;
      DocId next = pivot;
      // Skip shallowly (no decoding) over the following blocks of lists 0..p for as long as
      // their block maxima stay below the threshold and no other list joins in.
      for (;;) {
        DocId last = kNoDoc;
        for (std::size_t i = 0; i <= p; ++i) last = std::min(last, ord[i]->block_max_last());
        next = last == kNoDoc ? kNoDoc : std::min(last + 1, cap);
        if (next >= cap || next >= ctx.num_docs) break;
        double bound = ctx.static_bound(next);
        for (std::size_t i = 0; i <= p; ++i) bound += ord[i]->block_max_score(next);
        if (!(bound < threshold)) break;
      }
      if (next <= pivot) next = pivot + 1;
      // No document before `next` can qualify: lists 0..p-1 alone stay below the threshold
      // before the pivot (pivot selection) and lists 0..p below it in [pivot, next) (block
      // maxima), lists p+1.. start at or after `next`. Move all of lists 0..p there,
      // shallowly (skip_to decodes nothing past the current block).
      for (std::size_t i = 0; i <= p; ++i) ord[i]->skip_to(next);
      for (std::size_t i = p + 1; i-- > 0;) bubble_up(ord, i);
    }
  }
  return stats;
}

RunStats block_max_maxscore(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
                            QueryCounters& counters) {
  RunStats stats;
  std::vector<PostingCursor*> ord = live_cursors(terms);
  if (ord.empty()) return stats;
  // Lists by increasing upper bound; upper[i] bounds what lists 0..i can add together.
  std::sort(ord.begin(), ord.end(),
            [](auto* a, auto* b) { return a->max_score() < b->max_score(); });
  const std::size_t n = ord.size();
  std::vector<double> upper(n), contrib(terms.size()), block_upper(n);
  std::vector<std::uint8_t> matched(terms.size(), 0);
  std::vector<std::size_t> term_index(n);
  for (std::size_t i = 0; i < n; ++i) {
    upper[i] = ord[i]->max_score() + (i ? upper[i - 1] : 0.0);
    term_index[i] = std::size_t(ord[i] - terms.data());
  }
  std::size_t essential = 0;  // lists [essential, n) are essential: a new doc must be in one
  for (;;) {
    const double threshold = top.threshold();
    DocId d = kNoDoc;
    for (std::size_t i = essential; i < n; ++i) d = std::min(d, ord[i]->docid());
    if (d != kNoDoc) ctx.prefetch(d);
    if (d == kNoDoc) {
      if (essential > 0) {
        // The non-essential lists may still hold documents, none of which can qualify.
        for (std::size_t i = 0; i < essential; ++i)
          if (ord[i]->docid() != kNoDoc) stats.early_terminated = true;
      }
      break;
    }
    if (threshold > kMinusInf) {
      if (ctx.gs_stop(d, threshold)) {
        stats.early_terminated = true;
        break;
      }
      // Documents seen only by lists 0..essential-1 cannot reach the threshold.
      const double static_upper = ctx.static_bound(d);
      const std::size_t before = essential;
      while (essential < n && static_upper + upper[essential] < threshold) ++essential;
      if (essential == n) {
        stats.early_terminated = true;
        break;
      }
      if (essential != before) continue;  // d may not be in an essential list any more
    }
    // Exact part: the essential lists standing on d.
    const double norm = ctx.norm(d);
    double s = ctx.static_score(d);
    for (std::size_t i = essential; i < n; ++i) {
      if (ord[i]->docid() != d) continue;
      const double c = ord[i]->weight() * impact(ord[i]->freq(), norm);
      s += c;
      contrib[term_index[i]] = c;
      matched[term_index[i]] = 1;
      ord[i]->next();
      ctx.prefetch(ord[i]->docid());
    }
    ++counters.docs_scored;
    bool pruned = false;
    if (essential > 0) {
      if (s + upper[essential - 1] < threshold) {
        pruned = true;
      } else {
        // Tighter: the block maxima of the non-essential lists at d.
        double acc = 0;
        for (std::size_t i = 0; i < essential; ++i)
          block_upper[i] = acc += ord[i]->block_max_score(d);
        for (std::size_t i = essential; i-- > 0;) {
          if (s + block_upper[i] < threshold) {
            pruned = true;
            break;
          }
          ord[i]->next_geq(d);
          if (ord[i]->docid() == d) {
            const double c = ord[i]->weight() * impact(ord[i]->freq(), norm);
            s += c;
            contrib[term_index[i]] = c;
            matched[term_index[i]] = 1;
          }
        }
      }
    }
    if (!pruned) {
      double sum = 0;  // in query-term order, as the reference adds
      for (std::size_t t = 0; t < terms.size(); ++t)
        if (matched[t]) sum += contrib[t];
      ctx.offer(top, d, sum);
    }
    std::fill(matched.begin(), matched.end(), 0);
  }
  return stats;
}

}  // namespace gpusearch::cpu
