// The aggregator's book of its ISNs (ranks 1..N of the job): their hellos at start, the offset of
// each ISN's clock from ours, what each answered, missed and reported, and the shutdown that
// collects their stats. Every call here is made by the MPI thread, except the counters the merge
// thread adds to (atomics, or written by it alone).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aggregator/batcher.hpp"
#include "common/wire/progress_pacer.hpp"

namespace gpusearch {

struct IsnBook {
  nlohmann::json hello, stats;
  // Written by the merge thread alone.
  std::uint64_t batches_answered = 0, batches_missed = 0;
  std::uint64_t compute_us = 0, idle_us = 0;
  bool fallback_seen = false;
  // Written by both threads.
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> late_results{0};
  // The MPI thread's: deadlines missed in a row; declared dead after --isn-dead-after of them
  // (no batch goes to it any more, its shard's answers are partial at once).
  std::uint64_t consecutive_misses = 0;
  std::atomic<bool> dead{false};
  std::uint64_t dead_after_batch = 0;  // the batch whose miss declared it dead
  std::int64_t clock_offset_us = 0;  // ISN steady clock minus the aggregator's
  double clock_rtt_us = -1;          // of the sample the offset came from; < 0: not measured
};

class IsnRoster {
 public:
  IsnRoster(MPI_Comm world, std::size_t num_isns, wire::ProgressPacer& pacer, std::string me);
  std::size_t size() const { return books_.size(); }
  IsnBook& operator[](std::size_t i) { return books_[i]; }
  const IsnBook& operator[](std::size_t i) const { return books_[i]; }

  // Waits up to `timeout_ms` for every ISN's hello (its shard, range and memory, or why it could
  // not open it). Adds what went wrong to `setup_error` (empty: all started cleanly); a shard-count
  // mismatch that every ISN reports is named once.
  void await_hellos(std::uint64_t timeout_ms, std::string& setup_error);
  // One line per ISN on standard error: host, shard, documents, memory, engine, GPU.
  void print_hellos(std::ostream& err) const;
  // Each ISN's steady clock against ours, from ping-pongs (NTP's estimate: the pong carries the
  // ISN's time at arrival, taken as the middle of the round trip; the sample of least round trip
  // bounds the error by half of it). Equal clocks on one host give ~0.
  void sync_clocks();
  // An ISN's clock reading (us) on the aggregator's clock.
  AggregatorClock::time_point isn_time(std::size_t i, std::uint64_t isn_us) const {
    return AggregatorClock::time_point(
        std::chrono::microseconds(std::int64_t(isn_us) - books_[i].clock_offset_us));
  }
  // Whether every ISN's hello names this vocabulary (term IDs then travel on the wire).
  bool all_share_vocabulary(const std::string& fingerprint) const;
  // Every ISN that said hello without an error gets a shutdown and returns its stats within
  // `grace_ms`; returns the ranks that did not.
  std::vector<int> shut_down(std::uint64_t grace_ms);

  // Per ISN: hello, stats, batches answered and missed, compute and idle time, fallback, stuck.
  nlohmann::json to_json(double run_seconds, const std::vector<int>& stuck) const;
  // Per ISN: the clock offset and the round trip it was measured with.
  nlohmann::json clocks_json() const;
  std::uint64_t late_results() const;
  std::size_t live() const;          // ISNs not declared dead
  std::vector<int> dead_ranks() const;

 private:
  MPI_Comm world_;
  wire::ProgressPacer& pacer_;
  std::string me_;
  std::vector<IsnBook> books_;
};

}  // namespace gpusearch
