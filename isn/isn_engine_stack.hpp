// The engine stack an ISN answers its batches with, built once at start-up:
//   FallbackEngine( FaultInjectingEngine( parallel( make_engine(--engine) ) ),
//                   parallel( make_engine(--fallback-engine) ) )
// where parallel() is a ParallelBatchEngine only around engines that do not already run a
// batch in parallel (the reference engine; not the CPU or the GPU engine), and the fault
// injector is there only with --inject-engine-fault-at-batch on an engine other than the GPU
// engine (which fails for real, through a failing CUDA call).
//
// With --scheduler, the primary is a SchedulerEngine (isn/coprocessor_scheduler.hpp) running
// two processors at once: the CPU engine, one worker per thread, and the --engine stack (the GPU
// engine, falling back to the CPU engine on a failure), one worker taking batches.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "common/shard_index.hpp"
#include "isn/coprocessor_scheduler.hpp"
#include "isn/engine_factory.hpp"
#include "isn/fallback_engine.hpp"

namespace gpusearch {

struct IsnSchedulerOptions {
  std::string policy;           // --scheduler: cpu|gpu|lbd|queues|best-serial; empty: one engine
  SchedulerOptions scheduling;  // thresholds and deadline (policy set from `policy`)
  // queues, best-serial: the cost predictor is trained at the first batch on up to
  // train_queries queries of this file (each timed alone on both processors).
  std::filesystem::path train_file;
  std::size_t train_queries = 400;
  unsigned cpu_workers = 0;          // 0: half the oneTBB parallelism allowed (--threads), >= 1
  unsigned gpu_max_batch = 4096;     // queries per call of the GPU-side engine
  std::string lbd_short_on = "gpu";  // lbd: the processor for queries below the threshold
  // queues: specialize (measured best on the H200, NOTES-scheduler.md, session 34), lone-cost
  // or capacity (isn/capacity_router.hpp)
  std::string routing = "specialize";
  // Batches whose jobs the ISN queues before the oldest is answered (isn/batch_pipeline.hpp);
  // 1: one batch at a time.
  unsigned batches_in_flight = 4;
  // queues, best-serial: the CPU model is refitted after every refit_every CPU jobs on the
  // training log and the newest jobs' costs (isn/online_cost_predictor.hpp); 0: never.
  std::size_t refit_every = 512;
  // The cost models (isn/cost_predictor.hpp, CostModelKind): linear, trees or best.
  std::string cost_model = "best";
};

struct IsnEngineStackOptions {
  EngineOptions engine;  // --engine and its options; gpu_device already placed
  std::string fallback_engine = "cpu";
  std::size_t parallel_chunk_queries = 4;          // ParallelBatchEngine's chunk
  std::uint64_t inject_engine_fault_at_batch = 0;  // 0: never
  IsnSchedulerOptions scheduler;
  unsigned isns_on_device = 1;  // this node's ISNs mapped to engine.gpu_device (memory check)
};

// --engine gpu on a node with no usable CUDA device (or a build without the GPU engine): the
// CPU engine instead, said once on stderr. Other names are returned as they are.
std::string engine_for_this_node(const std::string& requested, const std::string& report_prefix);

std::unique_ptr<FallbackEngine> make_isn_engine_stack(const IsnEngineStackOptions& options,
                                                      const ShardIndex& shard,
                                                      std::uint32_t shard_id,
                                                      const std::string& report_prefix);

}  // namespace gpusearch
