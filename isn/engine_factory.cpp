#include "isn/engine_factory.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/reference_engine.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"

namespace gpusearch {

std::vector<std::string> engine_names() { return {"reference", "cpu"}; }

std::unique_ptr<QueryEngine> make_engine(const EngineOptions& options, const ShardIndex& shard,
                                         std::uint32_t shard_id) {
  if (options.engine == "reference") return std::make_unique<ReferenceEngine>(shard, shard_id);
  if (options.engine == "cpu") {
    cpu::CpuEngineOptions o;
    o.algorithm = cpu::parse_algorithm(options.algorithm);
    o.intra_query_threads = options.intra_query_threads;
    return std::make_unique<cpu::CpuEngine>(shard, shard_id, o);
  }
  throw InputError("--engine", 0, fmt::format("unknown engine '{}' ({})", options.engine,
                                              fmt::join(engine_names(), ", ")));
}

}  // namespace gpusearch
