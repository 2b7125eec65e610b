// The perfect-split bound of CPU+GPU co-processing (issue 11), measured rather than modelled.
//
// A scheduler can at best hand the CPU a set S of the queries and the GPU the rest, both busy
// all the time. For an ordering of the test queries and a fraction f, S is the first f of them;
// the CPU workers answer S (one query a call, as the scheduler's CPU workers do) while the GPU
// answers the rest in full batches, at the same time, so that each side's rate includes the
// other's load on the host. The mix then runs at min(cpu_rate / f, gpu_rate / (1 - f)) queries
// a second. The best f of the best ordering bounds what any routing of that mix can sustain on
// this host; f = 0 is the GPU alone under the same measurement.
//
// Orderings: random (no specialization), the CPU's lone cost (it takes its cheapest), and the
// CPU's lone cost over the GPU's (lone latency, or the work its kernels counted in a batch).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/query_engine.hpp"

namespace gpusearch::bench {

struct SplitInputs {
  std::span<const Query> queries;
  SearchParams params;
  QueryEngine* cpu = nullptr;
  QueryEngine* gpu = nullptr;
  unsigned cpu_workers = 8;
  std::size_t gpu_batch = 4096;
  std::vector<double> cpu_lone_seconds, gpu_lone_seconds;  // per query
  std::vector<double> gpu_work;  // per query: postings decoded + documents scored in a batch
  double seconds = 1.0;          // per measured point
  std::vector<double> fractions{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8};
};

struct SplitRates {
  double cpu = 0, gpu = 0;  // queries a second each side answered of its own set
};

// Both sides at once for `seconds`: the CPU workers over `on_cpu`, the GPU over `on_gpu` in
// batches of gpu_batch (the set repeated where it is smaller: a saturated GPU's batches are full).
inline SplitRates measure_split(const SplitInputs& in, const std::vector<std::size_t>& on_cpu,
                                const std::vector<std::size_t>& on_gpu) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<Query>> gpu_batches;
  if (!on_gpu.empty()) {
    const std::size_t per_batch = std::min(in.gpu_batch, std::max<std::size_t>(on_gpu.size(), 1));
    // Enough batches to cycle through the whole set at least once.
    const std::size_t batches = std::max<std::size_t>(1, (on_gpu.size() + per_batch - 1) / per_batch);
    for (std::size_t b = 0, next = 0; b < batches; ++b) {
      std::vector<Query> batch;
      for (std::size_t i = 0; i < in.gpu_batch; ++i, ++next)
        batch.push_back(in.queries[on_gpu[next % on_gpu.size()]]);
      gpu_batches.push_back(std::move(batch));
    }
  }
  std::atomic<bool> go{false};
  const auto start = Clock::now();
  const auto stop_at = start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(in.seconds));
  std::atomic<std::uint64_t> cpu_done{0};
  std::uint64_t gpu_done = 0;
  double cpu_elapsed = 0, gpu_elapsed = 0;
  std::vector<std::thread> workers;
  std::vector<double> worker_elapsed(in.cpu_workers, 0);
  if (!on_cpu.empty()) {
    for (unsigned w = 0; w < in.cpu_workers; ++w)
      workers.emplace_back([&, w] {
        ShardResult out;
        std::uint64_t done = 0;
        for (std::size_t i = w; Clock::now() < stop_at; i += in.cpu_workers) {
          const Query& q = in.queries[on_cpu[i % on_cpu.size()]];
          in.cpu->search(std::span(&q, 1), in.params, std::span(&out, 1));
          ++done;
        }
        worker_elapsed[w] = std::chrono::duration<double>(Clock::now() - start).count();
        cpu_done += done;
      });
  }
  if (!gpu_batches.empty()) {
    std::vector<ShardResult> out(in.gpu_batch);
    for (std::size_t b = 0; Clock::now() < stop_at; ++b) {
      in.gpu->search(gpu_batches[b % gpu_batches.size()], in.params, out);
      gpu_done += in.gpu_batch;
    }
    gpu_elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  for (std::thread& t : workers) t.join();
  // Each worker's rate over its own span (a worker ends with the query it started).
  if (!on_cpu.empty())
    cpu_elapsed = std::accumulate(worker_elapsed.begin(), worker_elapsed.end(), 0.0) /
                  double(in.cpu_workers);
  SplitRates r;
  if (cpu_elapsed > 0) r.cpu = double(cpu_done.load()) / cpu_elapsed;
  if (gpu_elapsed > 0) r.gpu = double(gpu_done) / gpu_elapsed;
  return r;
}

