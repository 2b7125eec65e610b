// Whole answers over shared memory without the sender's help (issue 16, session 46).
//
// Open MPI's shared-memory transport (btl vader) sends a message above its eager limit (4 KiB by
// default) by rendezvous. With its single-copy mechanism (CMA) the receiver then pulls the
// message itself. Without it (btl_vader_single_copy_mechanism none, as where a container denies
// CMA: the H200 host's image sets it so) the message moves in 32 KiB fragments, and each one
// waits until the *sender* calls into MPI again. An ISN's answer at batch 1,024 is 250-400 KiB;
// on a node whose cores the engines take, its MPI thread is often off a core, and four ISNs'
// answers took ~1 ms from encoded to received, one ISN's 0.13 ms (NOTES-cluster.md, session 45;
// bench_mpi_sender_progress measured 5.1 ms for a 256 KiB message whose sender slept 5 ms).
//
// Raising the eager limit above the messages' sizes makes MPI_Isend copy a message whole into
// shared memory at once: it is complete at the receiver's next probe, whatever the sender does.
// The fragments come from each sender's shared-memory segment, so the segment grows with the
// limit; it is a sparse file, and only fragments in use take memory. Where /dev/shm is small (a
// container's 64 MiB), the segment and then the limit are cut to fit the rank's share of it.
//
// Both programs take --shm-eager-bytes (default 1 MiB, 0: Open MPI's own settings). The value
// has to be in the environment before MPI_Init reads its parameters, and the programs parse their
// flags after MPI_Init (so that a flag error is reported once): shm_eager_bytes_in() reads it
// from argv first. A parameter the user set (in the environment, or with mpirun --mca, which
// arrives as the environment) is left alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpusearch::wire {

inline constexpr std::size_t kDefaultShmEagerBytes = std::size_t{1} << 20;
// Open MPI's own eager limit: a smaller one is refused.
inline constexpr std::size_t kMinShmEagerBytes = 4096;
inline constexpr std::size_t kMaxShmEagerBytes = std::size_t{16} << 20;
inline constexpr const char* kShmEagerFlag = "--shm-eager-bytes";
inline constexpr const char* kShmEagerHelp =
    "Open MPI's shared-memory eager limit in bytes (btl vader): messages up to it are copied "
    "whole into shared memory at send, so an answer reaches the aggregator without its ISN's "
    "further MPI progress, which matters where the single-copy transport (CMA) is off. 0: Open "
    "MPI's own settings. Parameters set with mpirun --mca or OMPI_MCA_* win";

// What is wrong with `text` as --shm-eager-bytes' value ("" if nothing): not a whole number of
// bytes, or not 0 and outside [kMinShmEagerBytes, kMaxShmEagerBytes]. The one check of the flag,
// for the read before MPI_Init and for CLI11's after it.
std::string shm_eager_bytes_problem(std::string_view text);

// The value of --shm-eager-bytes in argv ("--shm-eager-bytes N" or "--shm-eager-bytes=N"), or
// kDefaultShmEagerBytes when it is absent or not a number in range (CLI11 reports that after
// MPI_Init).
std::size_t shm_eager_bytes_in(int argc, char** argv);

// The Open MPI parameters (OMPI_MCA_* environment variables) for an eager limit of `eager_bytes`
// in a segment of at most `shm_budget_bytes`: {name, value} pairs. The segment holds 64 fragments
// where the budget allows; a smaller budget takes the segment down to it, and the limit to a
// kMinFragmentsPerSegment-th of it. None for 0, or for a budget under Open MPI's own 4 MiB
// segment.
inline constexpr std::uint64_t kMinFragmentsPerSegment = 24;
std::vector<std::pair<std::string, std::string>> shm_eager_parameters(
    std::size_t eager_bytes, std::uint64_t shm_budget_bytes = UINT64_MAX);

// This rank's share of the shared-memory backing directory's free space (/dev/shm, or
// OMPI_MCA_btl_vader_backing_directory): half of it over the node's ranks
// (OMPI_COMM_WORLD_LOCAL_SIZE, which mpirun sets). UINT64_MAX where it cannot be read.
std::uint64_t shared_memory_budget_bytes();

// Sets shm_eager_parameters(eager_bytes) in the environment, before MPI_Init, each unless the
// user set it or its Open MPI 5 twin (btl_sm_*). Returns the names it set (also reported by
// shared_memory_transport_json()).
std::vector<std::string> prefer_eager_shared_memory(std::size_t eager_bytes);

// After MPI_Init: the shared-memory transport's settings in effect, read back from MPI's control
// variables (MPI_T): eager_limit, max_send_size, segment_size, single_copy_mechanism, and the
// parameters this process set. A variable this MPI lacks is left out.
nlohmann::json shared_memory_transport_json();

}  // namespace gpusearch::wire
