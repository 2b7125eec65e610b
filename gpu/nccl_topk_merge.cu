#include "gpu/nccl_topk_merge.hpp"

#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "gpu/cuda_util.hpp"

namespace gpusearch::gpu {

namespace {

[[noreturn]] void throw_nccl_error(ncclResult_t status, const char* what, const char* file,
                                   int line) {
  throw NcclError(fmt::format("{} failed at {}:{}: {} ({})", what, file, line,
                              ncclGetErrorString(status), int(status)));
}

#define GPUSEARCH_NCCL_CHECK(call)                                                           \
  do {                                                                                       \
    const ncclResult_t gpusearch_nccl_status_ = (call);                                      \
    if (gpusearch_nccl_status_ != ncclSuccess)                                               \
      ::gpusearch::gpu::throw_nccl_error(gpusearch_nccl_status_, #call, __FILE__, __LINE__); \
  } while (0)

constexpr unsigned kMergeThreads = 128;

// The row pointers and offsets of one merge, passed by value to the kernel.
struct MergeArgs {
  const char* rows[kMaxRangesPerIsn];
  std::uint32_t doc_offset[kMaxRangesPerIsn];
  unsigned ranges, queries, k;
  RangeHit* out_hits;
  RowMeta* out_meta;
};

// One block per row: each thread places hits by their merged rank (range_hit_merged_rank), a
// row's O(G k log k) spread over the block, where one thread a row walked its G k hits in turn
// (2,000 dependent steps a row at k = 1000 on two GPUs). The result equals merge_range_rows, the
// CPU twin (NcclTopKMerge.EqualsTheCpuTwinOnEveryGpuCount).
__global__ void __launch_bounds__(kMergeThreads) merge_rows_kernel(MergeArgs a) {
  const unsigned q = blockIdx.x;
  __shared__ unsigned counts[kMaxRangesPerIsn];
  if (threadIdx.x < a.ranges)
    counts[threadIdx.x] = range_row_count(a.rows[threadIdx.x], a.queries, a.k, q);
  __syncthreads();
  unsigned total = 0;
  for (unsigned r = 0; r < a.ranges; ++r) total += counts[r];
  if (threadIdx.x == 0) {
    std::uint64_t and_matches = 0;
    for (unsigned r = 0; r < a.ranges; ++r)
      and_matches += reinterpret_cast<const RowMeta*>(a.rows[r] + std::uint64_t(a.queries) * a.k *
                                                                      sizeof(RangeHit))[q]
                         .and_matches;
    a.out_meta[q] = RowMeta{total < a.k ? total : a.k, 0, and_matches};
  }
  RangeHit* out = a.out_hits + std::uint64_t(q) * a.k;
  for (unsigned item = threadIdx.x; item < total; item += blockDim.x) {
    unsigned r = 0, i = item;
    while (i >= counts[r]) i -= counts[r++];
    const unsigned rank =
        range_hit_merged_rank(a.rows, a.doc_offset, a.ranges, a.queries, a.k, q, r, i);
    if (rank < a.k) {
      const RangeHit& h = reinterpret_cast<const RangeHit*>(a.rows[r])[std::uint64_t(q) * a.k + i];
      out[rank] = RangeHit{h.score, h.doc + a.doc_offset[r], 0};
    }
  }
}

// One NCCL communicator per GPU of the ISN, created together (ncclCommInitAll: one process,
// several devices). Destroyed normally; aborted when a call on it has failed (a failed
// communicator may hang in ncclCommDestroy).
class Communicators {
 public:
  explicit Communicators(const std::vector<int>& devices) : comms_(devices.size(), nullptr) {
    GPUSEARCH_NCCL_CHECK(ncclCommInitAll(comms_.data(), int(devices.size()), devices.data()));
  }
  ~Communicators() {
    for (ncclComm_t c : comms_) {
      if (!c) continue;
      if (failed_)
        ncclCommAbort(c);
      else
        ncclCommDestroy(c);
    }
  }
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  ncclComm_t operator[](std::size_t i) const { return comms_[i]; }
  void mark_failed() { failed_ = true; }

 private:
  std::vector<ncclComm_t> comms_;
  bool failed_ = false;
};

}  // namespace

std::vector<int> checked_isn_devices(std::vector<int> devices) {
  const int present = cuda_device_count();
  if (devices.empty() || devices.size() > kMaxRangesPerIsn)
    throw InputError(
        "--gpus-per-isn", 0,
        fmt::format("{} GPUs per ISN: between 1 and {}", devices.size(), kMaxRangesPerIsn));
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] < 0 || devices[i] >= present)
      throw InputError(
          "--gpus-per-isn", 0,
          fmt::format("GPU {} requested but this machine has {} GPU(s)", devices[i], present));
    if (std::count(devices.begin(), devices.end(), devices[i]) > 1)
      throw InputError("--gpus-per-isn", 0,
                       fmt::format("GPU {} listed twice: an ISN takes each GPU once (ISNs share "
                                   "GPUs, not the GPUs of one ISN)",
                                   devices[i]));
  }
  return devices;
}

