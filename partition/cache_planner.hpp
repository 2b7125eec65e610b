// Offline GPU list-cache planning (paper 000, 3.3): which block-aligned list prefixes a GPU's
// list cache of a given size holds, chosen from a training query log.
//   vfb   visiting-frequency block admission (3.3.1): each training query is run as the GPU
//         engine's ranked AND with GS early termination (Algorithm 1) would run it, and the
//         blocks each list is read up to are counted; the most visited blocks are admitted,
//         ties broken by the term's query frequency, never more than lambda of a list (3.3.3);
//         unvisited blocks of queried lists (vf = 0) come last, most queried list first.
//         Visits of a list form a prefix (docIDs are read in order), so the admitted blocks of
//         a list are a prefix too.
//   qtf   whole lists by query frequency f_t (Baeza-Yates et al.).
//   qtfdf whole lists by f_t / |l(t)| (Long and Suel).
// Beyond the paper, budget left once every queried list is in goes to whole lists no training
// query asked for, longest first (not for vfb with lambda < 1; fill_spare).
// Every policy is scored on the same simulated block reads (training_block_reads and the part
// the plan serves), so policies compare on one footing.
#pragma once

#include <cstdint>
#include <filesystem>

#include "common/cache_plan.hpp"
#include "common/types.hpp"

namespace gpusearch {

class Index;

struct CachePlanOptions {
  CachePolicy policy = CachePolicy::kVfb;
  double lambda = 1.0;            // (0, 1]: the largest fraction of a list VFB admits
  std::uint64_t budget_bytes = 0;  // per shard
  unsigned k = 10;
  Scoring scoring = Scoring::kBm25;
  // Budget the log's lists leave unused goes to whole unqueried lists, longest first
  // (AdmissionOptions::fill_spare); false: the paper's policies alone.
  bool fill_spare = true;
  bool progress = true;
};

// Makes the plan for every open shard of `index` from the training log (TSV or TREC topics).
// Throws InputError for bad options or an unreadable log.
CachePlan make_cache_plan(const Index& index, const std::filesystem::path& training_queries,
                          const CachePlanOptions& options);

}  // namespace gpusearch
