// --shm-eager-bytes (common/wire/shared_memory_eager.hpp): the flag read before MPI_Init, and the
// Open MPI parameters it becomes, fitted to the shared memory a rank may use. The effect itself
// (a message that does not wait for its sender) is mpi.cluster.shm_eager_answers.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/wire/shared_memory_eager.hpp"

namespace gpusearch::wire {
namespace {

std::size_t read_flag(std::vector<std::string> args) {
  args.insert(args.begin(), "gpusearch-isn");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return shm_eager_bytes_in(int(argv.size()), argv.data());
}

std::map<std::string, std::string> parameters(std::size_t eager, std::uint64_t budget) {
  std::map<std::string, std::string> m;
  for (auto& [name, value] : shm_eager_parameters(eager, budget)) m[name] = value;
  return m;
}

TEST(ShmEager, TheFlagIsReadBeforeMpiInitInEitherSpelling) {
  EXPECT_EQ(read_flag({"--index", "x"}), kDefaultShmEagerBytes);
  EXPECT_EQ(read_flag({"--shm-eager-bytes", "65536"}), 65536u);
  EXPECT_EQ(read_flag({"--shm-eager-bytes=0"}), 0u);
  EXPECT_EQ(read_flag({"--shm-eager-bytes", "8192", "--shm-eager-bytes", "16384"}), 16384u);
  // Not a number, or out of range: the default here; CLI11 reports it after MPI_Init.
  EXPECT_EQ(read_flag({"--shm-eager-bytes", "lots"}), kDefaultShmEagerBytes);
  EXPECT_EQ(read_flag({"--shm-eager-bytes", "100"}), kDefaultShmEagerBytes);
  EXPECT_EQ(read_flag({"--shm-eager-bytes"}), kDefaultShmEagerBytes);
  EXPECT_EQ(read_flag({"--shm-eager-bytes-x", "4096"}), kDefaultShmEagerBytes);
}

TEST(ShmEager, TheSegmentHolds64FragmentsWhereTheBudgetAllows) {
  const auto m = parameters(1 << 20, UINT64_MAX);
  EXPECT_EQ(m.at("btl_vader_eager_limit"), "1048576");
  EXPECT_EQ(m.at("btl_vader_segment_size"), std::to_string(64 << 20));
  // Open MPI's own segment (4 MiB) at least, and an int's worth at most.
  EXPECT_EQ(parameters(4096, UINT64_MAX).at("btl_vader_segment_size"), std::to_string(4 << 20));
  EXPECT_EQ(parameters(16 << 20, UINT64_MAX).at("btl_vader_segment_size"),
            std::to_string(1 << 30));
  EXPECT_TRUE(parameters(0, UINT64_MAX).empty());
}

TEST(ShmEager, ASmallSharedMemoryCutsTheSegmentThenTheLimit) {
  // 32 MiB: the segment shrinks, 32 fragments of 1 MiB still fit.
  auto m = parameters(1 << 20, 32 << 20);
  EXPECT_EQ(m.at("btl_vader_segment_size"), std::to_string(32 << 20));
  EXPECT_EQ(m.at("btl_vader_eager_limit"), "1048576");
  // 12 MiB: the limit comes down to a 24th of it, in whole pages.
  m = parameters(1 << 20, 12 << 20);
  EXPECT_EQ(m.at("btl_vader_segment_size"), std::to_string(12 << 20));
  EXPECT_EQ(m.at("btl_vader_eager_limit"), std::to_string((12 << 20) / 24 / 4096 * 4096));
  // 5 MiB: a 5 MiB segment, and the limit a 24th of it (208 KiB).
  EXPECT_EQ(parameters(1 << 20, 5 << 20).at("btl_vader_eager_limit"),
            std::to_string((5 << 20) / 24 / 4096 * 4096));
  // Less than Open MPI's own 4 MiB segment: its own settings, whatever the limit asked.
  EXPECT_TRUE(parameters(1 << 20, 3 << 20).empty());
  EXPECT_TRUE(parameters(8192, 3 << 20).empty());
  // 16 MiB asked in 8 MiB: a 24th of the segment, 340 KiB.
  EXPECT_EQ(parameters(16 << 20, 8 << 20).at("btl_vader_eager_limit"),
            std::to_string((8 << 20) / 24 / 4096 * 4096));
}

}  // namespace
}  // namespace gpusearch::wire
