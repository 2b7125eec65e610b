// Hardware counters of one command and every thread and child it starts (perf_event_open with
// inherit, as `perf stat` counts): user-space instructions and cycles, last-level cache misses,
// the task clock and context switches. For the cluster's processes: launch/cluster.sh puts it in
// front of every ISN (GPUSEARCH_ISN_PREFIX), so that one ISN's work and the cycles it took can be
// compared with four ISNs' (issue 16: instructions against cycles, NOTES-cluster.md).
//
//   bench_hw_counters --out-dir DIR [--tag T] -- COMMAND [ARGS...]
//
// Writes DIR/<tag>-rank<R>-pid<P>.json (R: OMPI_COMM_WORLD_RANK, or -1; the tag defaults to
// GPUSEARCH_RUN_TAG, else "run") after COMMAND ends, and exits with COMMAND's status. Counters
// the machine does not offer (a VM without a virtual PMU: ENOENT) are left out and named in
// "unavailable"; the command runs all the same. Counts are scaled by enabled/running time when
// the kernel multiplexed them ("multiplexed": true).
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct Counter {
  const char* name;
  std::uint32_t type;
  std::uint64_t config;
  bool user_only;
  int fd = -1;
  std::string error;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Hardware counters of a command and all its threads (perf_event_open, inherit)"};
  std::filesystem::path out_dir;
  std::string tag;
  std::vector<std::string> command;
  app.add_option("--out-dir", out_dir, "where the JSON goes")->required();
  app.add_option("--tag", tag, "file name prefix (default: $GPUSEARCH_RUN_TAG, else run)");
  app.add_option("command", command, "the command to count (after --)")->required();
  app.allow_extras(false);
  CLI11_PARSE(app, argc, argv);
  if (tag.empty()) {
    const char* t = std::getenv("GPUSEARCH_RUN_TAG");
    tag = t && *t ? t : "run";
  }
  const char* rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  const int rank = rank_env ? std::atoi(rank_env) : -1;

  std::vector<Counter> counters = {
      {"instructions_user", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, true, -1, {}},
      {"cycles_user", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, true, -1, {}},
      {"llc_misses_user", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, true, -1, {}},
      {"task_clock_ns", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, false, -1, {}},
      {"context_switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, false, -1, {}},
  };

  // The child waits on a pipe until the parent has opened the counters on it (enable_on_exec:
  // they start at the command's exec, not in this wrapper), then execs; the parent reads them
  // once the command and every thread and child it started have ended.
  int go[2];
  if (pipe(go) != 0) {
    std::cerr << "bench_hw_counters: pipe: " << std::strerror(errno) << "\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = fork();
  if (child < 0) {
    std::cerr << "bench_hw_counters: fork: " << std::strerror(errno) << "\n";
    return 2;
  }
  if (child == 0) {
    close(go[1]);
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(127);
    close(go[0]);
    std::vector<char*> args;
    for (std::string& s : command) args.push_back(s.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::cerr << "bench_hw_counters: cannot run " << command[0] << ": " << std::strerror(errno)
              << "\n";
    _exit(127);
  }
  close(go[0]);
  nlohmann::json unavailable = nlohmann::json::array();
  for (Counter& c : counters) {
    perf_event_attr a;
    std::memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = c.type;
    a.config = c.config;
    a.disabled = 1;
    a.enable_on_exec = 1;
    a.inherit = 1;
    a.exclude_kernel = c.user_only ? 1 : 0;
    a.exclude_hv = 1;
    a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    c.fd = int(syscall(SYS_perf_event_open, &a, child, -1, -1, 0));
    if (c.fd < 0) {
      c.error = std::strerror(errno);
      unavailable.push_back({{"counter", c.name}, {"error", c.error}});
    }
  }
  if (write(go[1], "x", 1) != 1) {
    std::cerr << "bench_hw_counters: cannot start the command\n";
    kill(child, SIGKILL);
  }
  close(go[1]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int exit_code =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);

  nlohmann::json j = {{"tag", tag},         {"rank", rank},       {"pid", int(child)},
                      {"command", command}, {"wall_seconds", wall}, {"exit_code", exit_code},
                      {"unavailable", unavailable}};
  bool multiplexed = false;
  for (Counter& c : counters) {
    if (c.fd < 0) continue;
    std::uint64_t v[3] = {0, 0, 0};  // value, time enabled, time running
    if (read(c.fd, v, sizeof v) != sizeof v) {
      j["unavailable"].push_back({{"counter", c.name}, {"error", "read failed"}});
      continue;
    }
    double value = double(v[0]);
    if (v[2] > 0 && v[2] < v[1]) {
      value *= double(v[1]) / double(v[2]);
      multiplexed = true;
    }
    j[c.name] = value;
    close(c.fd);
  }
  j["multiplexed"] = multiplexed;
  if (j.contains("instructions_user") && j.contains("cycles_user") &&
      j["cycles_user"].get<double>() > 0)
    j["ipc_user"] = j["instructions_user"].get<double>() / j["cycles_user"].get<double>();
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  const auto path = out_dir / (tag + "-rank" + std::to_string(rank) + "-pid" +
                               std::to_string(int(child)) + ".json");
  std::ofstream(path) << j.dump(1) << "\n";
  return exit_code;
}
