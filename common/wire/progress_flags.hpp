// The MPI progress flags the aggregator and the ISN share (--progress, --spin-us, --hot-poll-us,
// --max-sleep-us, --handoff, --busy-poll), defined once so that both programs document and parse them alike. Header
// only: used by the command-line mains, which link CLI11.
#pragma once

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include <mpi.h>

#include <CLI/CLI.hpp>

#include "common/wire/progress_pacer.hpp"
#include "common/wire/shared_memory_eager.hpp"

namespace gpusearch::wire {

// Adds the flags to `app`; `mode_name` receives --progress (parse it with
// parse_progress_mode after parsing), the rest go straight into `pacing`.
inline void add_progress_flags(CLI::App& app, std::string& mode_name, ProgressOptions& pacing) {
  app.add_option("--progress", mode_name,
                 "how the MPI thread waits: adaptive, spin or backoff (the old sleep-and-poll)")
      ->capture_default_str();
  app.add_option("--spin-us", pacing.spin_us,
                 "adaptive: poll without sleeping this long after any activity")
      ->capture_default_str();
  app.add_option("--hot-poll-us", pacing.hot_poll_us,
                 "adaptive: polling period while hot (0: yield and poll)")
      ->capture_default_str();
  app.add_option("--max-sleep-us", pacing.max_sleep_us,
                 "adaptive and backoff: longest sleep between polling rounds")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--handoff", [&pacing](const std::string& s) { pacing.hot_handoff = s == "hot"; },
         "how the merge thread (aggregator) and the engine thread (ISN) wait for work: hot (poll "
         "around when it is due, else sleep; not with --progress backoff) or sleep")
      ->check(CLI::IsMember({"hot", "sleep"}))
      ->default_str("hot");
  app.add_option_function<std::string>(
         "--busy-poll",
         [&pacing](const std::string& s) { pacing.busy_poll = parse_busy_poll(s); },
         "which polling rounds skip the yield: off, sending (while this rank's own sends are "
         "unfinished: a large message without Open MPI's single-copy transport moves only while "
         "its sender polls) or hot (every hot round: a waiting message is picked up on a busy "
         "node without waiting for a core)")
      ->check(CLI::IsMember({"off", "sending", "hot"}))
      ->default_str("off");
  app.add_option("--mpi-thread-nice", pacing.thread_nice,
                 "the MPI thread's nice value (-20..19; below 0 weighs it above the engines' "
                 "threads, so that a message waiting for it does not wait for a core; needs "
                 "CAP_SYS_NICE). 0: unchanged")
      ->capture_default_str()
      ->check(CLI::Range(-20, 19));
}

// --shm-eager-bytes (common/wire/shared_memory_eager.hpp). Its value took effect before MPI_Init
// (prefer_eager_shared_memory(shm_eager_bytes_in(argv))); parsing it here documents and checks it.
inline void add_shm_eager_flag(CLI::App& app, std::size_t& eager_bytes) {
  app.add_option(kShmEagerFlag, eager_bytes, kShmEagerHelp)
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) { return shm_eager_bytes_problem(text); },
          "0 or BYTES in [4096, 16777216]"));
}

// Ends an MPI main whose flags did not parse: --help (CLI11's exit code 0) finalizes and
// returns 0, since MPI_Abort would drop the help text still in stdout's buffer; a flag error
// flushes its message and aborts the job with 2. Returns the main's exit code.
// launch/cluster.sh runs mpirun with --enable-recovery, whose exit code is 0 after an MPI_Abort:
// the code goes into the file GPUSEARCH_ABORT_MARKER names (cluster.sh exits with it), as the
// aggregator's own --abort-marker does.
inline int end_after_flag_error(CLI::App& app, const CLI::ParseError& e) {
  const int rc = app.exit(e);
  std::cout.flush();
  if (rc == 0) {
    MPI_Finalize();
    return 0;
  }
  std::cerr.flush();
  if (const char* marker = std::getenv("GPUSEARCH_ABORT_MARKER"); marker && *marker)
    std::ofstream(marker) << 2 << '\n';
  MPI_Abort(MPI_COMM_WORLD, 2);
  return rc;
}

}  // namespace gpusearch::wire
