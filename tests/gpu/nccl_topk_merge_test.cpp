// The multi-GPU merge (gpu/nccl_topk_merge.hpp) against its CPU twin (gpu/topk_rows.hpp): per
// GPU, random rows with ties, empty and short rows go to that GPU's memory; the NCCL gather on
// the lead GPU and its merge kernel must give exactly the twin's rows. G = 1 on every GPU host,
// and up to 8 where the host has that many GPUs. Bad device sets are refused naming the flag.
// Skipped, loudly, without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "gpu/cuda_util.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/nccl_topk_merge.hpp"
#include "gpu/topk_rows.hpp"

using namespace gpusearch;
using namespace gpusearch::gpu;

namespace {

void check_merge(unsigned ranges, unsigned queries, unsigned k, std::mt19937& rng) {
  std::vector<int> devices(ranges);
  std::iota(devices.begin(), devices.end(), 0);
  NcclTopKMerge merge(devices);
  const auto first = split_doc_ranges(100000, ranges);
  const std::uint64_t bytes = range_rows_bytes(queries, k);
  std::vector<std::vector<char>> host_rows(ranges, std::vector<char>(bytes));
  std::vector<std::unique_ptr<DeviceBuffer<char>>> device_rows;
  std::vector<const void*> row_ptrs;
  for (unsigned r = 0; r < ranges; ++r) {
    auto* hits = reinterpret_cast<RangeHit*>(host_rows[r].data());
    auto* meta = reinterpret_cast<RowMeta*>(host_rows[r].data() +
                                            std::uint64_t(queries) * k * sizeof(RangeHit));
    for (unsigned q = 0; q < queries; ++q) {
      const unsigned n = std::min<unsigned>(unsigned(rng() % (k + 2)), k);
      std::vector<std::pair<double, std::uint32_t>> row;
      for (unsigned i = 0; i < n; ++i)
        row.push_back({double(rng() % 5) * 0.25, std::uint32_t(rng() % 1000) * 7 + i});
      std::sort(row.begin(), row.end(), [](auto& a, auto& b) {
        return range_hit_before(a.first, a.second, b.first, b.second);
      });
      for (unsigned i = 0; i < n; ++i) hits[q * k + i] = RangeHit{row[i].first, row[i].second, 0};
      meta[q] = RowMeta{n, 0, std::uint64_t(rng() % 9)};
    }
    ScopedDevice on(devices[r]);
    device_rows.push_back(std::make_unique<DeviceBuffer<char>>(bytes));
    GPUSEARCH_CUDA_CHECK(
        cudaMemcpy(device_rows.back()->data(), host_rows[r].data(), bytes, cudaMemcpyHostToDevice));
    row_ptrs.push_back(device_rows.back()->data());
  }
  std::vector<RangeHit> hits;
  std::vector<RowMeta> meta;
  merge.merge(row_ptrs, std::vector<std::uint32_t>(first.begin(), first.begin() + ranges), queries,
              k, hits, meta);
  std::vector<const char*> twin_rows;
  for (auto& r : host_rows) twin_rows.push_back(r.data());
  std::vector<RangeHit> want(k);
  for (unsigned q = 0; q < queries; ++q) {
    RowMeta want_meta{};
    merge_range_rows(twin_rows.data(), first.data(), ranges, queries, k, q, want.data(),
                     &want_meta);
    ASSERT_EQ(meta[q].count, want_meta.count) << ranges << " GPUs, k " << k << ", query " << q;
    EXPECT_EQ(meta[q].and_matches, want_meta.and_matches);
    for (unsigned i = 0; i < want_meta.count; ++i) {
      EXPECT_EQ(hits[std::size_t(q) * k + i].score, want[i].score);
      EXPECT_EQ(hits[std::size_t(q) * k + i].doc, want[i].doc);
    }
  }
  if (ranges > 1) {
    EXPECT_EQ(merge.bytes_received(), bytes * (ranges - 1));
  }
}

}  // namespace

TEST(NcclTopKMerge, EqualsTheCpuTwinOnEveryGpuCount) {
  if (!gpu_available())
    GTEST_SKIP() << "NO CUDA DEVICE: GPU test skipped (run launch/gpu-host.sh on a GPU host)";
  std::mt19937 rng(17);
  const unsigned gpus = std::min<unsigned>(unsigned(gpu_device_count()), kMaxRangesPerIsn);
  for (unsigned g = 1; g <= gpus; ++g)
    for (unsigned k : {1u, 10u, 100u}) check_merge(g, 300, k, rng);
  if (gpus < 2) std::cout << "note: one GPU here: the NCCL gather ran with G = 1 only\n";
}

TEST(NcclTopKMerge, BadDeviceSetsNameTheFlag) {
  if (!gpu_available())
    GTEST_SKIP() << "NO CUDA DEVICE: GPU test skipped (run launch/gpu-host.sh on a GPU host)";
  const int n = gpu_device_count();
  for (const std::vector<int>& bad :
       {std::vector<int>{}, std::vector<int>{n}, std::vector<int>{0, 0}}) {
    try {
      NcclTopKMerge merge(bad);
      ADD_FAILURE() << "accepted a bad device set of " << bad.size();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--gpus-per-isn"), std::string::npos) << e.what();
    }
  }
}
