#include "gpu/device_list_cache.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <tbb/parallel_for.h>
#include <nlohmann/json.hpp>

#include "common/scoring.hpp"
#include "gpu/list_cache_kernels.hpp"

namespace gpusearch::gpu {

static_assert(sizeof(TableShift) == 3 * sizeof(std::uint64_t) &&
                  std::is_standard_layout_v<TableShift>,
              "the shift kernel reads TableShift entries as (first slot, slots, delta)");
static_assert(sizeof(OffsetPatch) == 2 * sizeof(std::uint64_t) &&
                  std::is_standard_layout_v<OffsetPatch>,
              "the scatter kernel reads OffsetPatch entries as (slot, offset) pairs");

namespace {

const std::uint64_t* as_pairs(const OffsetPatch* p) {
  return reinterpret_cast<const std::uint64_t*>(p);
}

constexpr std::uint64_t align4(std::uint64_t words) {
  return (words + 3) / 4 * 4;
}

template <typename T>
void upload(DeviceBuffer<T>& dst, std::span<const T> src) {
  dst.resize(src.size());
  if (!src.empty())
    GPUSEARCH_CUDA_CHECK(
        cudaMemcpy(dst.data(), src.data(), src.size_bytes(), cudaMemcpyHostToDevice));
}

std::uint64_t num_slots(const ShardIndex& shard) {
  return shard.block_last_docid().size() + shard.num_terms();
}

}  // namespace

std::uint64_t list_cache_resident_bytes(const ShardIndex& shard) {
  const std::uint64_t slots = num_slots(shard);
  const std::uint64_t docs = shard.num_docs();
  // Slot arrays: last docID and block maximum, and one offset table per lane; per document:
  // length norm in double and float, PageRank, GS.
  return slots * (sizeof(DocId) + sizeof(float) + DeviceListCache::kLanes * sizeof(std::uint64_t)) +
         docs * (sizeof(double) + 3 * sizeof(float));
}

DeviceListCache::DeviceListCache(const ShardIndex& shard, const DeviceListCacheOptions& options)
    : shard_(shard), numbering_(shard), directory_(shard, numbering_, options.cache_bytes) {
  const auto start = std::chrono::steady_clock::now();
  lane_words_ = options.batch_bytes / kLanes / 4 / 4 * 4;
  if (const char* v = std::getenv("GPUSEARCH_CHECK_CACHE_TABLES")) check_tables_ = v == std::string("1");
  const std::uint64_t cache_words = align4(directory_.capacity_words());
  pool_.resize(cache_words + kLanes * lane_words_);
  for (int l = 0; l < kLanes; ++l) {
    tables_[l].resize(numbering_.num_slots());
    GPUSEARCH_CUDA_CHECK(cudaMemset(tables_[l].data(), 0, tables_[l].bytes()));
    if (lane_words_ > 0) staging_[l].reserve_exact(lane_words_);
  }
  const std::vector<DocId> last = numbering_.slot_last_docid(shard);
  upload(last_docid_, std::span<const DocId>(last));
  const std::vector<float> max = numbering_.slot_block_max(shard);
  upload(block_max_, std::span<const float>(max));
  // The BM25 length normalization in double, by the same function the reference engine uses
  // (as gpu/device_shard.cpp).
  const IndexParams& p = shard.params();
  std::vector<double> norm(shard.num_docs());
  const auto lengths = shard.doc_lengths();
  for (DocId d = 0; d < shard.num_docs(); ++d)
    norm[d] = length_norm(p.bm25, lengths[d], p.collection.avg_doc_length);
  upload(length_norm_, std::span<const double>(norm));
  const std::vector<float> norm_f(norm.begin(), norm.end());
  upload(length_norm_f_, std::span<const float>(norm_f));
  upload(pagerank_, shard.pagerank());
  upload(global_score_, shard.global_scores());
  // The uploads' DMA (pageable cudaMemcpy may return before it lands) is done before any
  // kernel on the engine's non-blocking streams reads the arrays.
  GPUSEARCH_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  fill_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

CacheChange DeviceListCache::apply(std::span<const CachedList> target,
                                   std::uint64_t max_copy_bytes) {
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  if (check_tables_) check_tables("before a change");
  const auto start = Clock::now();
  CacheChange change = directory_.apply(target, max_copy_bytes);
  apply_seconds_.directory += seconds_since(start);
  auto t = Clock::now();
  relocate_in_pool(change.relocations);
  apply_seconds_.relocate += seconds_since(t);
  t = Clock::now();
  copy_to_pool(change.copies);
  apply_seconds_.copy += seconds_since(t);
  t = Clock::now();
  // The entries go up on the stream the kernels run on: a cudaMemcpy from pageable memory may
  // return before its DMA lands, and a kernel on a non-blocking stream is not ordered after it
  // (session 37: a shift kernel read the previous change's shifts, an illegal address).
  if (!change.shifts.empty() || !change.patches.empty()) {
    CudaStream stream;
    if (!change.shifts.empty()) {
      shift_scratch_.reserve(change.shifts.size());
      GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(shift_scratch_.data(), change.shifts.data(),
                                           change.shifts.size() * sizeof(TableShift),
                                           cudaMemcpyHostToDevice, stream.get()));
      for (int l = 0; l < kLanes; ++l)
        launch_shift_offsets(tables_[l].data(),
                             reinterpret_cast<const std::uint64_t*>(shift_scratch_.data()),
                             change.shifts.size(), stream.get());
    }
    if (!change.patches.empty()) {
      patch_scratch_.reserve(change.patches.size());
      GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(patch_scratch_.data(), change.patches.data(),
                                           change.patches.size() * sizeof(OffsetPatch),
                                           cudaMemcpyHostToDevice, stream.get()));
      for (int l = 0; l < kLanes; ++l)
        launch_scatter_offsets(tables_[l].data(), as_pairs(patch_scratch_.data()),
                               change.patches.size(), 0, stream.get());
    }
    stream.synchronize();
  }
  // The copies without a staging region (copy_to_pool) are pageable cudaMemcpy calls too: their
  // DMA is done before the next call's kernels may read the region.
  GPUSEARCH_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  apply_seconds_.table += seconds_since(t);
  table_entries_ += change.patches.size();
  table_shifts_ += change.shifts.size();
  ++applies_;
  bytes_applied_ += change.words_copied * 4;
  bytes_relocated_ += change.words_relocated * 4;
  fill_seconds_ += seconds_since(start);
  if (check_tables_) check_tables(change.rebuilt ? "after a compaction" : "after a change");
  return change;
}

