#include "isn/cpu_engine/windowed_maxscore.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace gpusearch::cpu {

namespace {

// Per-thread window state. Invariant between windows: every accumulator, bit and term mask is
// zero, so a window clears only what it touched (in its candidate scan).
struct WindowScratch {
  std::vector<double> acc;             // partial score of wmin + i, essential lists only
  std::vector<std::uint64_t> matched;  // bit i: some essential list holds wmin + i
  // Sparse windows: bit w marks matched[w] as possibly nonzero, so that the candidate scan
  // visits those words only (on a large shard most of a window's words are empty at k = 10).
  std::vector<std::uint64_t> summary;
  std::vector<std::uint64_t> term_mask;  // bit t: essential term t holds wmin + i
  std::vector<double> contrib;           // [t * window + i]: term t's score there (if in the mask)
  // Candidates that pass the first bound test (window offset, partial score); no invariant.
  std::vector<DocId> survivor;
  std::vector<double> survivor_partial;
  unsigned window = 0;
  void prepare(unsigned window_docs, std::size_t terms) {
    if (window != window_docs) {
      window = window_docs;
      acc.assign(window_docs, 0.0);
      survivor.assign(window_docs, 0);
      survivor_partial.assign(window_docs, 0.0);
      matched.assign((window_docs + 63) / 64, 0);
      summary.assign((matched.size() + 63) / 64, 0);
      term_mask.assign(window_docs, 0);
      contrib.clear();
    }
    if (contrib.size() < terms * window_docs) contrib.resize(terms * window_docs);
  }
};

WindowScratch& thread_scratch() {
  thread_local WindowScratch s;
  return s;
}

// A bound below the threshold even with a margin for summation order: bounds and scores are
// sums of the same kind of terms added in different orders (ARCHITECTURE.md, "Exactness").
inline bool below(double bound, double threshold) {
  return bound * (1 + kBoundSlack) < threshold;
}

constexpr DocId kFirstWindowDocs = 64;
// Shards with more documents than this (2-byte norm codes: 1 MiB) prefetch the norms.
constexpr DocId kPrefetchNormsFrom = DocId(1) << 19;

}  // namespace

