// bench_scheduler's configuration names:
//   BASE[:hostN][:cpuW][:takeN][:marginal][:single][:stepX][:balance|:steals][:chain]
// (see bench_scheduler.cpp's opening comment for what each part does).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "common/error.hpp"

namespace gpusearch::bench {

struct ConfigVariant {
  std::string base;
  unsigned host_threads = 0, cpu_workers = 0;  // 0: the run's defaults
  unsigned take = 0;  // SchedulerOptions::lone_jobs_per_take (0: the default)
  bool marginal = false;  // queues-specialize: the GPU's marginal cost, not its flat cost
  bool single = false;    // arrivals submitted one at a time, not every one due at once
  double step = 0;        // queues-specialize: theta's step (0: the default)
  // queues-specialize: theta also balances the queues' oldest waits (:balance, the default) or
  // follows steals and idle workers alone (:steals)
  std::optional<bool> balance;
  bool chain = false;     // SchedulerOptions::chain_next_batch
};

inline ConfigVariant parse_config_variant(const std::string& name) {
  ConfigVariant v;
  std::size_t colon = name.find(':');
  v.base = name.substr(0, colon);
  while (colon != std::string::npos) {
    const std::size_t next = name.find(':', colon + 1);
    const std::string part = name.substr(colon + 1, next == std::string::npos ? next : next - colon - 1);
    if (part.rfind("step", 0) == 0) {
      char* end = nullptr;
      const std::string number = part.substr(4);
      v.step = std::strtod(number.c_str(), &end);
      if (number.empty() || *end != '\0' || !(v.step > 0) || v.step > 5)
        throw InputError("--configs", 0,
                         fmt::format("'{}': :stepX takes a step in (0, 5]", name));
      colon = next;
      continue;
    }
    if (part == "balance" || part == "steals") {
      v.balance = part == "balance";
      colon = next;
      continue;
    }
    if (part == "marginal" || part == "single" || part == "chain") {
      (part == "marginal" ? v.marginal
       : part == "single" ? v.single
                          : v.chain) = true;
      colon = next;
      continue;
    }
    unsigned* field = part.rfind("host", 0) == 0   ? &v.host_threads
                      : part.rfind("cpu", 0) == 0  ? &v.cpu_workers
                      : part.rfind("take", 0) == 0 ? &v.take
                                                   : nullptr;
    const std::string digits = field ? part.substr(field == &v.cpu_workers ? 3 : 4) : "";
    if (!field || digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
        digits.size() > 4 || std::stoul(digits) == 0)
      throw InputError("--configs", 0,
                       fmt::format("'{}': a configuration is NAME[:hostN][:cpuW][:takeN][:marginal][:single][:stepX]"
                                   "[:balance|:steals][:chain] with N, W > 0",
                                   name));
    *field = unsigned(std::stoul(digits));
    colon = next;
  }
  return v;
}

}  // namespace gpusearch::bench