void DeviceListCache::check_tables(const char* when) const {
  std::vector<OffsetPatch> expected;
  for (const auto& [t, e] : directory_.entries()) {
    expected.clear();
    // The same entries a placement writes (ListCacheDirectory::table_entries, one list).
    const TermInfo& ti = shard_.term(t);
    const auto offsets = shard_.block_offsets();
    for (std::uint32_t j = 0; j <= e.blocks; ++j)
      expected.push_back({numbering_.first_slot(t) + j,
                          e.word_offset + (offsets[ti.first_block + j] - offsets[ti.first_block])});
    for (int l = 0; l < kLanes; ++l) {
      std::vector<std::uint64_t> got(expected.size());
      GPUSEARCH_CUDA_CHECK(cudaMemcpy(got.data(), tables_[l].data() + expected.front().slot,
                                      got.size() * sizeof(std::uint64_t),
                                      cudaMemcpyDeviceToHost));
      for (std::size_t j = 0; j < got.size(); ++j)
        if (got[j] != expected[j].word_offset)
          throw Error(fmt::format(
              "list cache table check {}: term {} ({} blocks cached at word {}), lane {}, block "
              "{}: the table holds {}, the cache {}",
              when, t, e.blocks, e.word_offset, l, j, got[j], expected[j].word_offset));
    }
  }
}