RunStats windowed_maxscore(const QueryContext& ctx, std::span<PostingCursor> terms, TopK& top,
                           QueryCounters& counters, unsigned window_docs) {
  RunStats stats;
  const std::size_t n = terms.size();
  if (n == 0) return stats;
  // Term masks are 64 bits (QueryLimits allows 64 distinct terms by default); longer queries go
  // document at a time.
  if (n > 64) return block_max_maxscore(ctx, terms, top, counters);
  const DocId window = std::max(64u, window_docs);
  WindowScratch& scratch = thread_scratch();
  scratch.prepare(window, n);
  double* const acc = scratch.acc.data();
  std::uint64_t* const matched = scratch.matched.data();
  std::uint64_t* const summary = scratch.summary.data();
  const std::uint32_t window_words = (window + 63) / 64;
  // Postings accumulated in the last window with two essential lists or more: fewer than the
  // window's words, and the next such window marks the summary (a few instructions a posting)
  // instead of scanning every word (a few a word).
  std::uint64_t last_accumulated = window_words;
  std::uint64_t* const term_mask = scratch.term_mask.data();
  double* const contrib = scratch.contrib.data();
  const bool has_static = ctx.static_weight != 0;

  std::vector<double> window_bound(n), block_bound(n), ne_contrib(n);
  std::vector<DocId> cover_last(n);
  std::vector<std::uint32_t> order(n);  // live lists of the window by increasing window bound
  std::vector<std::uint8_t> essential(n);

  DocId wmin = kNoDoc;
  for (const PostingCursor& c : terms) wmin = std::min(wmin, c.docid());
  // Windows start small and double: the first ones are scored before any threshold exists (all
  // lists essential), so they should hold few documents; later ones amortize the per-window
  // bounds. GS order puts the high scores first, so the threshold rises within a few windows.
  // With a starting threshold already (threshold_seed.hpp, a resumed query), full windows.
  DocId span = top.threshold() > -std::numeric_limits<double>::infinity()
                   ? window
                   : std::min<DocId>(window, kFirstWindowDocs);
  while (wmin < ctx.range_end) {
    double threshold = top.threshold();
    const double static_upper = ctx.static_bound(wmin);
    if (threshold > -std::numeric_limits<double>::infinity()) {
      if (ctx.gs_stop(wmin, threshold)) {
        stats.early_terminated = true;
        break;
      }
      double all = static_upper;
      for (const PostingCursor& c : terms)
        if (c.docid() != kNoDoc) all += c.max_score();
      if (below(all, threshold)) {
        stats.early_terminated = true;
        break;
      }
    }
    const DocId wmax = DocId(std::min<std::uint64_t>(std::uint64_t(wmin) + span, ctx.range_end));
    span = std::min(window, 2 * span);

    // The window's bounds and its essential lists.
    std::size_t live = 0;
    for (std::size_t t = 0; t < n; ++t) {
      essential[t] = 0;
      if (terms[t].docid() == kNoDoc) continue;
      window_bound[t] = terms[t].window_max_score(wmin, wmax - 1, cover_last[t]);
      std::size_t i = live++;
      for (; i > 0 && window_bound[order[i - 1]] > window_bound[t]; --i) order[i] = order[i - 1];
      order[i] = std::uint32_t(t);
    }
    if (live == 0) break;
    std::size_t non_essential = 0;
    double non_essential_bound = 0;
    while (
        non_essential < live &&
        below(static_upper + non_essential_bound + window_bound[order[non_essential]], threshold))
      non_essential_bound += window_bound[order[non_essential++]];
    if (non_essential == live) {
      // No document up to the end of the shortest-reaching overlapping block can qualify.
      DocId last = kNoDoc;
      for (std::size_t i = 0; i < live; ++i) last = std::min(last, cover_last[order[i]]);
      wmin = last == kNoDoc ? kNoDoc : last + 1;
      continue;
    }
    for (std::size_t i = non_essential; i < live; ++i) essential[order[i]] = 1;

    // Essential lists, term-at-a-time in query-term order.
    const bool keep_scores = non_essential > 0;
    // One essential list (and some non-essential ones): its postings are the candidates, in
    // docID order, each with its own term's score as partial score, so the first bound test
    // runs as they are scored and only its survivors are kept (no accumulators, no bitmap).
    const bool single_essential = non_essential > 0 && live - non_essential == 1;
    DocId* const surv = scratch.survivor.data();
    double* const surv_partial = scratch.survivor_partial.data();
    std::uint32_t ns = 0;      // survivors of the first bound test (windows with probes)
    std::uint64_t scored = 0;  // candidates
    const double first_threshold = threshold;
    std::uint32_t words = 0;                              // matched[0, words) may be nonzero
    const bool sparse = last_accumulated < window_words;  // the summary marks the words
    std::uint64_t accumulated = 0;
    for (std::size_t t = 0; t < n; ++t) {
      if (!essential[t]) continue;
      PostingCursor& c = terms[t];
      c.next_geq(wmin);  // a list non-essential before may lag behind
      const double w = c.weight();
      DocId last_doc = kNoDoc;
      // A run of a block at a time: the norms are gathered first (independent loads, so the
      // cache misses of a large shard overlap), the scores computed in a loop the compiler
      // vectorizes (the same IEEE operations as impact(), so the same bits), then scattered.
      double v[kBlockSize];
      const auto score_run = [&](const DocId* docs, const std::uint32_t* fr, std::uint32_t m) {
        if (ctx.norm_codes) {
          for (std::uint32_t j = 0; j < m; ++j) v[j] = ctx.norm_table[ctx.norm_codes[docs[j]]];
        } else {
          for (std::uint32_t j = 0; j < m; ++j) v[j] = ctx.norms[docs[j]];
        }
        for (std::uint32_t j = 0; j < m; ++j) {
          const double f = double(std::int32_t(fr[j]));  // frequencies < 2^31: exact
          v[j] = w * (f / (f + v[j]));
        }
        if (m) last_doc = docs[m - 1];
      };
      if (single_essential) {
        double* const c_t = contrib + t * window;
        c.for_each_run_below(
            wmax, [&](const DocId* docs, const std::uint32_t* fr, std::uint32_t m) {
              score_run(docs, fr, m);
              for (std::uint32_t j = 0; j < m; ++j) {
                const DocId i = docs[j] - wmin;
                double partial = v[j];
                if (has_static) partial += ctx.static_score(docs[j]);
                const bool pass = !below(partial + non_essential_bound, first_threshold);
                c_t[i] = v[j];
                surv[ns] = i;
                surv_partial[ns] = partial;
                ns += pass;
              }
              scored += m;
            });
        const std::uint64_t term_bit = std::uint64_t(1) << t;
        for (std::uint32_t q = 0; q < ns; ++q) term_mask[surv[q]] = term_bit;
      } else if (keep_scores) {
        double* const c_t = contrib + t * window;
        const std::uint64_t term_bit = std::uint64_t(1) << t;
        c.for_each_run_below(wmax,
                             [&](const DocId* docs, const std::uint32_t* fr, std::uint32_t m) {
                               score_run(docs, fr, m);
                               for (std::uint32_t j = 0; j < m; ++j) {
                                 const DocId i = docs[j] - wmin;
                                 acc[i] += v[j];
                                 matched[i >> 6] |= std::uint64_t(1) << (i & 63);
                                 if (sparse)
                                   summary[i >> 12] |= std::uint64_t(1) << ((i >> 6) & 63);
                                 term_mask[i] |= term_bit;
                                 c_t[i] = v[j];
                               }
                               accumulated += m;
                             });
      } else {
        c.for_each_run_below(wmax,
                             [&](const DocId* docs, const std::uint32_t* fr, std::uint32_t m) {
                               score_run(docs, fr, m);
                               for (std::uint32_t j = 0; j < m; ++j) {
                                 const DocId i = docs[j] - wmin;
                                 acc[i] += v[j];
                                 matched[i >> 6] |= std::uint64_t(1) << (i & 63);
                                 if (sparse)
                                   summary[i >> 12] |= std::uint64_t(1) << ((i >> 6) & 63);
                               }
                               accumulated += m;
                             });
      }
      if (!single_essential && last_doc != kNoDoc)
        words = std::max(words, ((last_doc - wmin) >> 6) + 1);
    }

    // The essential lists' decoded postings of the next window: start loading their norms
    // while this window's candidates are checked (on a large shard each is a cache miss).
    // (Skipped where the codes fit in a core's L2 cache.)
    if (ctx.norm_codes && ctx.num_docs > kPrefetchNormsFrom) {
      const DocId ahead = wmax + window;
      for (std::size_t t = 0; t < n; ++t)
        if (essential[t])
          terms[t].for_each_decoded_below(ahead,
                                          [&](DocId d) { __builtin_prefetch(ctx.norm_codes + d); });
    }

    // The non-essential lists' block maxima at the current candidate, cumulated from the
    // weakest list (block_bound[j]: lists order[0..j]); they hold for every docID up to
    // `bb_last` (the first block end among those lists), so consecutive candidates in the same
    // blocks reuse them instead of moving every list's shallow pointer again. Each list's
    // block maximum is at most its window bound (the block overlaps the window), so the sum
    // is a bound at least as tight as `non_essential_bound`.
    DocId bb_last = 0;
    bool bb_valid = false;

    // Candidates in docID order. Two loops, by whether any list is non-essential, each
    // instantiated with and without a static part, so that the common loops (no probes, bm25)
    // carry no test for either.
    // Every candidate in docID order, its bit and accumulator cleared: f(i, score) with the
    // static part added when with_static says so. Returns the candidates visited.
    const auto for_each_candidate = [&](auto with_static, auto&& f) {
      std::uint64_t n = 0;
      const auto visit_word = [&](std::uint32_t word, std::uint64_t bits) {
        matched[word] = 0;
        const DocId base = word * 64;
        do {
          const DocId i = base + DocId(std::countr_zero(bits));
          bits &= bits - 1;
          ++n;
          double score = acc[i];
          acc[i] = 0;
          if constexpr (decltype(with_static)::value) score += ctx.static_score(wmin + i);
          f(i, score);
        } while (bits);
      };
      if (sparse) {
        for (std::uint32_t sw = 0; sw * 64 < words; ++sw) {
          for (std::uint64_t marked = summary[sw]; marked; marked &= marked - 1) {
            const std::uint32_t word = sw * 64 + std::uint32_t(std::countr_zero(marked));
            visit_word(word, matched[word]);  // nonzero: a posting marked it
          }
          summary[sw] = 0;
        }
      } else {
        for (std::uint32_t word = 0; word < words; ++word)
          if (const std::uint64_t bits = matched[word]) visit_word(word, bits);
      }
      return n;
    };
    const auto all_essential = [&](auto with_static) {
      scored += for_each_candidate(with_static, [&](DocId i, double score) {
        if (!(score < threshold)) {
          top.push(score, wmin + i);
          threshold = top.threshold();
        }
      });
    };
    const auto with_probes = [&](auto with_static) {
      // First pass, without a branch per candidate (whether a candidate passes is a coin toss
      // for the branch predictor): partial score plus the static part plus the non-essential
      // lists' window bounds against the threshold as it stands; the survivors keep their
      // partial score, the others their accumulators and masks cleared.
      scored += for_each_candidate(with_static, [&](DocId i, double partial) {
        const bool pass = !below(partial + non_essential_bound, first_threshold);
        surv[ns] = i;
        surv_partial[ns] = partial;
        ns += pass;
        term_mask[i] &= -std::uint64_t(pass);
      });
      for (std::uint32_t q = 0; q < ns; ++q) {
        {
          const DocId i = surv[q];
          const DocId d = wmin + i;
          // With the static part (the probes add to it; the term sum below excludes it).
          const double partial_static = surv_partial[q];
          const double ne_bound =
              bb_valid && d <= bb_last ? block_bound[non_essential - 1] : non_essential_bound;
          if (!below(partial_static + ne_bound, threshold)) {
            // Tighter: the non-essential lists' block maxima at d, strongest list probed first.
            if (!bb_valid || d > bb_last) {
              double upper = 0;
              DocId last = kNoDoc;
              for (std::size_t j = 0; j < non_essential; ++j) {
                PostingCursor& c = terms[order[j]];
                block_bound[j] = upper += c.block_max_score(d);
                last = std::min(last, c.block_max_last());
              }
              bb_last = last;
              bb_valid = true;
            }
            double sum = partial_static;
            bool pruned = false;
            std::uint64_t gained = 0;  // non-essential terms found at d
            for (std::size_t j = non_essential; j-- > 0;) {
              if (below(sum + block_bound[j], threshold)) {
                pruned = true;
                break;
              }
              const std::uint32_t t = order[j];
              PostingCursor& c = terms[t];
              c.next_geq(d);
              if (c.docid() == d) {
                const double v = c.weight() * impact(c.freq(), ctx.cached_norm(d));
                sum += v;
                ne_contrib[t] = v;
                gained |= std::uint64_t(1) << t;
              }
            }
            if (!pruned) {
              double score = partial_static;
              if (gained) {
                // The reference's order: every term of d in query-term order.
                double terms_sum = 0;
                for (std::uint64_t m = gained | term_mask[i]; m; m &= m - 1) {
                  const unsigned t = unsigned(std::countr_zero(m));
                  terms_sum += (gained >> t) & 1 ? ne_contrib[t] : contrib[t * window + i];
                }
                score = terms_sum;
                if constexpr (decltype(with_static)::value) score += ctx.static_score(d);
              }
              if (!(score < threshold)) {
                top.push(score, d);
                threshold = top.threshold();
              }
            }
          }
          term_mask[i] = 0;
        }
      }
    };
    if (non_essential == 0) {
      if (has_static)
        all_essential(std::true_type{});
      else
        all_essential(std::false_type{});
    } else {
      if (has_static)
        with_probes(std::true_type{});
      else
        with_probes(std::false_type{});
    }
    counters.docs_scored += scored;
    if (!single_essential) last_accumulated = accumulated;

    if (non_essential == 0) {
      // Every live list stands at or past wmax: the next window starts at the next posting.
      wmin = kNoDoc;
      for (const PostingCursor& c : terms) wmin = std::min(wmin, c.docid());
    } else {
      // Documents from wmax up to the next essential posting hold non-essential terms only; as
      // long as the non-essential lists' window bounds still hold there (up to the last docID
      // of the last block each bound covered), their sum stays below the threshold (which only
      // rises), so none of them can qualify: the next window starts at the first document
      // where an essential list has a posting or a non-essential bound runs out. Sparse lists
      // thus cross empty stretches in one step, not window by window.
      DocId next = kNoDoc;
      for (std::size_t i = non_essential; i < live; ++i)
        next = std::min(next, terms[order[i]].docid());
      for (std::size_t i = 0; i < non_essential; ++i) {
        const DocId cover = cover_last[order[i]];
        if (cover != kNoDoc) next = std::min(next, cover + 1);
      }
      wmin = std::max(wmax, next);
    }
  }
  return stats;
}

