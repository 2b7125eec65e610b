// Several GPUs per ISN: the per-GPU top-k rows of a batch (each GPU answered it on its docID
// range of the shard, gpu/topk_rows.hpp) gathered into the lead GPU through NCCL (grouped
// ncclSend/ncclRecv straight between device buffers, no host staging), merged there by one
// kernel (each hit placed by range_hit_merged_rank; equal to merge_range_rows, the CPU twin), and
// copied back to the host once. The pairs' connections are made when the object is built.
// One NCCL communicator per ISN over its GPUs (one process drives them all: ncclCommInitAll),
// destroyed with the object, or aborted (ncclCommAbort) when an NCCL call has failed. NVLink
// multicast stays off (NCCL_NVLS_ENABLE=0 unless the environment says otherwise).
// Host-only header: no CUDA or NCCL header, so isn/ can hold one.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/error.hpp"
#include "gpu/topk_rows.hpp"

namespace gpusearch::gpu {

// An NCCL failure: the call, where, and NCCL's message.
class NcclError : public Error {
 public:
  using Error::Error;
};

// The GPUs of one ISN: between 1 and kMaxRangesPerIsn, each present on this machine, each once.
// Returns them; throws InputError naming --gpus-per-isn otherwise. The communicator checks its
// device set with it, and the query split (gpu/multi_gpu_engine.hpp), which has none, too.
std::vector<int> checked_isn_devices(std::vector<int> devices);

class NcclTopKMerge {
 public:
  // devices[0] is the lead GPU; at most kMaxRangesPerIsn devices, each once. Throws
  // InputError naming --gpus-per-isn for a device set this machine cannot give, NcclError or
  // CudaError when NCCL or CUDA fails.
  explicit NcclTopKMerge(std::vector<int> devices);
  ~NcclTopKMerge();
  NcclTopKMerge(const NcclTopKMerge&) = delete;
  NcclTopKMerge& operator=(const NcclTopKMerge&) = delete;

  // device_rows[g]: device memory on devices()[g] holding range g's rows for `queries` queries
  // at width k (range_rows_bytes(queries, k) bytes, complete: the caller has synchronized the
  // stream that wrote them); doc_offset[g]: range g's first document. Fills hits (queries * k,
  // shard docIDs, row q holding meta[q].count) and meta (queries).
  // (Vectors, not spans: the .cu files build as C++17.)
  void merge(const std::vector<const void*>& device_rows,
             const std::vector<std::uint32_t>& doc_offset, unsigned queries, unsigned k,
             std::vector<RangeHit>& hits, std::vector<RowMeta>& meta);

  const std::vector<int>& devices() const;
  std::uint64_t bytes_received() const;  // by the lead through NCCL, over every merge

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusearch::gpu
