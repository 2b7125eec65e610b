// Lists that fragment a list cache's region (tests of the compaction, on the host and on the
// GPU): a big list and 20 lists of a third to a half of its words. Cached in a region that
// holds the 20 exactly, every second one of them leaving makes room for the big one in all,
// but in no single hole.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/list_cache.hpp"
#include "common/shard_index.hpp"

namespace gpusearch::testing {

struct FragmentingLists {
  TermId big = 0;
  std::uint64_t big_words = 0;
  std::vector<TermId> mid;  // 20 where the index has them
};

inline FragmentingLists fragmenting_lists(const ShardIndex& shard) {
  auto words_of = [&](TermId t) { return list_prefix_words(shard, t, shard.term(t).num_blocks); };
  std::vector<TermId> by_size;
  for (TermId t = 0; t < shard.num_terms(); ++t)
    if (shard.term(t).num_blocks > 0) by_size.push_back(t);
  std::sort(by_size.begin(), by_size.end(),
            [&](TermId a, TermId b) { return words_of(a) > words_of(b); });
  FragmentingLists f;
  for (std::size_t i = 0; i < by_size.size() && f.mid.size() < 20; ++i) {
    f.big = by_size[i];
    f.big_words = words_of(f.big);
    f.mid.clear();
    for (TermId t : by_size)
      if (3 * words_of(t) >= f.big_words && 2 * words_of(t) < f.big_words && f.mid.size() < 20)
        f.mid.push_back(t);
  }
  return f;
}

}  // namespace gpusearch::testing
