// Makes the engine an ISN (or `gpusearch search`) runs on one shard, by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/query_engine.hpp"
#include "common/shard_index.hpp"
#include "isn/list_cache_setup.hpp"

namespace gpusearch {

struct EngineOptions {
  std::string engine = "reference";  // reference | cpu | gpu (as built) | auto (gpu where a
                                     // device is present, else cpu)
  std::string algorithm;             // engine-specific; empty: the engine's default
  unsigned intra_query_threads = 1;  // cpu: split one query's docID range over threads
  int gpu_device = -1;               // gpu: device ordinal; -1: this process's default
  // gpu: GPUs of this ISN, from gpu_device on (wrapping round the node's devices); above 1 the
  // shard is split by docID range across them, or the queries (gpu_split;
  // gpu/multi_gpu_engine.hpp). gpu_range_engine: that per-range engine even on one GPU (tests
  // and the G = 1 evidence on one-GPU hosts).
  unsigned gpus = 1;
  bool gpu_range_engine = false;
  // gpu, several GPUs: how they share a batch. "ranges": the docID ranges above; "queries":
  // every GPU the whole shard and a share of the batch's queries, nothing merged.
  std::string gpu_split = "ranges";
  unsigned gpu_batch_size = 4096;    // gpu: queries per kernel launch
  unsigned gpu_or_window = 8192;     // gpu: OR accumulator window in documents
  unsigned gpu_or_warp_window = 1536;  // gpu warp kernel: each warp's OR window in documents
  unsigned gpu_bmw_threads = 128;    // gpu bmw: threads splitting one query's docID space
  unsigned gpu_blocks_per_sm = 0;    // gpu: thread blocks a batch aims at per multiprocessor (0: by batch size)
  std::string gpu_posting_layout = "auto";  // gpu: OR posting layout (auto, compressed, decoded)
  unsigned gpu_max_segments = 64;    // gpu: most docID segments (blocks) per query; 1: one
  std::uint64_t gpu_inject_fault_at_call = 0;  // gpu, tests: a real CUDA failure from this call
  ListCacheEngineOptions list_cache{};  // gpu: serve through a list cache when enabled()
  // ISN only (isn_engine_stack): a probe of the cluster's own cost; repeats are answered from
  // memory (isn/memo_engine.hpp, --probe-memo-answers).
  bool probe_memo_answers = false;
  unsigned shared_threshold_refresh = 4;  // cpu: CpuEngineOptions::shared_threshold_refresh
  bool sharing_and_phases_first = true;   // cpu: CpuEngineOptions::sharing_and_phases_first
  bool sharing_in_batch_order = false;    // cpu: CpuEngineOptions::sharing_in_batch_order
};

// CUDA devices this process sees (0 without a CUDA build or device).
int gpu_device_count();

// The engine `auto` stands for on this machine: gpu where this build has it and a device is
// present, else cpu.
std::string resolve_engine_name(const std::string& name);

// GPU memory accounting before the GPU engine uploads `shard` to `device`, which
// isns_on_device ISNs of this node share (gpu/device_memory_budget.hpp): throws InputError
// naming what to change when it cannot fit; returns the plan as JSON ({} without CUDA).
nlohmann::json check_gpu_memory(const ShardIndex& shard, int device, unsigned isns_on_device);

std::vector<std::string> engine_names();
// Throws InputError for an unknown engine name.
std::unique_ptr<QueryEngine> make_engine(const EngineOptions& options, const ShardIndex& shard,
                                         std::uint32_t shard_id);

}  // namespace gpusearch