// Runs the study; prints one line per point and returns them (JSON).
inline nlohmann::json split_bound_study(const SplitInputs& in, std::ostream& log) {
  const std::size_t n = in.queries.size();
  std::vector<std::pair<std::string, std::vector<double>>> orderings;
  {
    std::mt19937_64 rng(7);
    std::vector<double> key(n);
    for (double& k : key) k = std::uniform_real_distribution<double>(0, 1)(rng);
    orderings.emplace_back("random", std::move(key));
  }
  orderings.emplace_back("cpu-cost", in.cpu_lone_seconds);
  std::vector<double> ratio_lone(n), ratio_work(n);
  for (std::size_t i = 0; i < n; ++i) {
    ratio_lone[i] = in.cpu_lone_seconds[i] / std::max(1e-9, in.gpu_lone_seconds[i]);
    ratio_work[i] = in.cpu_lone_seconds[i] / std::max(1.0, in.gpu_work[i]);
  }
  orderings.emplace_back("cpu/gpu-lone", std::move(ratio_lone));
  orderings.emplace_back("cpu/gpu-work", std::move(ratio_work));

  std::vector<std::size_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  const SplitRates alone = measure_split(in, {}, all);
  log << fmt::format("split bound: GPU alone (full batches of {}) {:.0f} queries/s\n", in.gpu_batch,
                     alone.gpu);
  nlohmann::json points = nlohmann::json::array();
  nlohmann::json best = nlohmann::json::object();
  for (const auto& [name, key] : orderings) {
    std::vector<std::size_t> order = all;
    std::stable_sort(order.begin(), order.end(),
                     [&key](std::size_t a, std::size_t b) { return key[a] < key[b]; });
    double best_ratio = 1, best_fraction = 0;
    for (double f : in.fractions) {
      const std::size_t m = std::size_t(std::llround(f * double(n)));
      if (m == 0 || m >= n) continue;
      const std::vector<std::size_t> on_cpu(order.begin(), order.begin() + std::ptrdiff_t(m));
      const std::vector<std::size_t> on_gpu(order.begin() + std::ptrdiff_t(m), order.end());
      const SplitRates r = measure_split(in, on_cpu, on_gpu);
      const double fraction = double(m) / double(n);
      const double combined = std::min(r.cpu / fraction, r.gpu / (1 - fraction));
      const double ratio = combined / alone.gpu;
      log << fmt::format(
          "split bound: {:<13} CPU takes {:>4.0f}%: CPU {:>8.0f}/s, GPU {:>8.0f}/s (alone "
          "{:.0f}/s on the whole mix) -> mix {:>8.0f}/s = {:.3f}x the GPU alone\n",
          name, 100 * fraction, r.cpu, r.gpu, alone.gpu, combined, ratio);
      points.push_back({{"ordering", name},
                        {"cpu_fraction", fraction},
                        {"cpu_rate", r.cpu},
                        {"gpu_rate", r.gpu},
                        {"mix_rate", combined},
                        {"over_gpu_alone", ratio}});
      if (ratio > best_ratio) best_ratio = ratio, best_fraction = fraction;
    }
    best[name] = {{"over_gpu_alone", best_ratio}, {"cpu_fraction", best_fraction}};
    log << fmt::format("split bound: {:<13} best {:.3f}x the GPU alone (CPU takes {:.0f}%)\n", name,
                       best_ratio, 100 * best_fraction);
  }
  return {{"gpu_alone_rate", alone.gpu},
          {"cpu_workers", in.cpu_workers},
          {"gpu_batch", in.gpu_batch},
          {"seconds_per_point", in.seconds},
          {"queries", n},
          {"points", points},
          {"best", best}};
}

}  // namespace gpusearch::bench