RunStats single_list_top_k(const QueryContext& ctx, PostingCursor& list, TopK& top,
                           QueryCounters& counters) {
  RunStats stats;
  const double w = list.weight();
  while (list.docid() < ctx.range_end) {
    const double threshold = top.threshold();
    DocId d = list.docid();
    if (threshold > -std::numeric_limits<double>::infinity()) {
      if (ctx.gs_stop(d, threshold) || below(ctx.static_bound(d) + list.max_score(), threshold)) {
        stats.early_terminated = true;
        break;
      }
      // Blocks below the threshold from d on, by their maxima only (the shallow pointer).
      bool skipped = false;
      while (below(ctx.static_bound(d) + list.block_max_score(d), threshold)) {
        const DocId last = list.block_max_last();
        d = last == kNoDoc ? kNoDoc : last + 1;
        skipped = true;
        if (d >= ctx.range_end) break;
      }
      if (skipped) {
        if (d >= ctx.range_end) break;
        list.next_geq(d);  // decodes the first block that may hold a qualifying document
        continue;
      }
    }
    // The postings up to the end of the current block, each offered against the threshold.
    list.block_max_score(d);  // the shallow pointer on the current block
    const DocId block_last = list.block_max_last();
    const DocId stop = block_last == kNoDoc ? kNoDoc : block_last + 1;
    list.for_each_run_below(stop, [&](const DocId* docs, const std::uint32_t* fr, std::uint32_t m) {
      for (std::uint32_t j = 0; j < m; ++j)
        ctx.offer(top, docs[j], w * impact(fr[j], ctx.cached_norm(docs[j])));
      counters.docs_scored += m;
    });
  }
  return stats;
}

}  // namespace gpusearch::cpu
