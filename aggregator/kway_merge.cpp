#include "aggregator/kway_merge.hpp"

#include <vector>

namespace gpusearch {

namespace {

// Answer is `const ShardAnswer` (the ids are copied) or `ShardAnswer` (the ids are moved out:
// the merge thread's path, one allocation less per hit).
template <typename Answer>
MergedAnswer merge_impl(const SearchParams& params, std::span<Answer* const> answers) {
  MergedAnswer m;
  bool use_or = false;
  if (params.mode == Mode::kAndOr) {
    std::uint64_t and_matches = 0;
    for (const Answer* a : answers) and_matches += a->result.and_matches;
    use_or = and_matches < params.k;
  }
  m.answer.answered_by_or = use_or;
  for (const Answer* a : answers) {
    m.counters.add(a->result.counters);
    m.partial = m.partial || a->result.partial;
    m.ranker_fallback = m.ranker_fallback || a->result.ranker_fallback;
  }
  // One cursor per ISN; small ISN counts make a linear scan of the heads cheaper than a heap.
  std::vector<std::size_t> cursor(answers.size(), 0);
  auto list = [&](std::size_t j) -> const std::vector<RankedDoc>& {
    return use_or ? answers[j]->result.or_hits : answers[j]->result.hits;
  };
  m.answer.hits.reserve(params.k);
  while (m.answer.hits.size() < params.k) {
    std::size_t best = answers.size();
    for (std::size_t j = 0; j < answers.size(); ++j) {
      if (cursor[j] >= list(j).size()) continue;
      if (best == answers.size() || ranks_before(list(j)[cursor[j]], list(best)[cursor[best]]))
        best = j;
    }
    if (best == answers.size()) break;
    auto& ids = use_or ? answers[best]->or_hit_ids : answers[best]->hit_ids;
    const std::size_t i = cursor[best]++;
    m.answer.hits.push_back(
        {i < ids.size() ? std::move(ids[i]) : std::string(), list(best)[i].score});
  }
  return m;
}

}  // namespace

MergedAnswer merge_answers(const SearchParams& params,
                           std::span<const wire::ShardAnswer* const> answers) {
  return merge_impl(params, answers);
}

MergedAnswer merge_answers_moving_ids(const SearchParams& params,
                                      std::span<wire::ShardAnswer* const> answers) {
  return merge_impl(params, answers);
}

}  // namespace gpusearch
