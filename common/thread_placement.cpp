#include "common/thread_placement.hpp"

#include <pthread.h>
#include <sched.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "common/error.hpp"

namespace gpusearch {

std::string place_this_thread(const ThreadPlacement& placement) {
  std::string problems;
  if (placement.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(placement.cpu, &set);
    if (int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set); rc != 0) {
      problems += "cannot pin to CPU " + std::to_string(placement.cpu) + ": " + std::strerror(rc);
      if (rc == EINVAL)
        problems += " (this process may run on CPUs " + format_cpu_list(allowed_cpus()) + ")";
    }
  }
  if (placement.realtime) {
    sched_param param{};
    param.sched_priority = 1;
    if (int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param); rc != 0)
      problems += std::string(problems.empty() ? "" : "; ") +
                  "cannot run at real-time priority (SCHED_FIFO 1; needs CAP_SYS_NICE or "
                  "RLIMIT_RTPRIO): " +
                  std::strerror(rc);
  }
  return problems;
}

ThreadPlacement parse_thread_placement(const std::string& text, const std::string& flag) {
  ThreadPlacement p;
  if (text.empty()) return p;
  const auto bad = [&] {
    return Error(flag + ": '" + text + "': expected CPU, rt or CPU,rt (e.g. 0,rt; CPU below " +
                 std::to_string(CPU_SETSIZE) + ")");
  };
  std::size_t start = 0;
  for (;;) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(start, end - start);
    if (part == "rt" && !p.realtime) {
      p.realtime = true;
    } else if (!part.empty() && part.size() <= 4 && p.cpu < 0 &&
               part.find_first_not_of("0123456789") == std::string::npos &&
               std::stoi(part) < CPU_SETSIZE) {
      p.cpu = std::stoi(part);
    } else {
      throw bad();
    }
    if (end == text.size()) return p;
    start = end + 1;
  }
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    // Nothing known: every online CPU.
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < std::max(n, 1L); ++c) cpus.push_back(int(c));
    return cpus;
  }
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<int> parse_cpu_list(std::string_view list, std::string_view flag) {
  const auto bad = [&](std::string_view why) {
    return InputError(std::string(flag), 0,
                      fmt::format("'{}': {} (expected off, auto, or CPUs such as 0-3,8)", list,
                                  why));
  };
  if (list.empty()) throw bad("empty");
  std::vector<int> cpus;
  const auto number = [&](std::string_view s) {
    int v = -1;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0 ||
        v >= CPU_SETSIZE)
      throw bad(fmt::format("'{}' is not a CPU number", s));
    return v;
  };
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t comma = std::min(list.find(',', begin), list.size());
    const std::string_view item = list.substr(begin, comma - begin);
    const std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      cpus.push_back(number(item));
    } else {
      const int lo = number(item.substr(0, dash)), hi = number(item.substr(dash + 1));
      if (hi < lo) throw bad(fmt::format("the range {} runs backwards", item));
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    }
    begin = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(std::span<const int> cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> cpu_slice(std::span<const int> cpus, int i, int n) {
  if (cpus.empty() || n <= 0 || i < 0) return {};
  const std::size_t size = cpus.size();
  if (std::size_t(n) > size) return {cpus[std::size_t(i) % size]};
  // Slice i: [i * size / n, (i + 1) * size / n).
  const std::size_t lo = std::size_t(i) * size / std::size_t(n);
  const std::size_t hi = (std::size_t(i) + 1) * size / std::size_t(n);
  return {cpus.begin() + std::ptrdiff_t(lo), cpus.begin() + std::ptrdiff_t(hi)};
}

std::vector<int> cpus_to_pin(std::string_view flag_value, int local_rank, int local_isns) {
  if (flag_value == "off") return {};
  const std::vector<int> allowed = allowed_cpus();
  std::vector<int> pool;
  if (flag_value == "auto") {
    pool = allowed;
  } else {
    pool = parse_cpu_list(flag_value);
    for (int c : pool)
      if (!std::binary_search(allowed.begin(), allowed.end(), c))
        throw InputError("--pin-cores", 0,
                       fmt::format("'{}': CPU {} is not one this process may run on ({})",
                                   flag_value, c, format_cpu_list(allowed)));
  }
  return cpu_slice(pool, local_rank, local_isns);
}

std::size_t pin_process_threads(std::span<const int> cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  std::size_t pinned = 0;
  std::string first_error;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const pid_t tid = pid_t(std::atoi(task.path().filename().c_str()));
    if (tid <= 0) continue;
    if (sched_setaffinity(tid, sizeof set, &set) == 0)
      ++pinned;
    else if (first_error.empty())
      first_error = std::strerror(errno);
  }
  if (ec || pinned == 0) {
    // No /proc: at least the calling thread, whose later threads inherit it.
    if (sched_setaffinity(0, sizeof set, &set) == 0) return 1;
    throw Error(fmt::format("--pin-cores {}: could not set the CPU affinity: {}",
                            format_cpu_list(cpus),
                            first_error.empty() ? std::strerror(errno) : first_error));
  }
  return pinned;
}

}  // namespace gpusearch
