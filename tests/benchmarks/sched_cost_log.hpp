// bench_scheduler's --cost-log: the logged per-query costs as TSV, for fitting other cost models
// offline (results/scheduler/*/predictor_models.py, specialization_bound.py).
#pragma once

#include <filesystem>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "common/error.hpp"
#include "isn/coprocessor_scheduler.hpp"

namespace gpusearch::bench {

// The logged costs, one line per query and set: features, whether and-or's OR ran, the cost on
// each processor (for fitting other models offline).
inline void write_cost_log(const std::filesystem::path& path, const CostLog& train,
                           const CostLog& test) {
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("cannot write the cost log {}", path.string()));
  out << "set\tterms\tshortest\tsecond_shortest\ttotal\ttotal_blocks\tand_estimate\tor_ran\t"
         "cpu_seconds\tgpu_seconds\n";
  for (const auto& [name, log] : {std::pair{"train", &train}, std::pair{"test", &test}})
    for (std::size_t i = 0; i < log->samples[0].size(); ++i) {
      const CostSample& c = log->samples[0][i];
      const QueryFeatures& f = c.features;
      out << fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{:.6g}\t{:d}\t{:.9f}\t{:.9f}\n", name, f.terms,
                         f.shortest, f.second_shortest, f.total, f.total_blocks, f.and_estimate,
                         c.or_ran, c.seconds, log->samples[1][i].seconds);
    }
}

}  // namespace gpusearch::bench
