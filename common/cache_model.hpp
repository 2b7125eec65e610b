// The throughput model of paper 000, 4.2.1 (eqs. 6-7), for splitting a GPU's memory M into the
// list cache S_c and the batch buffer S_b:
//   TP = 1 / (c(n) + t(S_b) * dq(S_c))
// c(n): compute time per query at n queries per batch (packing, kernels, unpacking), fitted as
// c0 + c1 / n (a batch's fixed cost spread over its queries); t(S_b): transfer time per byte,
// from a fitted copy time a + t * bytes per batch, so t(S_b) = t + a / (S_b / 2) for a lane's
// full region; dq(S_c): bytes shipped per query, measured at several cache sizes and
// interpolated (it falls as the cache grows). The batch volume follows from the buffer: a lane
// holds S_b / 2 bytes of shipped lists, so n = min(max_queries, S_b / 2 / dq). A response-time
// bound theta caps n further: a batch's time n * (c(n) + t * dq) stays under theta.
// Fitted from measured runs (bench_list_cache), saved as JSON, read by `--cache-model` to
// choose S_c for `--max-response-ms`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gpusearch {

// One measured run at one split.
struct CacheRunSample {
  double cache_bytes = 0, batch_bytes = 0;
  double queries = 0, batches = 0;
  double wall_seconds = 0;       // the run, as measured
  double shipped_bytes = 0;      // lists shipped, in all
  double transfer_seconds = 0;   // the batches' host-to-device copies, in all
  double max_batch_queries = 0;  // the engine's cap on n
};

struct CacheSplit {
  double cache_bytes = 0, batch_bytes = 0;
  double batch_queries = 0;  // n, after the response bound
  double throughput = 0;     // queries per second
  double response_ms = 0;    // a batch's time
  bool feasible = false;
};

class ThroughputModel {
 public:
  // Least squares over the samples (at least two cache sizes and two batch volumes for a
  // meaningful fit; fewer give a flat c or dq). Throws InputError without samples.
  static ThroughputModel fit(std::span<const CacheRunSample> samples);
  double c(double n) const;             // seconds per query
  double t(double batch_bytes) const;   // seconds per byte
  double dq(double cache_bytes) const;  // bytes per query
  // The model at one split, n capped by max_queries and by the response bound (<= 0: none).
  CacheSplit at(double cache_bytes, double batch_bytes, double max_queries,
                double max_response_ms) const;
  // The best split of memory_bytes (S_c + S_b) over `steps` + 1 cache sizes from 0 to
  // memory_bytes - min_batch_bytes; infeasible (feasible = false) if no split meets the bound.
  CacheSplit choose(double memory_bytes, double min_batch_bytes, double max_queries,
                    double max_response_ms, unsigned steps = 200) const;

  nlohmann::json to_json() const;
  static ThroughputModel from_json(const nlohmann::json& j);
  void write(const std::filesystem::path& file) const;
  static ThroughputModel read(const std::filesystem::path& file);  // InputError names the file

  double c0 = 0, c1 = 0;                 // c(n) = c0 + c1 / n
  double t_per_byte = 0, t_fixed_s = 0;  // a batch's copy: t_fixed_s + t_per_byte * bytes
  std::vector<std::pair<double, double>> dq_points;  // (S_c, bytes per query), by S_c
  std::string note;  // what it was fitted on (policy, lambda, index)
};

}  // namespace gpusearch