void DeviceListCache::relocate_in_pool(std::span<const WordRelocation> relocations) {
  if (relocations.empty()) return;
  // Through lane 0's region (no batch is in flight between calls): a group's pieces gathered
  // into it, then scattered to their places, one kernel each; the groups' move lists sit after
  // the gathered words.
  constexpr std::uint64_t kMoveWords = sizeof(WordMove) / 4;
  constexpr std::uint64_t kMaxPieceWords = 1 << 16;  // a thread block's share of a move
  constexpr std::size_t kMaxPieces = 4096;
  const std::uint64_t lists_words = 2 * kMaxPieces * kMoveWords + 4;
  if (lane_words_ < lists_words + kMaxPieceWords) {
    // No room to stage through: the kept lists come again from the host (the order is kept:
    // nothing is read from the region).
    std::vector<WordCopy> copies;
    copies.reserve(relocations.size());
    for (const WordRelocation& r : relocations) copies.push_back({r.host_word_begin, r.words, r.to});
    copy_to_pool(copies);
    return;
  }
  const std::uint64_t scratch_words = lane_words_ - lists_words;
  std::uint32_t* scratch = pool_.data() + align4(directory_.capacity_words());
  std::uint32_t* staging = staging_[0].data();
  CudaStream stream;
  std::vector<WordMove> gather, scatter;
  for (const auto& group :
       relocation_groups(relocations, scratch_words, kMaxPieceWords, kMaxPieces)) {
    gather.clear();
    scatter.clear();
    for (const RelocationPiece& p : group) {
      gather.push_back({p.from, p.scratch, p.words});
      scatter.push_back({p.scratch, p.to, p.words});
    }
    std::memcpy(staging, gather.data(), gather.size() * sizeof(WordMove));
    std::memcpy(staging + gather.size() * kMoveWords, scatter.data(),
                scatter.size() * sizeof(WordMove));
    const WordMove* lists = reinterpret_cast<const WordMove*>(scratch + scratch_words);
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(scratch + scratch_words, staging,
                                         2 * group.size() * sizeof(WordMove),
                                         cudaMemcpyHostToDevice, stream.get()));
    launch_move_words(scratch, pool_.data(), lists, group.size(), stream.get());
    launch_move_words(pool_.data(), scratch, lists + group.size(), group.size(), stream.get());
    stream.synchronize();  // the staging buffer is the next group's
  }
}

void DeviceListCache::copy_to_pool(std::span<const WordCopy> copies) {
  const std::uint32_t* postings = shard_.postings().data();
  constexpr std::uint64_t kMoveWords = sizeof(WordMove) / 4;
  if (lane_words_ < 1024) {  // no shipping region to stage through: one copy per list
    for (const WordCopy& c : copies)
      if (c.words > 0)
        GPUSEARCH_CUDA_CHECK(cudaMemcpy(pool_.data() + c.pool_word_offset,
                                        postings + c.host_word_begin, c.words * 4,
                                        cudaMemcpyHostToDevice));
    return;
  }
  // A plan change touches thousands of lists: one pageable cudaMemcpy each cost far more than
  // their bytes. The words go packed into lane 0's pinned staging, over in one copy to lane 0's
  // region (no batch is in flight between calls), and a kernel moves each list to its place;
  // chunks of one lane's size.
  std::uint32_t* staging = staging_[0].data();
  std::uint32_t* scratch = pool_.data() + align4(directory_.capacity_words());
  CudaStream stream;
  std::vector<WordMove> moves;
  std::uint64_t packed = 0;
  const auto flush = [&] {
    if (moves.empty()) return;
    const std::uint64_t moves_at = align4(packed);
    std::memcpy(staging + moves_at, moves.data(), moves.size() * sizeof(WordMove));
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(scratch, staging,
                                         (moves_at + moves.size() * kMoveWords) * 4,
                                         cudaMemcpyHostToDevice, stream.get()));
    launch_move_words(pool_.data(), scratch, reinterpret_cast<const WordMove*>(scratch + moves_at),
                      moves.size(), stream.get());
    stream.synchronize();  // the staging buffer is the next chunk's
    moves.clear();
    packed = 0;
  };
  std::vector<std::uint64_t> host_begin;  // per move: its first word in the mapped shard
  const auto pack_and_flush = [&] {
    // The packing is a gather from the mapped shard (page faults included): lists in parallel.
    tbb::parallel_for(std::size_t(0), moves.size(), [&](std::size_t i) {
      std::memcpy(staging + moves[i].src, postings + host_begin[i], moves[i].words * 4);
    });
    flush();
    host_begin.clear();
  };
  for (const WordCopy& c : copies) {
    for (std::uint64_t done = 0; done < c.words;) {
      const std::uint64_t fixed = align4(packed) + (moves.size() + 1) * kMoveWords + 4;
      if (fixed + 64 > lane_words_) {
        pack_and_flush();
        continue;
      }
      const std::uint64_t n = std::min(c.words - done, lane_words_ - fixed);
      moves.push_back({packed, c.pool_word_offset + done, n});
      host_begin.push_back(c.host_word_begin + done);
      packed += n;
      done += n;
    }
  }
  pack_and_flush();
}