struct NcclTopKMerge::Impl {
  explicit Impl(std::vector<int> d) : devices(checked_isn_devices(std::move(d))) {
    // NVLink SHARP multicast off (KINDS.md: not available to these jobs); the environment may
    // still say otherwise on purpose.
    ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    for (int dev : devices) {
      ScopedDevice on(dev);
      streams.push_back(std::make_unique<CudaStream>());
    }
    comms = std::make_unique<Communicators>(devices);
    connect();
  }
  // NCCL sets up a pair's connection at its first send/recv (lazily): a first merge paid tens of
  // ms for it (H200 x2, session 44). One small exchange here moves that to the ISN's start.
  void connect() {
    const unsigned g = unsigned(devices.size());
    if (g < 2) return;
    constexpr std::size_t kBytes = 64;
    std::vector<DeviceBuffer<char>> buffers(g);
    for (unsigned r = 0; r < g; ++r) {
      ScopedDevice on(devices[r]);
      buffers[r].resize(r == 0 ? kBytes * g : kBytes);
    }
    try {
      GPUSEARCH_NCCL_CHECK(ncclGroupStart());
      for (unsigned r = 1; r < g; ++r) {
        GPUSEARCH_NCCL_CHECK(
            ncclSend(buffers[r].data(), kBytes, ncclChar, 0, (*comms)[r], streams[r]->get()));
        GPUSEARCH_NCCL_CHECK(ncclRecv(buffers[0].data() + kBytes * r, kBytes, ncclChar, int(r),
                                      (*comms)[0], streams[0]->get()));
      }
      GPUSEARCH_NCCL_CHECK(ncclGroupEnd());
      for (unsigned r = 0; r < g; ++r) {
        ScopedDevice on(devices[r]);
        streams[r]->synchronize();
      }
    } catch (...) {
      comms->mark_failed();
      throw;
    }
    for (unsigned r = 0; r < g; ++r) {  // freed on their own devices
      ScopedDevice on(devices[r]);
      buffers[r].resize(0);
    }
  }
  ~Impl() {
    // The communicators go before the streams they ran on.
    comms.reset();
  }
  std::vector<int> devices;
  std::vector<std::unique_ptr<CudaStream>> streams;
  std::unique_ptr<Communicators> comms;
  DeviceBuffer<char> gathered;  // on the lead: the other GPUs' rows, one slot each
  DeviceBuffer<char> merged;    // on the lead: hits then meta
  PinnedBuffer<char> host;
  std::uint64_t bytes_received = 0;
};

NcclTopKMerge::NcclTopKMerge(std::vector<int> devices)
    : impl_(std::make_unique<Impl>(std::move(devices))) {}
NcclTopKMerge::~NcclTopKMerge() = default;

