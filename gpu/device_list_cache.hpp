// The GPU list cache (paper 000, 3.1.2, 3.3.5): a shard served from a device memory budget
// smaller than its postings. Resident for the whole shard: per-block metadata in the device
// block numbering (common/list_cache.hpp: each list's blocks, then a spare slot) and the
// per-document arrays. Posting words live in one pool: the cache region (S_c, filled from a
// plan and moved by apply()) and one shipping region per pipeline lane (S_b / 2 each), which a
// batch fills with the lists it needs and the cache lacks. Each lane has its own block-offset
// table: the cache's entries, plus the entries of the lists its current batch shipped, which a
// small scatter kernel writes after the batch's copy. The query kernels read ShardView as for
// the whole-shard image (gpu/device_shard.hpp): they need no change.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include <nlohmann/json_fwd.hpp>

#include "common/list_cache.hpp"
#include "common/shard_index.hpp"
#include "gpu/batch_layout.hpp"
#include "gpu/cuda_util.hpp"

namespace gpusearch::gpu {

struct DeviceListCacheOptions {
  std::uint64_t cache_bytes = 0;  // S_c: the cache region
  std::uint64_t batch_bytes = 0;  // S_b: both lanes' shipping regions
};

// Device bytes a list cache of these sizes takes for `shard`, beside S_c + S_b: block
// metadata, two lane tables and the per-document arrays.
std::uint64_t list_cache_resident_bytes(const ShardIndex& shard);

class DeviceListCache {
 public:
  static constexpr int kLanes = 2;
  // Uploads the resident arrays and allocates the pool and the pinned staging buffers (on the
  // current device). The cache starts empty: fill it with apply().
  DeviceListCache(const ShardIndex& shard, const DeviceListCacheOptions& options);

  // Moves the cache toward `target` (ListCacheDirectory::apply) and makes the device follow:
  // the copies into the cache region, then the table entries in every lane's table. Returns
  // when done. Call only while no batch is in flight.
  CacheChange apply(std::span<const CachedList> target, std::uint64_t max_copy_bytes = ~0ull);

  // Packs the batch's shipped lists and table entries into the lane's pinned staging buffer
  // and issues, on `stream`, one copy into the lane's shipping region and the scatter into the
  // lane's table. The staging buffer is reused by the lane's next batch: the caller waits for
  // this batch's copy first (the engine finishes a lane's batch before packing its next).
  void stage_batch(int lane, const ListBatch& batch, cudaStream_t stream);
  // After the batch's kernels on `stream`: writes the cache's entries back over those of the
  // cached-in-part lists the batch shipped whole (ListBatchOptions::ship_tails), so that the
  // lane's table again holds the cache for its next batch.
  void restore_after_kernels(int lane, const ListBatch& batch, cudaStream_t stream);

  const ListCacheDirectory& directory() const { return directory_; }
  const DeviceBlockNumbering& numbering() const { return numbering_; }
  // The kernels' view for a batch on `lane`.
  ShardView view(int lane) const;
  std::uint64_t ship_capacity_bytes() const { return lane_words_ * 4; }
  std::uint64_t cache_capacity_bytes() const { return directory_.capacity_words() * 4; }
  std::uint64_t resident_bytes() const;
  double fill_seconds() const { return fill_seconds_; }
  nlohmann::json to_json() const;

 private:
  const ShardIndex& shard_;
  DeviceBlockNumbering numbering_;
  ListCacheDirectory directory_;
  std::uint64_t lane_words_ = 0;  // one lane's shipping region, in words (a multiple of 4)
  DeviceBuffer<std::uint32_t> pool_;
  std::array<DeviceBuffer<std::uint64_t>, kLanes> tables_;
  std::array<PinnedBuffer<std::uint32_t>, kLanes> staging_;
  DeviceBuffer<std::uint32_t> last_docid_;
  DeviceBuffer<float> block_max_;
  DeviceBuffer<double> length_norm_;
  DeviceBuffer<float> length_norm_f_;
  DeviceBuffer<float> pagerank_;
  DeviceBuffer<float> global_score_;
  // Posting words from the mapped shard to their places in the cache region.
  void copy_to_pool(std::span<const WordCopy> copies);
  // A rebuild's kept lists moved within the cache region (device to device).
  void relocate_in_pool(std::span<const WordRelocation> relocations);
  // With GPUSEARCH_CHECK_CACHE_TABLES=1 in the environment (a diagnostic: it reads both lane
  // tables back, hundreds of MB at GOV2 scale), apply() checks before and after each change
  // that every lane table holds the cache's own entries for every cached prefix, and throws
  // naming the first that does not.
  void check_tables(const char* when) const;
  bool check_tables_ = false;
  DeviceBuffer<OffsetPatch> patch_scratch_;  // apply()'s table entries
  DeviceBuffer<TableShift> shift_scratch_;   // and its relocated lists' shifts
  double fill_seconds_ = 0;
  std::uint64_t applies_ = 0, bytes_applied_ = 0, bytes_relocated_ = 0, table_entries_ = 0,
                table_shifts_ = 0;
  struct ApplySeconds {  // where apply()'s time goes, summed over the changes
    double directory = 0, relocate = 0, copy = 0, table = 0;
  } apply_seconds_;
};

}  // namespace gpusearch::gpu
