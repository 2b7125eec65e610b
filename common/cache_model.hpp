// The throughput model of paper 000, 4.2.1 (eqs. 6-7), for splitting a GPU's memory M into the
// list cache S_c and the batch buffer S_b:
//   TP = 1 / (c(n) + t(S_b) * dq(S_c))
// c(n): compute time per query at n queries per batch (packing, kernels, unpacking), fitted as
// c0 + c1 / n (a batch's fixed cost spread over its queries); t(S_b): transfer time per byte,
// from a fitted copy time a + t * bytes per batch, so t(S_b) = t + a / (bytes a batch ships):
// t + a / (S_b / 2) when batches fill a lane's region, t + a / (n dq) when the launch cap stops
// them first; dq(S_c): bytes shipped per query (deduplicated within a batch, as copied),
// measured at several cache sizes and interpolated (it falls as the cache grows). Below the
// smallest measured cache dq is not flat: a run whose plan filled only U < S_c bytes of its
// cache ships the same at S_c = U (the same plan fits), and a zero cache ships every byte the
// queries read (deduplicated as at the smallest measured cache); without these (older rows)
// the model does not choose below the smallest measured cache. The batch volume follows from
// the buffer: a lane holds S_b / 2 bytes of shipped lists, so n = min(max_queries, S_b / 2 /
// dq). A response-time bound theta caps n further: a batch's time n * (c0 + t dq) + c1 + a
// stays under theta. Fitted from measured runs (bench_list_cache, or offline from its JSON:
// bench_list_cache --refit), saved as JSON, read by `--cache-model` to choose S_c for
// `--max-response-ms`.
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
  // Optional (0 or negative: unknown), for dq below the smallest measured cache:
  double read_bytes = 0;           // what the queries read, counted per query (hit + shipped +
                                   // cut off at a horizon): what a zero cache would ship
  double shipped_query_bytes = 0;  // shipped, counted per query (before a batch's deduplication)
  double cache_used_bytes = -1;    // what the plan filled of the cache (<= cache_bytes)

  // One row of bench_list_cache's JSON (a sweep or model row); InputError if a field is missing.
  static CacheRunSample from_bench_row(const nlohmann::json& row);
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
  double c(double n) const;                    // seconds per query
  double t(double batch_bytes) const;          // seconds per byte, batches filling a lane (S_b / 2)
  double t_for_copy(double copy_bytes) const;  // seconds per byte of a copy of copy_bytes
  double dq(double cache_bytes) const;         // bytes per query
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

  // The smallest cache size whose dq the fit knows (0 when a zero cache was measured or
  // estimated); choose() does not go below it.
  double dq_known_from() const { return dq_points.empty() ? 0.0 : dq_points.front().first; }

  double c0 = 0, c1 = 0;                 // c(n) = c0 + c1 / n
  double t_per_byte = 0, t_fixed_s = 0;  // a batch's copy: t_fixed_s + t_per_byte * bytes
  std::vector<std::pair<double, double>> dq_points;  // (S_c, bytes per query), by S_c
  std::string note;                    // what it was fitted on (policy, lambda, index)
  std::vector<std::string> fit_notes;  // how the fit read the runs (clamps, estimated points)
};

// bench_list_cache's report: the rows measured at one ratio for one policy (the sweep's and the
// model's, each (share, launch cap) once). Empty if none.
std::vector<nlohmann::json> bench_rows(const nlohmann::json& report, double ratio,
                                       const std::string& policy);
// The model against measured rows (all at memory_bytes = S_c + S_b): its free choice, which
// measured row it ranks first, and the measured best among the rows whose p95 batch time meets
// the bound (<= 0: none). max_queries: the launch cap the free choice may use.
nlohmann::json compare_with_measured(const ThroughputModel& model,
                                     std::span<const nlohmann::json> rows, double memory_bytes,
                                     double max_queries, double max_response_ms);

}  // namespace gpusearch
