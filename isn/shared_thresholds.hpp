// Shared query thresholds between the ISNs of one node (--share-thresholds, issue 16): every ISN
// of the node answers the same batch (same batch id, same queries in the same order) on its own
// shard, and each query's running k-th score on any shard is a lower bound of its final k-th
// score, so the ISNs prune against the best one any of them has found, as one engine's
// intra-query parts do (isn/cpu_engine/threshold_slot.hpp). Without it, four ISNs on quarter
// shards each prune against their own lower k-th score and do more work together than one ISN
// on the whole shard (tests/benchmarks/NOTES-cluster.md, "Shared thresholds").
//
// The slots live in an MPI shared-memory window over the node's ISNs (MPI_Comm_split_type
// MPI_COMM_TYPE_SHARED, MPI_Win_allocate_shared): a ring of kBatchRing batches of
// kQueriesPerBatch queries, two slots (AND, OR) per query, each in a cache line of its own and
// with its union of published scores in two more (the ISNs work on neighbouring queries of a
// batch at the same time: slots of several queries in one line would bounce it between their
// cores at every raise); 48 MB in all. Batch b uses ring entry b mod kBatchRing
// under sequence number b + 1 (mod 2^32, never 0); a query past kQueriesPerBatch shares nothing.
#pragma once

#include <mpi.h>

#include <memory>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/kth_impact_table.hpp"
#include "isn/cpu_engine/threshold_slot.hpp"

namespace gpusearch {

enum class ShareThresholds { kAuto, kOn, kOff };
ShareThresholds parse_share_thresholds(const std::string& s);  // throws InputError

class SharedThresholdWindow {
 public:
  static constexpr std::size_t kBatchRing = 32;
  static constexpr std::size_t kQueriesPerBatch = 4096;
  // Per query two phases (AND, OR), each a slot in a cache line of its own (read at almost every
  // candidate of every sharer: written only when the threshold rises) and its union of the best
  // published scores (ThresholdSlot::publish) in the next two lines (written at every
  // publication): 24 words.
  static constexpr std::size_t kSlotWords = 8;
  static constexpr std::size_t kWordsPerPhase = kSlotWords + 16;
  static_assert(cpu::ThresholdSlot::kUnionCapacity <= 16);
  static constexpr std::size_t kWordsPerQuery = 2 * kWordsPerPhase;

  // Collective over `node` (the node's ISNs, every one of which must construct it); takes
  // ownership of `node` (freed in the destructor, also when this throws). Throws Error with MPI's
  // message when the window cannot be made.
  explicit SharedThresholdWindow(MPI_Comm node);
  ~SharedThresholdWindow();  // MPI_Win_free (collective over the node), MPI_Comm_free
  SharedThresholdWindow(const SharedThresholdWindow&) = delete;
  SharedThresholdWindow& operator=(const SharedThresholdWindow&) = delete;

  int sharers() const { return sharers_; }
  // The slot pairs of batch `batch_id`'s queries 0..queries-1 (unlinked past kQueriesPerBatch);
  // `unions`: with their unions of published scores (--share-unions).
  void slots_for(std::uint64_t batch_id, std::size_t queries,
                 std::vector<cpu::QueryThresholdSlots>& out, bool unions = true) const;
  static std::uint32_t sequence_of_batch(std::uint64_t batch_id) {
    return std::uint32_t(batch_id % 0xFFFFFFFFull) + 1;
  }

  // Collective over the node's ISNs (every one calls it, also one that failed at start-up, with
  // null): their CPU engines' K-th impact tables combined (KthImpactTable::combine), the seed a
  // sharing query starts from on every shard (issue 16: a quarter shard's own table bounds its
  // own k-th score, a quarter of the collection's). null where an ISN has no table, or the
  // vocabularies differ (`vocabulary`: a fingerprint of the shard's; the term ids must agree).
  std::shared_ptr<const KthImpactTable> combine_seed_tables(const KthImpactTable* mine,
                                                            std::uint64_t vocabulary) const;

 private:
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  std::uint64_t* slots_ = nullptr;  // kBatchRing * kQueriesPerBatch * kWordsPerQuery words
  int sharers_ = 1;
};

}  // namespace gpusearch
