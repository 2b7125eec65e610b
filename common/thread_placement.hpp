// Where threads run. A latency-critical thread: pinned to one CPU and/or at real-time priority
// (SCHED_FIFO 1), so that its wake-ups neither cross CPUs nor wait behind other processes'
// time slices (tests/benchmarks/NOTES-frontend.md, "Wake-ups on the 2-vCPU VM").
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// A whole process (--pin-cores, issue 16): the ISNs that share a node each on a slice of its
// CPUs, so that each keeps its shard's hot blocks in its own cores' caches and one ISN's busy
// threads do not land on another's cores.
// The CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> allowed_cpus();

// "0-3,8,10-11" -> {0,1,2,3,8,10,11} (sorted, without repeats). Throws InputError naming
// `flag` for anything else (empty, a bad number, a reversed range).
std::vector<int> parse_cpu_list(std::string_view list, std::string_view flag = "--pin-cores");
// The inverse: ascending CPUs as ranges ("0-3,8").
std::string format_cpu_list(std::span<const int> cpus);

// Slice i of n of `cpus`: contiguous runs whose sizes differ by at most one. More slices than
// CPUs: slice i is the single CPU cpus[i % size] (ISNs then share CPUs round-robin).
std::vector<int> cpu_slice(std::span<const int> cpus, int i, int n);

// What --pin-cores asks of node-local ISN `local_rank` of `local_isns`: off (empty: not
// pinned), auto (its slice of allowed_cpus()), or a CPU list (each ISN of the node its slice
// of that list). Throws InputError for a bad value or a CPU the process may not use.
std::vector<int> cpus_to_pin(std::string_view flag_value, int local_rank, int local_isns);

// Sets the affinity of every thread of this process (the threads started later inherit it
// from the thread that starts them). Returns the threads pinned; throws Error when none could
// be pinned.
std::size_t pin_process_threads(std::span<const int> cpus);

}  // namespace gpusearch
