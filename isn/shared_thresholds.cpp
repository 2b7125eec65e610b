#include "isn/shared_thresholds.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace gpusearch {

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, std::size_t(length));
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS)
    throw Error(fmt::format("--share-thresholds: {} failed: {} (run with --share-thresholds off)",
                            what, mpi_error_text(code)));
}

}  // namespace

ShareThresholds parse_share_thresholds(const std::string& s) {
  if (s == "auto") return ShareThresholds::kAuto;
  if (s == "on") return ShareThresholds::kOn;
  if (s == "off") return ShareThresholds::kOff;
  throw InputError("--share-thresholds", 0, fmt::format("'{}': give on, off or auto", s));
}

SharedThresholdWindow::SharedThresholdWindow(MPI_Comm node) : node_(node) {
  try {
    // Errors come back as codes here (a clear message, then the ISN goes on without sharing
    // only if every ISN of the node failed alike: see run_isn), not as an abort.
    check(MPI_Comm_set_errhandler(node_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    int rank = 0;
    check(MPI_Comm_rank(node_, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(node_, &sharers_), "MPI_Comm_size");
    const std::size_t words = kBatchRing * kQueriesPerBatch * kWordsPerQuery;
    // The node's first ISN holds the whole array; the others map it.
    const MPI_Aint bytes = rank == 0 ? MPI_Aint(words * sizeof(std::uint64_t)) : 0;
    void* base = nullptr;
    check(MPI_Win_allocate_shared(bytes, int(sizeof(std::uint64_t)), MPI_INFO_NULL, node_, &base,
                                  &window_),
          "MPI_Win_allocate_shared");
    MPI_Aint size = 0;
    int unit = 0;
    check(MPI_Win_shared_query(window_, 0, &size, &unit, &base), "MPI_Win_shared_query");
    if (std::size_t(size) < words * sizeof(std::uint64_t))
      throw Error(fmt::format("--share-thresholds: the shared window holds {} bytes, not {}", size,
                              words * sizeof(std::uint64_t)));
    slots_ = static_cast<std::uint64_t*>(base);  // page-aligned: a query's words, six lines
    // Sequence number 0 everywhere: every slot empty before any ISN reads one.
    if (rank == 0)
      for (std::size_t i = 0; i < words; ++i)
        std::atomic_ref<std::uint64_t>(slots_[i]).store(0, std::memory_order_relaxed);
    check(MPI_Barrier(node_), "MPI_Barrier");
  } catch (...) {
    if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
    MPI_Comm_free(&node_);
    throw;
  }
}

SharedThresholdWindow::~SharedThresholdWindow() {
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

void SharedThresholdWindow::slots_for(std::uint64_t batch_id, std::size_t queries,
                                      std::vector<cpu::QueryThresholdSlots>& out,
                                      bool unions) const {
  out.assign(queries, cpu::QueryThresholdSlots{});
  const std::uint32_t sequence = sequence_of_batch(batch_id);
  std::uint64_t* batch = slots_ + (batch_id % kBatchRing) * kQueriesPerBatch * kWordsPerQuery;
  for (std::size_t q = 0; q < queries && q < kQueriesPerBatch; ++q) {
    std::uint64_t* and_words = batch + kWordsPerQuery * q;
    std::uint64_t* or_words = and_words + kWordsPerPhase;
    const std::uint32_t capacity = unions ? cpu::ThresholdSlot::kUnionCapacity : 0;
    out[q] = {
        cpu::ThresholdSlot(and_words, sequence, unions ? and_words + kSlotWords : nullptr,
                           capacity),
        cpu::ThresholdSlot(or_words, sequence, unions ? or_words + kSlotWords : nullptr, capacity)};
  }
}

}  // namespace gpusearch

namespace gpusearch {

namespace {

// Every rank's block of `mine` (counts[r] elements of MPI type `type`), in rank order.
template <typename T>
std::vector<T> allgather_rows(MPI_Comm comm, const std::vector<T>& mine,
                              const std::vector<int>& counts, MPI_Datatype type) {
  std::vector<int> displs(counts.size(), 0);
  for (std::size_t r = 1; r < counts.size(); ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<T> all(std::size_t(displs.back() + counts.back()));
  check(MPI_Allgatherv(mine.data(), int(mine.size()), type, all.data(), counts.data(),
                       displs.data(), type, comm),
        "MPI_Allgatherv (seed tables)");
  return all;
}

}  // namespace

std::shared_ptr<const KthImpactTable> SharedThresholdWindow::combine_seed_tables(
    const KthImpactTable* mine, std::uint64_t vocabulary) const {
  const KthImpactTable::Rows rows = mine ? mine->rows() : KthImpactTable::Rows{};
  // Per rank: has a table, terms, row count, value count, the vocabulary's fingerprint.
  const std::uint64_t header[5] = {mine != nullptr, rows.num_terms, rows.terms.size(),
                                   rows.values.size(), vocabulary};
  std::vector<std::uint64_t> headers(5 * std::size_t(sharers_));
  check(MPI_Allgather(header, 5, MPI_UINT64_T, headers.data(), 5, MPI_UINT64_T, node_),
        "MPI_Allgather (seed tables)");
  std::vector<int> row_counts(static_cast<std::size_t>(sharers_)),
      value_counts(static_cast<std::size_t>(sharers_));
  bool usable = true;
  for (int r = 0; r < sharers_; ++r) {
    const std::uint64_t* h = &headers[5 * std::size_t(r)];
    usable = usable && h[0] == 1 && h[1] == header[1] && h[4] == vocabulary;
    row_counts[std::size_t(r)] = int(h[2]);
    value_counts[std::size_t(r)] = int(h[3]);
  }
  if (!usable) return nullptr;  // every rank decides the same from the same headers
  const auto terms = allgather_rows(node_, rows.terms, row_counts, MPI_UINT32_T);
  const auto counts = allgather_rows(node_, rows.counts, row_counts, MPI_UINT8_T);
  const auto values = allgather_rows(node_, rows.values, value_counts, MPI_FLOAT);
  std::vector<KthImpactTable> tables;
  std::size_t row = 0, value = 0;
  for (int r = 0; r < sharers_; ++r) {
    KthImpactTable::Rows theirs;
    theirs.num_terms = rows.num_terms;
    const std::size_t nr = std::size_t(row_counts[std::size_t(r)]);
    const std::size_t nv = std::size_t(value_counts[std::size_t(r)]);
    theirs.terms.assign(terms.begin() + std::ptrdiff_t(row),
                        terms.begin() + std::ptrdiff_t(row + nr));
    theirs.counts.assign(counts.begin() + std::ptrdiff_t(row),
                         counts.begin() + std::ptrdiff_t(row + nr));
    theirs.values.assign(values.begin() + std::ptrdiff_t(value),
                         values.begin() + std::ptrdiff_t(value + nv));
    row += nr;
    value += nv;
    tables.push_back(KthImpactTable::from_rows(theirs));
  }
  std::vector<const KthImpactTable*> ptrs;
  for (const KthImpactTable& t : tables) ptrs.push_back(&t);
  return std::make_shared<const KthImpactTable>(KthImpactTable::combine(ptrs));
}

}  // namespace gpusearch
