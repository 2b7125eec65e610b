#include "common/thread_placement.hpp"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>

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
      cpu_set_t allowed;
      if (rc == EINVAL && sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        std::string list;
        for (int c = 0; c < CPU_SETSIZE; ++c)
          if (CPU_ISSET(c, &allowed)) {
            if (!list.empty()) list += ' ';
            list += std::to_string(c);
          }
        problems += " (this process may run on CPUs " + list + ")";
      }
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

}  // namespace gpusearch
