// The planning core of the GPU list cache (paper 000, 3.3), shared by the offline planner
// (partition/cache_planner, `gpusearch plan-cache`) and the online policy the GPU engine runs
// on the live query stream (common/online_cache_policy): the block reads one query makes under
// the engine's early-terminating ranked AND, and the admission of list prefixes into a budget.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "common/cache_plan.hpp"
#include "common/query.hpp"
#include "common/types.hpp"

namespace gpusearch {

class ShardIndex;
class ServingGaps;

// A read of one list: its first `blocks` blocks.
struct ListRead {
  TermId term = 0;
  std::uint32_t blocks = 0;
};

// The prefix of each of the query's lists that ranked AND with GS early termination (paper 000,
// Algorithm 1) reads on this shard: the shortest list up to the last candidate processed, every
// other list up to the last candidate that reached it (lists by increasing length, as the
// engine probes them). Scores with the index's GS alpha. Empty when some list is empty.
std::vector<ListRead> simulate_and_reads(const ShardIndex& shard, const Query& query, unsigned k,
                                         Scoring scoring);

// What a query log says about a list: the prefixes its queries read, each with a weight (1 per
// query offline; decayed weights online), and how often the term was asked for.
struct TermVisits {
  std::vector<std::pair<std::uint32_t, double>> prefixes;  // (blocks read, weight)
  double query_frequency = 0;
};
using VisitLog = std::map<TermId, TermVisits>;

struct AdmissionOptions {
  CachePolicy policy = CachePolicy::kVfb;
  double lambda = 1.0;             // vfb: most of a list admitted, (0, 1]
  std::uint64_t budget_bytes = 0;  // posting bytes (cached_block_bytes)
  // vfb: the candidate blocks taken in order by merging each list's own order (a heap of
  // lists; a list's blocks admitted in a run while they stay ahead of the heap's top; a list
  // dropped once its next block does not fit) rather than by sorting them all. The same
  // admission; false is the sort, the reference the merge is tested against. At 2.5M documents
  // the merge admits a training log's visits in 0.012 s against the sort's 0.080 s (build
  // machine, session 37).
  bool merge_candidates = true;
  // Budget the log's lists leave unused (1% of it or more) goes to whole lists no query asked
  // for, longest first (qtf, qtfdf and vfb with lambda 1; after every list the policy admits).
  bool fill_spare = true;
};

// Admits list prefixes into the budget:
//   vfb    the blocks with the highest visiting frequency (the weight of the prefixes that
//          cover them), ties broken by query frequency, at most lambda of a list; a list's
//          admitted blocks form a prefix since visits do; unvisited blocks (vf = 0, the last
//          tie class) of queried lists come last, most queried list first;
//   qtf    whole lists by query frequency; qtfdf whole lists by query frequency / length;
//   then (fill_spare) budget no queried list takes, whole unqueried lists, longest first.
// Returns the admitted lists in admission order (most valuable first), each with its bytes.
// `visits` may be sorted in place (prefixes by length). With `gaps`, the admission stops at
// pause points while a serving call is in flight (the online policy); the result is the same.
std::vector<CachedList> admit_lists(const ShardIndex& shard, VisitLog& visits,
                                    const AdmissionOptions& options, ServingGaps* gaps = nullptr);

// A plan for one shard from a training log: each query's simulated reads (weight 1), then
// admit_lists. Queries are replayed in parallel.
std::vector<CachedList> plan_shard_cache(const ShardIndex& shard, std::span<const Query> training,
                                         const AdmissionOptions& options, unsigned k,
                                         Scoring scoring);

// Posting bytes of blocks [first, first + count) of the shard.
std::uint64_t blocks_bytes(const ShardIndex& shard, std::uint64_t first, std::uint64_t count);

}  // namespace gpusearch