const std::vector<int>& NcclTopKMerge::devices() const {
  return impl_->devices;
}
std::uint64_t NcclTopKMerge::bytes_received() const {
  return impl_->bytes_received;
}

void NcclTopKMerge::merge(const std::vector<const void*>& device_rows,
                          const std::vector<std::uint32_t>& doc_offset, unsigned queries,
                          unsigned k, std::vector<RangeHit>& hits, std::vector<RowMeta>& meta) {
  Impl& m = *impl_;
  const unsigned g = unsigned(m.devices.size());
  if (device_rows.size() != g || doc_offset.size() != g)
    throw Error(fmt::format("NcclTopKMerge::merge: {} row sets and {} offsets for {} GPUs",
                            device_rows.size(), doc_offset.size(), g));
  hits.assign(std::size_t(queries) * k, RangeHit{});
  meta.assign(queries, RowMeta{});
  if (queries == 0 || k == 0) return;
  const std::uint64_t bytes = range_rows_bytes(queries, k);
  const std::uint64_t out_bytes =
      std::uint64_t(queries) * k * sizeof(RangeHit) + std::uint64_t(queries) * sizeof(RowMeta);
  {
    ScopedDevice lead(m.devices[0]);
    m.gathered.reserve(std::size_t(bytes) * g);
    m.merged.reserve(out_bytes);
    m.host.reserve(out_bytes);
  }
  try {
    // Every other GPU sends its rows to the lead, which receives them into its slots: one
    // grouped call, so NCCL runs the transfers concurrently (no host staging).
    if (g > 1) {
      GPUSEARCH_NCCL_CHECK(ncclGroupStart());
      for (unsigned r = 1; r < g; ++r) {
        GPUSEARCH_NCCL_CHECK(
            ncclSend(device_rows[r], bytes, ncclChar, 0, (*m.comms)[r], m.streams[r]->get()));
        GPUSEARCH_NCCL_CHECK(ncclRecv(m.gathered.data() + std::size_t(bytes) * r, bytes, ncclChar,
                                      int(r), (*m.comms)[0], m.streams[0]->get()));
      }
      GPUSEARCH_NCCL_CHECK(ncclGroupEnd());
      m.bytes_received += bytes * (g - 1);
    }
  } catch (...) {
    m.comms->mark_failed();
    throw;
  }
  ScopedDevice lead(m.devices[0]);
  MergeArgs a{};
  a.rows[0] = static_cast<const char*>(device_rows[0]);  // the lead's own rows, in place
  for (unsigned r = 1; r < g; ++r) a.rows[r] = m.gathered.data() + std::size_t(bytes) * r;
  for (unsigned r = 0; r < g; ++r) a.doc_offset[r] = doc_offset[r];
  a.ranges = g;
  a.queries = queries;
  a.k = k;
  a.out_hits = reinterpret_cast<RangeHit*>(m.merged.data());
  a.out_meta =
      reinterpret_cast<RowMeta*>(m.merged.data() + std::size_t(queries) * k * sizeof(RangeHit));
  cudaStream_t s = m.streams[0]->get();
  merge_rows_kernel<<<queries, kMergeThreads, 0, s>>>(a);
  GPUSEARCH_CUDA_CHECK_LAUNCH("merge_rows_kernel");
  // One copy of the merged rows back to the host.
  GPUSEARCH_CUDA_CHECK(
      cudaMemcpyAsync(m.host.data(), m.merged.data(), out_bytes, cudaMemcpyDeviceToHost, s));
  for (unsigned r = 1; r < g; ++r) {
    ScopedDevice on(m.devices[r]);
    m.streams[r]->synchronize();  // the sends are done before the caller reuses its rows
  }
  m.streams[0]->synchronize();
  std::memcpy(hits.data(), m.host.data(), std::size_t(queries) * k * sizeof(RangeHit));
  std::memcpy(meta.data(), m.host.data() + std::size_t(queries) * k * sizeof(RangeHit),
              std::size_t(queries) * sizeof(RowMeta));
}

}  // namespace gpusearch::gpu
