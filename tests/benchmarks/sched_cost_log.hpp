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
// each processor, and each processor's work for the query (postings decoded, documents scored:
// how much of a model's error the work itself would explain; for fitting other models offline).
inline void write_cost_log(const std::filesystem::path& path, const CostLog& train,
                           const CostLog& test) {
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("cannot write the cost log {}", path.string()));
  out << "set\tterms\tshortest\tsecond_shortest\ttotal\ttotal_blocks\tand_estimate\tor_ran\t"
         "cpu_seconds\tgpu_seconds\tcpu_postings\tcpu_docs_scored\tgpu_postings\tgpu_docs_scored\n";
  for (const auto& [name, log] : {std::pair{"train", &train}, std::pair{"test", &test}})
    for (std::size_t i = 0; i < log->samples[0].size(); ++i) {
      const CostSample& c = log->samples[0][i];
      const QueryFeatures& f = c.features;
      const CostSample& g = log->samples[1][i];
      out << fmt::format(
          "{}\t{}\t{}\t{}\t{}\t{}\t{:.6g}\t{:d}\t{:.9f}\t{:.9f}\t{}\t{}\t{}\t{}\n", name,
          f.terms, f.shortest, f.second_shortest, f.total, f.total_blocks, f.and_estimate,
          c.or_ran, c.seconds, g.seconds, c.postings_decoded, c.docs_scored, g.postings_decoded,
          g.docs_scored);
    }
}

}  // namespace gpusearch::bench
