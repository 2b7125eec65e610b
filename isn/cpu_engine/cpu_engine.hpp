// The CPU engine of an ISN: document-at-a-time query processing over the compressed shard
// (isn/cpu_engine/daat_algorithms.hpp), many queries of a batch in parallel (oneTBB), and
// optionally one query's docID range split over several threads that share a threshold. It
// answers queries kept on the CPU, completes queries the GPU saw only pruned lists for
// (resume), and is the baseline for every GPU speed-up. Its answers equal the reference's
// (ARCHITECTURE.md, "Exactness") for every algorithm, mode, scoring and thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/kth_impact_table.hpp"
#include "common/query_engine.hpp"
#include "common/shard_index.hpp"
#include "isn/cpu_engine/threshold_slot.hpp"

namespace gpusearch::cpu {

class SharedThreshold;
class PostingCursor;
struct QueryContext;

enum class Algorithm {
  kExhaustive,    // ranked OR / ranked AND, every posting decoded and every match scored
  kWand,          // WAND (AND mode: block-max AND)
  kBmw,           // block-max WAND (AND mode: block-max AND)
  kMaxScore,      // block-max MaxScore over docID windows (AND mode: block-max AND)
  kMaxScoreDaat,  // block-max MaxScore, document at a time (AND mode: block-max AND)
};
std::string_view to_string(Algorithm a);
Algorithm parse_algorithm(std::string_view s);  // "" gives the default; throws InputError
std::vector<std::string> algorithm_names();
inline constexpr Algorithm kDefaultAlgorithm = Algorithm::kMaxScore;

struct CpuEngineOptions {
  Algorithm algorithm = kDefaultAlgorithm;
  unsigned intra_query_threads = 1;  // > 1: split each query's docID range over threads
  // Stop over GS-ordered docIDs (paper 000, eq. 5) where the index's GS alpha makes it exact.
  // The exhaustive algorithm never stops early.
  bool gs_early_termination = true;
  // Documents per window of the windowed MaxScore (windowed_maxscore.hpp); 0: by the shard's
  // size, 4096 up to 2^20 documents and 8192 above (NOTES-cpu-engine.md, session 24: 8192 took
  // 7% of the instructions off at k = 10 on the 2.5M shard but only 1% on the 64K Debian one,
  // whose lists fill small windows, for twice the scratch memory).
  unsigned window_docs = 0;
  // `maxscore` runs the document-at-a-time block-max MaxScore (`maxscore-daat`) for a query
  // whose lists hold together fewer than one posting per this many documents of the shard:
  // sparse lists cross mostly empty windows, whose fixed cost the windowed algorithm pays
  // (synthetic 2.5M shard, k = 10: DAAT faster up to about 8K postings, windowed above; Debian
  // descriptions, 64K documents: up to about 500). 0: always windowed.
  unsigned daat_docs_per_posting = 256;
  // OR mode, pruning algorithms: before the first document, the blocks of highest block maxima
  // of each list (this many, plus those k needs) are decoded and scored for their term alone;
  // the k-th best such score is a lower bound of the k-th score, the starting threshold
  // (threshold_seed.hpp). 0: no seed. `seed_scale` multiplies it: 1; above 1 only in the test
  // that proves an inflated seed gives a wrong answer it catches.
  unsigned seed_blocks_per_term = 1;
  // With a seed, over the whole shard and k <= 1000: the largest of weight_t x (a lower bound of
  // the k-th largest impact of t's list, common/kth_impact_table.hpp, built once per engine)
  // over the query's terms instead of the blocks decoded per query: nothing is decoded, and the
  // bound covers a list's best blocks, not its best one only.
  bool seed_from_kth_impacts = true;
  double seed_scale = 1.0;
  // Multiplies every term upper bound the pruning algorithms use (list and block maxima). 1;
  // tests set it below 1 to prove that a weakened bound gives a wrong answer they catch.
  double bound_scale = 1.0;
  // A top-k that other runs raise concurrently (intra-query parts; other processes' shards
  // through shared slots) re-reads the shared threshold every this many checks, and uses its
  // last reading in between (a lower bound still: thresholds only rise). 1: at every check.
  // The shared words are written by other cores; each re-read after a write is a cache miss.
  // 4: with the slot and its union in one cache line, four ISNs on quarter shards at batch 1,024
  // (H200 host) went from 0.83x to 0.93x one ISN's throughput at 16 against 1; with the slot in
  // a line of its own, 1, 4 and 16 gave 0.91x, 0.93x and 0.89x (within the reps' spread), 4 for
  // 0.2% more documents scored than 1 (NOTES-cluster.md, session 32).
  unsigned shared_threshold_refresh = 4;
  // and-or with thresholds shared between shards (search() with linked slots): every query's
  // AND phase first, then the OR phases still needed, so that a shard whose own AND matches are
  // fewer than k sees whether the other shards' complete the k before it runs an OR phase that
  // the merge would drop. false: each query's two phases back to back (an OR phase already
  // running still stops once the AND answer is certain). Four quarter shards of the 1M
  // synthetic index, k = 10: 1.05x one engine's documents scored -> 1.01x (NOTES-cluster.md,
  // session 33, "AND phases first").
  bool sharing_and_phases_first = true;
  // With thresholds shared between shards: the batch's queries handed to the threads in batch
  // order, one at a time (for_each_query_in_order in cpu_engine.cpp): a smaller spread between
  // the node's ISNs' batch times, for 2% more documents scored (session 42). false: oneTBB's
  // recursive split of the batch.
  bool sharing_in_batch_order = false;
};

class CpuEngine final : public QueryEngine {
 public:
  CpuEngine(const ShardIndex& shard, std::uint32_t shard_id, CpuEngineOptions options = {});

