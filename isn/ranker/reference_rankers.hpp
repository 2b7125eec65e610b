// Deterministic synthetic rankers for benchmarks and the ranker-cache study: the three reference
// shapes of paper 004, Table 4.2, and a mix of many rankers of one shape. The same seed writes
// the same files on every machine (own generator, no std distributions).
//
//   R-S-BLG  125 inputs: 54 bucket, 2 linear, 69 log-linear; no trees; 1 layer
//   R-M-BGD  515 inputs: 10 bucket, 5 log-linear, 500 trees; 1 layer
//   R-L-D    1,250 inputs, all trees; 2 layers (a hidden layer of kReferenceHiddenUnits, relu)
// Table 4.2 gives the input counts and layers; the trees' depth (random, unbalanced, up to 6
// levels for R-M-BGD and 8 for R-L-D) and the hidden layer's width are ours.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "isn/ranker/ranker_file.hpp"

namespace gpusearch::ranker {

inline constexpr std::uint32_t kReferenceHiddenUnits = 128;

struct RankerShape {
  std::string name;
  std::uint32_t buckets = 0, linears = 0, log_linears = 0, trees = 0;
  std::uint32_t max_tree_depth = 6;
  std::vector<std::uint32_t> hidden;  // hidden layer widths (0 to 2 entries)
};

std::vector<RankerShape> reference_shapes();  // R-S-BLG, R-M-BGD, R-L-D
// A ranker of that shape over every catalog feature, from the seed and the shape's name.
RankerSpec generate_ranker(const RankerShape& shape, std::uint64_t seed);

// Writes the reference rankers into `dir` and indexes the store (store.json).
void write_reference_rankers(const std::filesystem::path& dir, std::uint64_t seed);
// Writes `count` rankers named PREFIX-000.. of `shape` (each its own seed) and indexes the store.
void write_ranker_mix(const std::filesystem::path& dir, std::uint32_t count,
                      const RankerShape& shape, const std::string& prefix, std::uint64_t seed);

}  // namespace gpusearch::ranker
