// Where a latency-critical thread runs: pinned to one CPU and/or at real-time priority
// (SCHED_FIFO 1), so that its wake-ups neither cross CPUs nor wait behind other processes'
// time slices (tests/benchmarks/NOTES-frontend.md, "Wake-ups on the 2-vCPU VM").
#pragma once

#include <string>

namespace gpusearch {

struct ThreadPlacement {
  int cpu = -1;           // -1: any CPU (the scheduler's choice)
  bool realtime = false;  // SCHED_FIFO priority 1
  bool any() const { return cpu >= 0 || realtime; }
};

// Applies `placement` to the calling thread. Returns "" or what could not be done (e.g. no
// permission for SCHED_FIFO, a CPU not in this process's set); the thread then runs as before.
std::string place_this_thread(const ThreadPlacement& placement);

// Reads "CPU", "rt", "CPU,rt" or "" (nothing) as a flag's value; throws Error naming `flag`.
ThreadPlacement parse_thread_placement(const std::string& text, const std::string& flag);

}  // namespace gpusearch
