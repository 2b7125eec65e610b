// Does a large shared-memory MPI message reach its receiver while its sender makes no MPI
// progress? (issue 16: an ISN's answer, 250-400 KiB at batch 1,024, sent from a node whose cores
// the engines take.) Rank 0 posts an MPI_Isend of --bytes and sleeps --sleep-us before it waits
// on it; rank 1 polls (MPI_Iprobe, MPI_Recv) and times when the message was whole, from a
// barrier that both passed. With Open MPI's single-copy transport (vader's CMA) the receiver
// pulls the message at once (about 0.03-0.1 ms for 256 KiB on the build machine); without it
// (--mca btl_vader_single_copy_mechanism none, or CMA denied in a container) it waits for the
// sender (about the sleep), unless the message is within the eager limit that --shm-eager-bytes
// sets (as the aggregator and the ISNs do; common/wire/shared_memory_eager.hpp): then the sender
// copies it whole at MPI_Isend (about 0.1 ms for 256 KiB without CMA on the build machine).
// Prints one JSON line per rep and a summary with the transport's settings.
//
//   mpirun -np 2 build/bin/bench_mpi_sender_progress [--bytes 262144] [--sleep-us 5000] [--reps 5]
//                                                    [--shm-eager-bytes 1048576]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/wire/progress_flags.hpp"
#include "common/wire/shared_memory_eager.hpp"

namespace {
using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  namespace wire = gpusearch::wire;
  wire::prefer_eager_shared_memory(wire::shm_eager_bytes_in(argc, argv));
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CLI::App app{"times a large MPI message whose sender makes no progress for a while"};
  int bytes = 256 * 1024, sleep_us = 5000, reps = 5;
  app.add_option("--bytes", bytes, "message size")->capture_default_str()->check(CLI::Range(1, 1 << 30));
  app.add_option("--sleep-us", sleep_us, "the sender's pause after posting")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000000));
  app.add_option("--reps", reps, "messages timed")->capture_default_str()->check(CLI::Range(1, 1000));
  std::size_t eager_bytes = wire::kDefaultShmEagerBytes;  // read before MPI_Init; checked here
  wire::add_shm_eager_flag(app, eager_bytes);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    MPI_Finalize();
    return rc;
  }
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "bench_mpi_sender_progress: run it on 2 ranks (mpirun -np 2), not %d\n", size);
    MPI_Finalize();
    return 2;
  }
  std::vector<char> buffer(std::size_t(bytes), 1);
  std::vector<double> received_us;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    if (rank == 0) {
      MPI_Request request;
      MPI_Isend(buffer.data(), bytes, MPI_CHAR, 1, 0, MPI_COMM_WORLD, &request);
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    } else {
      int found = 0;
      MPI_Status status;
      while (!found) MPI_Iprobe(0, 0, MPI_COMM_WORLD, &found, &status);
      const double probed = us_since(t0);
      MPI_Recv(buffer.data(), bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      received_us.push_back(us_since(t0));
      std::printf("%s\n", nlohmann::json{{"rep", r}, {"bytes", bytes}, {"sender_sleep_us", sleep_us},
                                         {"probed_us", probed}, {"received_us", received_us.back()}}
                              .dump()
                              .c_str());
    }
  }
  if (rank == 1) {
    std::sort(received_us.begin(), received_us.end());
    const double median = received_us[received_us.size() / 2];
    std::printf("%s\n", nlohmann::json{{"bytes", bytes},
                                       {"sender_sleep_us", sleep_us},
                                       {"median_received_us", median},
                                       {"waits_for_sender", median > 0.5 * sleep_us},
                                       {"shared_memory", wire::shared_memory_transport_json()}}
                            .dump()
                            .c_str());
  }
  MPI_Finalize();
  return 0;
}
