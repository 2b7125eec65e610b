// GPU engine benchmark (a program writing JSON, not a test): throughput and latency per mode,
// algorithm and batch size on one index and query log, against a CPU engine measured in the
// same run on all host cores; achieved posting bandwidth against the device-to-device copy
// bandwidth measured in the same run; GPU decoding speed; a correctness check of the answers.
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <numeric>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/metrics.hpp"
#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/device_shard.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/query_kernels.hpp"
#include "isn/engine_factory.hpp"

using namespace gpusearch;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The project's one percentile definition (common/metrics.hpp), 0 for no samples.
double percentile(std::vector<double> v, double p) {
  return v.empty() ? 0.0 : metrics::percentile(std::move(v), p);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t c = s.find(',', start);
    const std::string item = s.substr(start, c == std::string::npos ? std::string::npos : c - start);
    if (!item.empty()) out.push_back(item);
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}

// Device-to-device copy bandwidth (bytes read plus written per second), median of repeats.
double measure_copy_bandwidth() {
  const std::size_t bytes = std::size_t(1) << 30;
  gpu::DeviceBuffer<std::byte> a(bytes), b(bytes);
  GPUSEARCH_CUDA_CHECK(cudaMemset(a.data(), 1, bytes));
  gpu::CudaEvent start, stop;
  std::vector<double> gbps;
  for (int i = 0; i < 12; ++i) {
    start.record(nullptr);
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice));
    stop.record(nullptr);
    stop.synchronize();
    if (i >= 2) gbps.push_back(2.0 * double(bytes) / (stop.ms_since(start) * 1e6));
  }
  return percentile(gbps, 50);
}

struct RunResult {
  double seconds = 0;
  std::vector<std::vector<ShardResult>> per_shard;
};

