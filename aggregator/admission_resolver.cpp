#include "aggregator/admission_resolver.hpp"

#include <algorithm>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "common/term_dictionary.hpp"
#include "common/tokenizer.hpp"

namespace gpusearch {

AdmissionResolver::AdmissionResolver(const TermDictionary& dictionary, QueryLimits limits,
                                     unsigned threads)
    : dictionary_(dictionary),
      limits_(limits),
      threads_(std::max(1u, threads)) {
  if (threads_ > 1) arena_ = std::make_unique<tbb::task_arena>(int(threads_));
}

AdmissionResolver::~AdmissionResolver() = default;

unsigned AdmissionResolver::auto_threads(std::size_t batch_size, std::size_t cores) {
  if (batch_size < 4 * kMinQueriesPerThread) return 1;
  return unsigned(std::clamp<std::size_t>(cores / 4, 1, 4));
}

void AdmissionResolver::resolve(std::span<const ArrivedQuery> arrived,
                                const std::string& source_name, std::vector<ResolvedQuery>& out) {
  out.clear();
  out.resize(arrived.size());
  const std::size_t n = arrived.size();
  if (!arena_ || n < 2 * kMinQueriesPerThread) {
    resolve_range(arrived, source_name, out.data());
    return;
  }
  // One contiguous range per thread: each runs its own prefetch rounds over its queries.
  const std::size_t grain =
      std::max(kMinQueriesPerThread, (n + threads_ - 1) / threads_);
  arena_->execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<std::size_t>(0, n, grain),
        [&](const tbb::blocked_range<std::size_t>& r) {
          resolve_range(arrived.subspan(r.begin(), r.size()), source_name, out.data() + r.begin());
        },
        tbb::simple_partitioner());
  });
}

void AdmissionResolver::resolve_range(std::span<const ArrivedQuery> arrived,
                                      const std::string& source_name, ResolvedQuery* out) const {
  // A batch's term look-ups after an idle gap miss the caches (the dictionary's slot and record,
  // then the term's df), one after the other; asking for every term's lines in rounds first
  // overlaps the misses. Each token is read and hashed once for all the rounds, before the
  // first round: tokenizing between the prefetches queued the text's own reads behind them
  // (64 queries after a 64 MiB sweep, build machine: 38 us for the first round that way, 17 us
  // for both loops apart; NOTES-cluster.md, session 50).
  if (arrived.size() > 1) {
    thread_local std::vector<std::uint64_t> hashes;  // each resolving thread's own, reused
    hashes.clear();
    for (const ArrivedQuery& a : arrived)
      for_each_token(a.text.text,
                     [&](std::string_view tok) { hashes.push_back(TermDictionary::hash(tok)); });
    for (int stage = 0; stage < TermDictionary::kPrefetchStages; ++stage)
      for (std::uint64_t h : hashes) dictionary_.prefetch_hashed(h, stage);
  }
  for (std::size_t i = 0; i < arrived.size(); ++i) {
    ResolvedQuery& r = out[i];
    r.ok = resolve_query(dictionary_, arrived[i].text, limits_, r.query, r.problem, source_name);
    if (!r.ok) continue;
    for (TermId t : r.query.terms) r.cost = std::min(r.cost, double(dictionary_.df_global(t)));
  }
}

}  // namespace gpusearch