void DeviceListCache::stage_batch(int lane, const ListBatch& batch, cudaStream_t stream) {
  if (batch.shipped.empty()) return;
  // The lane's region: words, then (16-byte aligned) the batch's entries, then its restores.
  constexpr std::uint64_t kEntryWords = sizeof(OffsetPatch) / 4;
  const std::uint64_t patch_at = align4(batch.shipped_words);
  const std::uint64_t restore_at = patch_at + batch.patches.size() * kEntryWords;
  const std::uint64_t total_words = restore_at + batch.restores.size() * kEntryWords;
  if (total_words > lane_words_)
    throw Error(fmt::format("list cache: a batch ships {} bytes, more than the lane's {} bytes",
                            total_words * 4, lane_words_ * 4));
  std::uint32_t* staging = staging_[lane].data();
  const std::uint32_t* postings = shard_.postings().data();
  // Posting words from the mapped shard into pinned memory, lists in parallel when many.
  auto copy_list = [&](std::size_t i) {
    const WordCopy& c = batch.shipped[i].copy;
    std::memcpy(staging + c.pool_word_offset, postings + c.host_word_begin, c.words * 4);
  };
  if (batch.shipped_words > (1u << 20))
    tbb::parallel_for(std::size_t(0), batch.shipped.size(), copy_list);
  else
    for (std::size_t i = 0; i < batch.shipped.size(); ++i) copy_list(i);
  std::memcpy(staging + patch_at, batch.patches.data(), batch.patches.size() * sizeof(OffsetPatch));
  std::memcpy(staging + restore_at, batch.restores.data(),
              batch.restores.size() * sizeof(OffsetPatch));
  const std::uint64_t lane_base = align4(directory_.capacity_words()) + lane * lane_words_;
  GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(pool_.data() + lane_base, staging, total_words * 4,
                                       cudaMemcpyHostToDevice, stream));
  launch_scatter_offsets(
      tables_[lane].data(),
      reinterpret_cast<const std::uint64_t*>(pool_.data() + lane_base + patch_at),
      batch.patches.size(), lane_base, stream);
}

void DeviceListCache::restore_after_kernels(int lane, const ListBatch& batch, cudaStream_t stream) {
  if (batch.restores.empty()) return;
  const std::uint64_t lane_base = align4(directory_.capacity_words()) + lane * lane_words_;
  const std::uint64_t restore_at =
      align4(batch.shipped_words) + batch.patches.size() * (sizeof(OffsetPatch) / 4);
  launch_scatter_offsets(
      tables_[lane].data(),
      reinterpret_cast<const std::uint64_t*>(pool_.data() + lane_base + restore_at),
      batch.restores.size(), 0, stream);
}

ShardView DeviceListCache::view(int lane) const {
  return ShardView{pool_.data(),      tables_[lane].data(), last_docid_.data(),
                   block_max_.data(), length_norm_.data(),  length_norm_f_.data(),
                   pagerank_.data(),  global_score_.data(), shard_.num_docs()};
}

std::uint64_t DeviceListCache::resident_bytes() const {
  std::uint64_t tables = 0;
  for (const auto& t : tables_) tables += t.bytes();
  return last_docid_.bytes() + block_max_.bytes() + tables + length_norm_.bytes() +
         length_norm_f_.bytes() + pagerank_.bytes() + global_score_.bytes();
}

nlohmann::json DeviceListCache::to_json() const {
  return {{"cache_capacity_bytes", cache_capacity_bytes()},
          {"cache_used_bytes", directory_.used_words() * 4},
          {"cache_lists", directory_.lists()},
          {"cache_blocks", directory_.cached_blocks_total()},
          {"shard_posting_bytes", shard_.postings().size_bytes()},
          {"ship_capacity_bytes_per_lane", ship_capacity_bytes()},
          {"batch_bytes", ship_capacity_bytes() * kLanes},
          {"resident_bytes", resident_bytes()},
          {"pool_bytes", pool_.bytes()},
          {"fill_seconds", fill_seconds_},
          {"cache_changes", applies_},
          {"cache_bytes_copied", bytes_applied_},
          {"cache_bytes_relocated", bytes_relocated_},
          {"cache_table_entries", table_entries_},
          {"cache_table_shifts", table_shifts_},
          {"apply_seconds",
           {{"directory", apply_seconds_.directory},
            {"relocate", apply_seconds_.relocate},
            {"copy", apply_seconds_.copy},
            {"table", apply_seconds_.table}}}};
}

}  // namespace gpusearch::gpu