// All queries through the engines (one per shard) in one call each: the throughput run.
RunResult run_all(std::vector<std::unique_ptr<QueryEngine>>& engines,
                  const std::vector<Query>& queries, const SearchParams& params) {
  RunResult r;
  r.per_shard.resize(engines.size());
  const auto t0 = Clock::now();
  for (std::size_t s = 0; s < engines.size(); ++s) {
    r.per_shard[s].assign(queries.size(), ShardResult{});
    engines[s]->search(queries, params, r.per_shard[s]);
  }
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_gpu_engine: GPU engine throughput, latency, bandwidth; JSON out"};
  std::filesystem::path index_dir, queries_path, out_path;
  std::string modes = "and,or,and-or", algorithms = "exhaustive,window,bmw",
              batch_sizes = "64,1024,4096", cpu_engine = "cpu", cpu_algorithm,
              scoring = "bm25";
  unsigned k = 10, cpu_threads = std::thread::hardware_concurrency();
  std::size_t limit = 20000, cpu_limit = 4000, latency_limit = 4096, verify = 300;
  bool or_stage = false;
  std::string topk_memory_default = "auto";
  std::string posting_layout = "auto";
  unsigned rounds = 1;
  bool threshold_seed = true;
  bool remainder_first = true, and_or_cost_estimate = true;
  unsigned or_window = 8192, or_threads = 256, bmw_threads = 128, blocks_per_sm = 0, max_segments = 64,
           min_segment_postings = gpu::GpuEngineOptions{}.min_segment_postings;
  app.add_option("--index", index_dir, "index directory")->required();
  app.add_option("--queries", queries_path, "query log (TSV)")->required();
  app.add_option("--out", out_path, "JSON output")->required();
  app.add_option("--modes", modes)->capture_default_str();
  app.add_option("--algorithms", algorithms, "GPU algorithms")->capture_default_str();
  app.add_option("--batch-sizes", batch_sizes)->capture_default_str();
  app.add_option("--k", k)->capture_default_str();
  app.add_option("--scoring", scoring)->capture_default_str();
  app.add_option("--or-window", or_window)->capture_default_str();
  app.add_option("--or-threads", or_threads, "threads per OR segment")->capture_default_str();
  app.add_option("--or-stage", or_stage, "OR: stage posting blocks in shared memory")
      ->capture_default_str();
  app.add_option("--topk-memory", topk_memory_default,
                 "AND and OR: where a segment's top-k lives (auto, shared, global)")
      ->capture_default_str();
  app.add_option("--threshold-seed", threshold_seed,
                 "OR (window, bmw): start each query's k-th score from the per-term k-th impact "
                 "table (a spec's sixth field seed / noseed overrides it)")
      ->capture_default_str();
  app.add_option("--posting-layout", posting_layout,
                 "OR posting layout: auto, compressed or decoded (docID + impact per posting)")
      ->capture_default_str();
  app.add_option("--bmw-threads", bmw_threads)->capture_default_str();
  app.add_option("--and-or-cost-estimate", and_or_cost_estimate,
                 "and-or's cost order counts the expected OR phase (0: the AND phase alone)")
      ->capture_default_str();
  app.add_option("--remainder-first", remainder_first,
                 "a call's first (costliest) launch takes the remainder of its batches (0: the last)")
      ->capture_default_str();
  app.add_option("--blocks-per-sm", blocks_per_sm, "GPU work decomposition target (0: by batch size)")
      ->capture_default_str();
  app.add_option("--min-segment-postings", min_segment_postings,
                 "GPU work decomposition: a segment holds at least this much of a query's cost")
      ->capture_default_str();
  app.add_option("--max-segments", max_segments, "GPU segments per query at most (1: none)")
      ->capture_default_str();
  app.add_option("--limit", limit, "queries for the GPU runs")->capture_default_str();
  app.add_option("--rounds", rounds, "timed runs of the queries per GPU row (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100u));
  app.add_option("--latency-limit", latency_limit, "queries for the per-batch latency runs")
      ->capture_default_str();
  app.add_option("--cpu-engine", cpu_engine, "baseline engine (cpu, or reference if absent)")
      ->capture_default_str();
  app.add_option("--cpu-algorithm", cpu_algorithm, "baseline algorithms, comma separated "
                 "(default: exhaustive and the engine's default)");
  app.add_option("--cpu-threads", cpu_threads)->capture_default_str();
  app.add_option("--cpu-limit", cpu_limit, "queries for the CPU runs")->capture_default_str();
  app.add_option("--verify", verify, "queries checked against the reference per mode")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    if (!gpu::gpu_available()) {
      std::cerr << "bench_gpu_engine: no CUDA device\n";
      return 2;
    }
    tbb::global_control threads(tbb::global_control::max_allowed_parallelism, cpu_threads);
    const Index index = Index::open(index_dir);
    const std::vector<Query> queries = read_known_queries(index.shard(0), queries_path, limit);
    std::cerr << fmt::format("{} queries, {} shard(s)\n", queries.size(), index.num_open_shards());
    cudaDeviceProp prop{};
    GPUSEARCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    nlohmann::json out;
    out["machine"] = {{"gpu", prop.name},
                      {"sms", prop.multiProcessorCount},
                      {"gpu_memory_bytes", prop.totalGlobalMem},
                      {"host_threads", std::thread::hardware_concurrency()},
                      {"cpu_threads_used", cpu_threads}};
    out["index"] = {{"dir", index_dir.string()},
                    {"docs", index.params().collection.num_docs},
                    {"postings", index.params().num_postings_total},
                    {"shards", index.num_open_shards()}};
    out["queries"] = {{"file", queries_path.string()}, {"count", queries.size()}};
    out["k"] = k;
    out["scoring"] = scoring;

    const double copy_gbps = measure_copy_bandwidth();
    out["copy_bandwidth_gb_per_s"] = copy_gbps;
    std::cerr << fmt::format("device-to-device copy: {:.0f} GB/s\n", copy_gbps);
    {
      gpu::OrKernelConfig c{or_window, or_threads, or_stage};
      const bool global = gpu::or_topk_in_global(k, 4, c, 4096, 4096);
      std::cerr << fmt::format("OR top-k at k = {} (auto, 4,096 queries of 4 terms in 4,096 "
                               "segments): {} memory\n", k, global ? "global" : "shared");
      out["or_topk_auto_global"] = global;
    }

    // Decoding: every block of shard 0, docIDs and frequencies; the warp decoder's prefix sum
    // as the query kernels run it (shuffles) and with CUB's WarpScan, side by side.
    {
      gpu::DeviceShard image(index.shard(0));
      const std::uint64_t n = image.num_blocks();
      gpu::DeviceBuffer<std::uint32_t> sums(n);
      gpu::CudaEvent a, b;
      const double ints = 2.0 * double(index.shard(0).manifest().num_postings);
      const double bytes = double(index.shard(0).postings().size_bytes());
      for (const auto& [scan, name] : {std::pair{gpu::DecodeScan::kShuffles, "shuffles"},
                                       std::pair{gpu::DecodeScan::kCub, "cub_warp_scan"}}) {
        std::vector<double> ms;
        for (int i = 0; i < 7; ++i) {
          a.record(nullptr);
          gpu::launch_decode_blocks(image.view(), 0, n, nullptr, nullptr, sums.data(), nullptr, scan);
          b.record(nullptr);
          b.synchronize();
          if (i >= 2) ms.push_back(b.ms_since(a));
        }
        const double t = percentile(ms, 50);
        const nlohmann::json row = {{"blocks", n}, {"ms", t}, {"ints_per_s", ints / (t * 1e-3)},
                                    {"compressed_gb_per_s", bytes / (t * 1e6)},
                                    {"fraction_of_copy_bandwidth", bytes / (t * 1e6) / copy_gbps},
                                    {"scan", name}};
        if (scan == gpu::DecodeScan::kShuffles) out["decode"] = row;
        else out["decode_cub"] = row;
        std::cerr << fmt::format("GPU decode ({}): {:.1f} G ints/s, {:.0f} GB/s compressed\n", name,
                                 ints / (t * 1e-3) / 1e9, bytes / (t * 1e6));
      }
    }

    SearchParams base;
    base.k = k;
    base.scoring = parse_scoring(scoring);
    base.alpha = index.params().gs_alpha;

    // CPU baseline on all host cores.
    std::vector<std::string> cpu_algos = split(cpu_algorithm);
    if (cpu_algos.empty()) cpu_algos = {"exhaustive", ""};
    const auto names = engine_names();
    if (std::find(names.begin(), names.end(), cpu_engine) == names.end()) {
      std::cerr << "no engine '" << cpu_engine << "' in this build; baseline: reference\n";
      cpu_engine = "reference";
      cpu_algos = {""};
    }
    const std::vector<Query> cpu_queries(queries.begin(),
                                         queries.begin() + std::min(cpu_limit, queries.size()));
    nlohmann::json cpu_json = nlohmann::json::array();
    for (const std::string& mode_name : split(modes)) {
      for (const std::string& algo : cpu_algos) {
        SearchParams params = base;
        params.mode = parse_mode(mode_name);
        EngineOptions eo;
        eo.engine = cpu_engine;
        eo.algorithm = algo;
        std::vector<std::unique_ptr<QueryEngine>> engines;
        for (std::size_t s = 0; s < index.num_open_shards(); ++s)
          engines.push_back(make_engine(eo, index.shard(s), index.shard_id(s)));
        const RunResult r = run_all(engines, cpu_queries, params);
        const double qps = double(cpu_queries.size()) / r.seconds;
        cpu_json.push_back({{"mode", mode_name}, {"engine", cpu_engine},
                            {"algorithm", algo.empty() ? "default" : algo},
                            {"batch_size", "all"},
                            {"queries", cpu_queries.size()}, {"seconds", r.seconds},
                            {"queries_per_s", qps}});
        std::cerr << fmt::format("CPU {} {} {} (one call): {:.0f} q/s\n", cpu_engine,
                                 algo.empty() ? "default" : algo, mode_name, qps);
        // The same queries in batches of each GPU batch size, one batch at a time: throughput
        // and per-batch latency where the GPU is measured the same way.
        for (const std::string& bs : split(batch_sizes)) {
          const std::size_t b = std::stoul(bs);
          std::vector<double> batch_ms;
          double total_s = 0;
          for (std::size_t b0 = 0; b0 < cpu_queries.size(); b0 += b) {
            const std::vector<Query> batch(
                cpu_queries.begin() + b0, cpu_queries.begin() + std::min(cpu_queries.size(), b0 + b));
            const RunResult br = run_all(engines, batch, params);
            total_s += br.seconds;
            for (std::size_t i = 0; i < batch.size(); ++i) batch_ms.push_back(br.seconds * 1e3);
          }
          const double bqps = double(cpu_queries.size()) / total_s;
          cpu_json.push_back({{"mode", mode_name}, {"engine", cpu_engine},
                              {"algorithm", algo.empty() ? "default" : algo},
                              {"batch_size", b}, {"queries", cpu_queries.size()},
                              {"seconds", total_s}, {"queries_per_s", bqps},
                              {"latency_ms_p50", percentile(batch_ms, 50)},
                              {"latency_ms_p99", percentile(batch_ms, 99)}});
          std::cerr << fmt::format("CPU {} {} {} batch {}: {:.0f} q/s, p50 {:.2f} ms, p99 {:.2f} ms\n",
                                   cpu_engine, algo.empty() ? "default" : algo, mode_name, b, bqps,
                                   percentile(batch_ms, 50), percentile(batch_ms, 99));
        }
      }
    }
    out["cpu"] = cpu_json;

    nlohmann::json gpu_json = nlohmann::json::array();
    for (const std::string& mode_name : split(modes)) {
      SearchParams params = base;
      params.mode = parse_mode(mode_name);
      for (const std::string& algo_spec : split(algorithms)) {
        // "window:8192" runs the window algorithm with an 8192-document accumulator window;
        // "window:16384:512" with 512 threads per OR segment too, "window:4096:256:1" with
        // posting blocks staged in shared memory, "window:8192:256:0:shared" with the top-k
        // in shared memory whatever k.
        std::vector<std::string> spec_parts;
        for (std::size_t p0 = 0;;) {
          const std::size_t p1 = algo_spec.find(':', p0);
          spec_parts.push_back(algo_spec.substr(p0, p1 == std::string::npos ? p1 : p1 - p0));
          if (p1 == std::string::npos) break;
          p0 = p1 + 1;
        }
        const std::string algo = spec_parts[0];
        const unsigned window = spec_parts.size() > 1 ? unsigned(std::stoul(spec_parts[1])) : or_window;
        const unsigned threads = spec_parts.size() > 2 ? unsigned(std::stoul(spec_parts[2])) : or_threads;
        const bool stage = spec_parts.size() > 3 ? spec_parts[3] == "1" : or_stage;
        const std::string topk_memory = spec_parts.size() > 4 ? spec_parts[4] : topk_memory_default;
        // Sixth field: "seed" / "noseed", the OR threshold seed (default --threshold-seed).
        const bool seeded = spec_parts.size() > 5 ? spec_parts[5] != "noseed" : threshold_seed;
        // Seventh: the posting layout, "compressed" / "decoded" / "auto" (default --posting-layout).
        const std::string layout = spec_parts.size() > 6 ? spec_parts[6] : posting_layout;
        for (const std::string& bs : split(batch_sizes)) {
          gpu::GpuEngineOptions go;
          go.algorithm = algo;
          go.batch_size = unsigned(std::stoul(bs));
          go.or_window = window;
          // "warp:2048": the warp kernel with 2,048-document windows per warp.
          if (algo == "warp")
            go.or_warp_window = spec_parts.size() > 1 ? window : gpu::GpuEngineOptions{}.or_warp_window;
          go.or_threads = threads;
          go.or_stage_blocks = stage;
          go.topk_memory = topk_memory;
          go.threshold_seed = seeded;
          go.posting_layout = layout;
          go.bmw_threads = bmw_threads;
          go.blocks_per_sm = blocks_per_sm;
          go.remainder_first = remainder_first;
          go.and_or_cost_estimate = and_or_cost_estimate;
          go.max_segments_per_query = max_segments;
          go.min_segment_postings = min_segment_postings;
          std::vector<std::unique_ptr<QueryEngine>> engines;
          std::vector<gpu::GpuEngine*> raw;
          for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
            auto e = std::make_unique<gpu::GpuEngine>(index.shard(s), index.shard_id(s), go);
            raw.push_back(e.get());
            engines.push_back(std::move(e));
          }
          // Warm-up with one full batch: the engine's pinned and device buffers grow to a call's
          // largest batch and then stay (as in a serving ISN), so the measured run does not pay
          // their first allocation (at k = 1000 and batch 4,096, 2 x 131 MB of pinned memory).
          run_all(engines,
                  std::vector<Query>(queries.begin(),
                                     queries.begin() + std::min<std::size_t>(
                                                           queries.size(),
                                                           std::max<std::size_t>(256, go.batch_size))),
                  params);
          for (auto* e : raw) e->clear_stats();
          // --rounds: the same queries again; the row's throughput is the median round's, its
          // kernel and copy figures the last round's (every round does the same work).
          RunResult r;
          std::vector<double> round_seconds;
          for (unsigned round = 0; round < rounds; ++round) {
            for (auto* e : raw) e->clear_stats();
            r = RunResult{};  // the last round's answers freed first, as a server frees a sent batch's
            r = run_all(engines, queries, params);
            round_seconds.push_back(r.seconds);
          }
          std::vector<double> sorted_seconds = round_seconds;
          std::sort(sorted_seconds.begin(), sorted_seconds.end());
          r.seconds = sorted_seconds[sorted_seconds.size() / 2];
          const double qps = double(queries.size()) / r.seconds;
          double kernel_ms = 0, h2d_ms = 0, d2h_ms = 0, pack_ms = 0, unpack_ms = 0;
          std::uint64_t bytes_read = 0, h2d_bytes = 0, d2h_bytes = 0, rounds_saved = 0,
                        and_segments = 0, or_segments = 0, batches = 0;
          for (auto* e : raw)
            for (const auto& b : e->batch_stats()) {
              kernel_ms += b.kernel_ms;
              h2d_ms += b.h2d_ms;
              d2h_ms += b.d2h_ms;
              pack_ms += b.pack_ms;
              unpack_ms += b.unpack_ms;
              bytes_read += b.postings_bytes_read;
              rounds_saved += b.early_termination_rounds_saved;
              h2d_bytes += b.h2d_bytes;
              d2h_bytes += b.d2h_bytes;
              and_segments += b.and_segments;
              or_segments += b.or_segments;
              ++batches;
            }
          // The last round's pipeline (shard 0): per batch, when the host packed and issued it,
          // when the device ran its copies and kernels, and how long `finish_launch` waited for
          // it; the summary says which side the time went to (kernels busy vs the call's length).
          nlohmann::json timeline = nlohmann::json::array();
          double kernels_busy_ms = 0, host_wait_ms = 0, covered_until = 0, call_ms = 0,
                 first_kernel_ms = -1;
          std::vector<gpu::GpuBatchStats> launches;  // in launch order (they finish in any)
          if (!raw.empty()) launches = raw[0]->batch_stats();
          std::stable_sort(launches.begin(), launches.end(), [](const auto& a, const auto& b) {
            return a.timeline.host_pack_begin < b.timeline.host_pack_begin;
          });
          for (const auto& b : launches) {
              const auto& t = b.timeline;
              timeline.push_back({b.queries, t.host_pack_begin, t.host_launched, t.device_h2d_begin,
                                  t.device_kernels_begin, t.device_kernels_end, t.device_d2h_end,
                                  t.host_wait_begin, t.host_wait_end, t.host_unpack_end});
              host_wait_ms += t.host_wait_end - t.host_wait_begin;
              call_ms = std::max(call_ms, t.host_unpack_end);
          }
          // The device's kernel time: the union of the launches' kernel intervals.
          std::stable_sort(launches.begin(), launches.end(), [](const auto& a, const auto& b) {
            return a.timeline.device_kernels_begin < b.timeline.device_kernels_begin;
          });
          for (const auto& b : launches) {
            const auto& t = b.timeline;
            const double from = std::max(t.device_kernels_begin, covered_until);
            if (t.device_kernels_end > from) kernels_busy_ms += t.device_kernels_end - from;
            covered_until = std::max(covered_until, t.device_kernels_end);
            if (first_kernel_ms < 0) first_kernel_ms = t.device_kernels_begin;
          }
          // The postings of every list of every query (shard 0): exhaustive OR's work, counted
          // once however the kernels' windows re-read block boundaries; per device-busy time it
          // is the rate the device delivers (the lanes' summed kernel intervals count the time
          // two launches overlap twice).
          std::uint64_t list_postings = 0;
          for (const Query& q : queries)
            for (TermId t : q.terms) list_postings += index.shard(0).term(t).df_shard;
          QueryCounters c;
          for (const auto& shard_results : r.per_shard)
            for (const auto& x : shard_results) c.add(x.counters);
          // Latency: batches of this size one at a time; a query's latency is its batch's.
          std::vector<double> batch_ms, lat_kernel_ms, lat_copy_ms, lat_host_ms;
          const std::size_t lat_n = std::min(queries.size(), std::max<std::size_t>(latency_limit, go.batch_size));
          for (std::size_t b0 = 0; b0 < lat_n; b0 += go.batch_size) {
            const std::vector<Query> batch(queries.begin() + b0,
                                           queries.begin() + std::min(lat_n, b0 + go.batch_size));
            for (auto* e : raw) e->clear_stats();
            const auto t0 = Clock::now();
            run_all(engines, batch, params);
            const double ms = seconds_since(t0) * 1e3;
            for (std::size_t i = 0; i < batch.size(); ++i) batch_ms.push_back(ms);
            // Where a lone batch's time goes: kernels, copies, and the host (the rest).
            double kms = 0, cms = 0;
            for (auto* e : raw)
              for (const auto& b : e->batch_stats()) {
                kms += b.kernel_ms;
                cms += b.h2d_ms + b.d2h_ms;
              }
            lat_kernel_ms.push_back(kms);
            lat_copy_ms.push_back(cms);
            lat_host_ms.push_back(ms - kms - cms);
          }
          // Exactness of this run's answers on a sample.
          std::size_t checked = 0, wrong = 0;
          for (std::size_t qi = 0; qi < queries.size() && checked < verify; ++qi, ++checked) {
            std::vector<const ShardResult*> ps;
            for (const auto& sr : r.per_shard) ps.push_back(&sr[qi]);
            const QueryResult merged = merge_shard_results(params, ps);
            const ReferenceAnswer ref = reference_answer(index, queries[qi], params, 2 * k + 20);
            if (compare_top_k(ref.hits, ref.total_matches, k, merged.hits)) ++wrong;
          }
          nlohmann::json row = {
              {"mode", mode_name}, {"algorithm", algo}, {"or_window", window}, {"or_threads", threads}, {"or_stage_blocks", stage}, {"topk_memory", topk_memory}, {"threshold_seed", seeded}, {"posting_layout", layout}, {"posting_layout_used", raw.empty() ? nlohmann::json() : raw[0]->stats()["shard_image"]["posting_layout"]},
              {"batch_size", go.batch_size}, {"remainder_first", go.remainder_first}, {"and_or_cost_estimate", go.and_or_cost_estimate},
              {"queries", queries.size()}, {"seconds", r.seconds}, {"round_seconds", round_seconds}, {"queries_per_s", qps},
              {"latency_ms_p50", percentile(batch_ms, 50)},
              {"latency_ms_p99", percentile(batch_ms, 99)},
              {"latency_batch_ms_p50", {{"kernel", percentile(lat_kernel_ms, 50)},
                                        {"copies", percentile(lat_copy_ms, 50)},
                                        {"host", percentile(lat_host_ms, 50)}}},
              {"or_shape_used", launches.empty() ? nlohmann::json()
                                                 : nlohmann::json({launches.front().or_window,
                                                                   launches.front().or_threads})},
              {"or_warp_window_used", launches.empty() ? 0u : launches.front().or_warp_window},
              {"list_postings", list_postings},
              {"list_postings_per_s_device_busy",
               kernels_busy_ms > 0 ? double(list_postings) / (kernels_busy_ms * 1e-3) : 0.0},
              {"pipeline", {{"call_ms", call_ms}, {"kernels_busy_ms", kernels_busy_ms},
                            {"first_kernel_ms", first_kernel_ms}, {"host_wait_ms", host_wait_ms},
                            {"columns", {"queries", "host_pack_begin", "host_launched",
                                         "device_h2d_begin", "device_kernels_begin",
                                         "device_kernels_end", "device_d2h_end", "host_wait_begin",
                                         "host_wait_end", "host_unpack_end"}},
                            {"batches", timeline}}},
              {"kernel_ms", kernel_ms}, {"h2d_ms", h2d_ms}, {"d2h_ms", d2h_ms},
              {"pack_ms", pack_ms}, {"unpack_ms", unpack_ms}, {"h2d_bytes", h2d_bytes}, {"d2h_bytes", d2h_bytes},
              {"postings_bytes_read", bytes_read},
              {"postings_read_gb_per_s", kernel_ms > 0 ? double(bytes_read) / (kernel_ms * 1e6) : 0.0},
              {"fraction_of_copy_bandwidth",
               kernel_ms > 0 ? double(bytes_read) / (kernel_ms * 1e6) / copy_gbps : 0.0},
              // Roofline: the kernels' time against moving the postings they read once at the
              // measured copy bandwidth, and the postings they handled per second.
              {"roofline", {{"postings_per_s", kernel_ms > 0 ? double(c.postings_decoded) / (kernel_ms * 1e-3) : 0.0},
                            {"bytes_read", bytes_read},
                            {"copy_gb_per_s", copy_gbps},
                            {"ms_at_copy_bandwidth", double(bytes_read) / (copy_gbps * 1e6)},
                            {"kernel_ms", kernel_ms}}},
              {"segments", {{"and", and_segments}, {"or", or_segments}, {"batches", batches}}},
              {"counters", to_json(c)},
              {"early_termination_rounds_saved", rounds_saved},
              {"verified_queries", checked}, {"verify_failures", wrong}};
          // The seed table's size and build time (per engine, once at start; not in the timing).
          if (const auto st = raw.front()->stats(); st.contains("threshold_seed"))
            row["threshold_seed_table"] = st["threshold_seed"];
          std::cerr << fmt::format(
              "GPU {} {} batch {}: {:.0f} q/s, p50 {:.2f} ms, p99 {:.2f} ms, kernel {:.1f} ms, unpack {:.1f} ms, "
              "{:.1f} G postings/s, {:.0f} GB/s postings, {} wrong of {}; a lone batch's p50: "
              "kernels {:.2f} ms, copies {:.2f}, host {:.2f}; pipeline: call {:.1f} ms, kernels busy "
              "{:.1f}, first kernel at {:.2f}, host waited {:.1f}; list postings {:.1f} G/s of device "
              "busy time\n",
              algo_spec, mode_name, go.batch_size, qps, percentile(batch_ms, 50),
              percentile(batch_ms, 99), kernel_ms, unpack_ms,
              double(c.postings_decoded) / std::max(kernel_ms, 1e-9) / 1e6,
              double(bytes_read) / std::max(kernel_ms, 1e-9) / 1e6, wrong, checked,
              percentile(lat_kernel_ms, 50), percentile(lat_copy_ms, 50),
              percentile(lat_host_ms, 50), call_ms, kernels_busy_ms, first_kernel_ms, host_wait_ms,
              kernels_busy_ms > 0 ? double(list_postings) / kernels_busy_ms / 1e6 : 0.0);
          gpu_json.push_back(row);
        }
      }
    }
    out["gpu"] = gpu_json;
    std::ofstream(out_path) << out.dump(2) << '\n';
    std::cerr << "wrote " << out_path << '\n';
  } catch (const std::exception& e) {
    std::cerr << "bench_gpu_engine: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