  std::string_view name() const override { return "cpu"; }
  bool runs_batch_in_parallel() const override { return true; }
  const CpuEngineOptions& options() const { return options_; }

  // Answers every query (in parallel over queries); out[i] as ReferenceEngine fills it: for
  // and-or, hits = AND top-k, and_matches (exact whenever below k), or_hits when and_matches < k.
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;
  ShardResult search_one(const Query& query, const SearchParams& params) const;
  // The same, each query pruning also against the k-th scores that other engines answering the
  // same query on other shards of the same collection publish in its slots, and publishing its
  // own there (ISNs on one node: isn/shared_thresholds.hpp). shared[i] belongs to queries[i]
  // (an unlinked slot shares nothing). The merged answer stays exact: a document of the
  // query's final top-k scores at least its final k-th score, which no shard's k-th score
  // exceeds, so no shard prunes it. What a shard returns alone may then miss documents of its
  // own top-k below another shard's k-th score, and in and-or its and_matches may count fewer
  // than its AND matches, but only where another shard has found k AND matches, so the sum
  // over shards still reaches k and the query's answer is the AND answer; such a shard skips
  // its OR phase (its OR top-k would be dropped by the merge). Not for two-stage ranking
  // (candidates > 0), where each shard's own top candidates are the contract: throws
  // InputError.
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out, std::span<const QueryThresholdSlots> shared);
  ShardResult search_one(const Query& query, const SearchParams& params,
                         const QueryThresholdSlots& shared) const;
  // The sharing search's seed table: bounds of each term's K-th largest impact over the shards
  // that answer together (KthImpactTable::combine of their tables; the same vocabulary), used
  // instead of this shard's own table where a query's slots are linked. Its seed is a lower bound
  // of the collection's k-th score, which is what sharing prunes toward, so the merged answer
  // stays exact for the reason above. null: this shard's table.
  void set_collection_seeds(std::shared_ptr<const KthImpactTable> table);
  const KthImpactTable* kth_impacts() const { return kth_impacts_.get(); }  // this shard's
  // The query over the documents [begin, end) only (end = kNoDoc: to the shard's end), as one
  // GPU of several holding a docID range of the shard answers it; the same contract as
  // search_one's over that range (and-or: or_hits when the range's and_matches < k). Merging
  // the ranges' results (gpu/topk_rows.hpp) gives search_one's answer.
  ShardResult search_range(const Query& query, const SearchParams& params, DocId begin,
                           DocId end) const;

