// The ISN's start-up (isn_server.hpp, stage 1): where it runs on its node (rank, node-local
// rank, GPU ordinal), the node's shared-threshold window, and the shard and engine stack it
// opens before saying hello to the aggregator (or telling it what failed).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/forward_index.hpp"
#include "common/index_format.hpp"
#include "isn/fallback_engine.hpp"
#include "isn/isn_server.hpp"
#include "isn/ranker/ranker_backend.hpp"
#include "isn/ranker/ranker_cache.hpp"
#include "isn/ranker/ranker_store.hpp"
#include "isn/ranker/second_stage.hpp"
#include "isn/shared_thresholds.hpp"

namespace gpusearch {

// A steady-clock time in microseconds, as the wire's timestamps carry it.
inline std::uint64_t steady_us(std::chrono::steady_clock::time_point t) {
  return std::uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

// Where this ISN runs: its rank, its rank among the node's ISNs, and the GPU ordinal it uses.
struct Placement {
  int rank = 0, size = 0, local_rank = 0, local_isns = 1, ompi_local_rank = -1;
  std::uint32_t shard_id = 0;
  int gpu_device = -1;
  std::string who;    // the prefix of every line this ISN prints
  std::string error;  // a placement that cannot work (goes to the aggregator in the hello)
  unsigned isns_on_device = 1;         // this node's ISNs using gpu_device (itself included)
  MPI_Comm node_isns = MPI_COMM_NULL;  // the node's ISNs; open_threshold_window takes it over
  ShareThresholds share_thresholds = ShareThresholds::kOff;  // off also when the flag is bad
  std::vector<int> cpu_set;  // --pin-cores: the CPUs this ISN's threads run on (empty: any)
};

// Collective with the aggregator's MPI_Comm_split at its start.
Placement place_isn(const IsnOptions& options, MPI_Comm world);

// --share-thresholds: the node's window, where more than one ISN runs there and sharing is not
// off (collective over the node's ISNs, before any of them can fail at start-up); else null.
// Takes over where.node_isns.
std::unique_ptr<SharedThresholdWindow> open_threshold_window(Placement& where);

// The second stage of this ISN's shard (issue 12): the store, the backend (the GPU where the
// ISN has one, else the CPU twin), the shard's forward index, the ranker cache and the ranker.
struct IsnSecondStage {
  ranker::RankerStore store;
  std::unique_ptr<ranker::RankerBackend> backend;
  ForwardIndex forward;
  std::unique_ptr<ranker::RankerCache> cache;
  std::unique_ptr<ranker::SecondStageRanker> ranker;
};

// What start-up made: the shard and the engine stack, with the hello that announced them; or,
// when something failed, only the hello naming the error.
struct StartedIsn {
  std::unique_ptr<Index> index;
  std::unique_ptr<FallbackEngine> engine;
  std::unique_ptr<IsnSecondStage> second;  // null: one stage
  nlohmann::json hello;
};

// Opens the shard, builds the engines and says hello; a failure goes to the aggregator in the
// hello (it reports it once and shuts every ISN down), and the result then has no engine.
StartedIsn start_isn(const IsnOptions& options, const Placement& where, MPI_Comm world);

}  // namespace gpusearch
