#include "aggregator/kway_merge.hpp"

#include <array>
#include <string_view>
#include <vector>

namespace gpusearch {

void merge_answer_views(const SearchParams& params, std::span<const wire::ShardAnswerView> answers,
                        MergedHits& out) {
  bool use_or = false;
  if (params.mode == Mode::kAndOr) {
    std::uint64_t and_matches = 0;
    for (const auto& a : answers) and_matches += a.and_matches;
    use_or = and_matches < params.k;
  }
  out.answered_by_or = use_or;
  out.counters = {};
  out.partial = out.ranker_fallback = false;
  out.hits.clear();
  std::size_t available = 0;
  for (const auto& a : answers) {
    out.counters.add(a.counters);
    out.partial = out.partial || a.partial;
    out.ranker_fallback = out.ranker_fallback || a.ranker_fallback;
    available += (use_or ? a.or_hits : a.hits).size();
  }
  // One cursor per ISN (on the stack for the usual few); small ISN counts make a linear scan of
  // the heads cheaper than a heap.
  std::array<std::size_t, 16> cursor_on_stack{};
  std::vector<std::size_t> cursor_on_heap;
  std::size_t* cursor = cursor_on_stack.data();
  if (answers.size() > cursor_on_stack.size()) {
    cursor_on_heap.assign(answers.size(), 0);
    cursor = cursor_on_heap.data();
  }
  auto list = [&](std::size_t j) { return use_or ? answers[j].or_hits : answers[j].hits; };
  const std::size_t keep = std::min<std::size_t>(params.k, available);
  while (out.hits.size() < keep) {
    std::size_t best = answers.size();
    for (std::size_t j = 0; j < answers.size(); ++j) {
      if (cursor[j] >= list(j).size()) continue;
      if (best == answers.size() || ranks_before(list(j)[cursor[j]], list(best)[cursor[best]]))
        best = j;
    }
    const std::size_t i = cursor[best]++;
    const auto& ids = use_or ? answers[best].or_hit_ids : answers[best].hit_ids;
    out.hits.push_back({ids[i], list(best)[i].score});
  }
}

MergedAnswer merge_answers(const SearchParams& params,
                           std::span<const wire::ShardAnswerView> answers) {
  MergedHits kept;
  merge_answer_views(params, answers, kept);
  MergedAnswer m;
  m.answer = owned_answer(kept.hits, kept.answered_by_or);
  m.counters = kept.counters;
  m.partial = kept.partial;
  m.ranker_fallback = kept.ranker_fallback;
  return m;
}

MergedAnswer merge_answers(const SearchParams& params,
                           std::span<const wire::ShardAnswer* const> answers) {
  // Views of the owned answers (ids padded with "" to their hit lists), then the one merge.
  std::vector<std::vector<std::string_view>> ids(2 * answers.size());
  std::vector<wire::ShardAnswerView> views(answers.size());
  for (std::size_t j = 0; j < answers.size(); ++j) {
    const wire::ShardAnswer& a = *answers[j];
    for (int o = 0; o < 2; ++o) {
      const auto& hits = o ? a.result.or_hits : a.result.hits;
      const auto& owned = o ? a.or_hit_ids : a.hit_ids;
      auto& v = ids[2 * j + o];
      v.assign(owned.begin(), owned.begin() + std::min(owned.size(), hits.size()));
      v.resize(hits.size());
    }
    views[j] = {a.result.hits,    a.result.or_hits,        ids[2 * j],
                ids[2 * j + 1],   a.result.and_matches,    a.result.counters,
                a.result.partial, a.result.ranker_fallback};
  }
  return merge_answers(params, views);
}

}  // namespace gpusearch
