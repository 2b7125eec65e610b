// The second stage's settings, shared by `gpusearch search` and the ISN (issue 12).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>

#include "common/search_result.hpp"

namespace gpusearch::ranker {


struct RankingOptions {
  std::filesystem::path store_dir;  // empty: no second stage
  std::string ranker;               // every query without its own (TSV's third column)
  double mix_exponent = NAN;        // Zipf over the store's rankers (NaN: no mix)
  std::uint64_t mix_seed = 1;
  std::uint32_t candidates = 0;   // 0: kDefaultCandidates
  std::uint64_t cache_bytes = 0;  // ranker cache budget per shard (0: unbounded)
  std::string backend = "auto";   // cpu, gpu, auto
  bool resident_streams = true;  // gpu: keep the forward index on the device
  bool enabled() const { return !store_dir.empty(); }
  std::uint32_t candidates_or_default() const {
    return candidates > 0 ? candidates : kDefaultCandidates;
  }
};

}  // namespace gpusearch::ranker