  // Resume (GPU post-processing): completes one query whose documents with docID < from_doc
  // have been processed already. `running` is what that processing found over [0, from_doc):
  //   and, or:  running.hits = the mode's top-k over [0, from_doc) (best first or any order,
  //             at most k documents of this shard, scores as the reference computes them);
  //   and-or:   running.hits = AND top-k, running.and_matches = AND matches in [0, from_doc)
  //             (exact whenever below k), running.or_hits = OR top-k over [0, from_doc) (needed
  //             whenever the total may stay below k).
  // Returns the query's ShardResult over the whole shard, as search_one would: the running
  // documents merged with those from [from_doc, num_docs). The running k-th score serves as
  // the initial threshold, so pruning and GS early termination start at once. Counters count
  // only the work of this call. from_doc >= num_docs returns the running answer.
  ShardResult resume(const Query& query, const SearchParams& params, DocId from_doc,
                     const ShardResult& running) const;
  // The same for modes and/or, with the running top-k as a list; throws InputError for and-or
  // (which needs the running AND count and OR top-k as well).
  ShardResult resume(const Query& query, const SearchParams& params, DocId from_doc,
                     std::span<const RankedDoc> running_top_k) const;

 private:
  struct ModeRun {
    std::vector<RankedDoc> hits;
    std::uint64_t and_matches = 0;
    bool early_terminated = false;
  };
  ModeRun run_mode(const Query& query, const SearchParams& params, bool conjunctive, DocId from_doc,
                   std::span<const RankedDoc> running, QueryCounters& counters,
                   const ThresholdSlot& external, const ThresholdSlot& moot = {}) const;
  ShardResult resume_sharing(const Query& query, const SearchParams& params, DocId from_doc,
                             const ShardResult& running, const QueryThresholdSlots& shared) const;
  // and-or's two phases into r (`early` set where one stopped early): the AND phase; then the OR
  // phase unless the AND answer is certain (r's own k AND matches, or the shared AND slot
  // finite), stopped and dropped if it becomes certain meanwhile.
  void and_phase_sharing(const Query& query, const SearchParams& params, DocId from_doc,
                         const ShardResult& running, const QueryThresholdSlots& shared,
                         ShardResult& r, bool& early) const;
  void or_phase_sharing(const Query& query, const SearchParams& params, DocId from_doc,
                        const ShardResult& running, const QueryThresholdSlots& shared,
                        ShardResult& r, bool& early) const;
  // `whole_shard`: the run is part of a query over every document of the shard (not a resume
  // from a docID, not a docID range), so a bound on the shard's k-th score holds for it.
  ModeRun run_range(const Query& query, const SearchParams& params, bool conjunctive, DocId begin,
                    DocId end, SharedThreshold& shared, bool concurrent, bool whole_shard,
                    QueryCounters& counters) const;
  // The starting threshold of a pruning OR run (threshold_seed.hpp, kth_impact_table.hpp).
  // `sharing`: the query's slots are linked (the collection's seed table applies); `known`: the
  // threshold the run starts from already (lists that cannot beat it are not decoded).
  double starting_threshold(const Query& query, const SearchParams& params, const QueryContext& ctx,
                            std::span<const PostingCursor> cursors, bool whole_shard, bool sharing,
                            double known) const;

  const ShardIndex& shard_;
  std::uint32_t shard_id_;
  CpuEngineOptions options_;
  std::vector<float> gs_coarse_;  // GS of every kGsStride-th document (daat_algorithms.hpp)
  std::vector<float> pagerank_suffix_max_;  // max PR' from every kGsStride-th document on
  std::vector<double> norms_;               // length_norm of every document (QueryContext::norms)
  // The same as a 2-byte code per document into a table of the distinct norms (empty when there
  // are more than 65,536 distinct lengths): a quarter of the bytes, so more of it stays cached.
  std::vector<std::uint16_t> norm_codes_;
  // Per term, its block of highest block maximum (the first such): the threshold seed's block
  // for k <= 128 without a scan of the list's maxima per query.
  std::vector<std::uint32_t> best_block_;
  // Per term, lower bounds of its K-th largest impacts (options_.seed_from_kth_impacts).
  std::unique_ptr<KthImpactTable> kth_impacts_;
  std::shared_ptr<const KthImpactTable> collection_seeds_;  // set_collection_seeds
  std::vector<double> norm_table_;
  bool gs_ordered_ = false;
};

}  // namespace gpusearch::cpu
