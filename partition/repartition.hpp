// Re-partitions an existing index into N shards (either split mode, optionally another codec)
// without re-reading the corpus: documents keep their GS order and statistics, so scores and
// answers are unchanged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/index_format.hpp"

namespace gpusearch {

nlohmann::json repartition_index(const std::filesystem::path& in_dir,
                                 const std::filesystem::path& out_dir, std::uint32_t num_shards,
                                 SplitMode split, std::optional<codec::Codec> codec, bool progress,
                                 bool force);

}  // namespace gpusearch
