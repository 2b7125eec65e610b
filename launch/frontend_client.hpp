// The clients of the aggregator's RPC front end (common/wire/frontend.capnp): `gpusearch query`
// (one search, stats, or an operator's shutdown) and `gpusearch load` (an open-loop load
// generator: arrivals at a fixed rate or Poisson, each sent when due whatever the answers do, so
// that a slow server shows as latency, not as a lower offered rate).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace gpusearch {

struct QueryCommand {
  std::string connect;  // ADDR:PORT
  std::string text;
  std::string id;       // empty: the server names it
  std::string mode, scoring;  // empty: the cluster's
  unsigned k = 0;             // 0: the cluster's
  unsigned deadline_ms = 0;
  std::string ranker;         // empty: the cluster's
  bool stats = false;
  bool shutdown = false;
  std::filesystem::path token_file;
  std::string rpc_poll = "block";  // block, adaptive or spin (common/wire/rpc_poll_mode.hpp)
  unsigned rpc_spin_us = 5000;
};
// Prints the ranked hits (or the stats JSON); returns the exit code.
int run_query_command(const QueryCommand& c);

struct LoadCommand {
  std::string connect;
  std::filesystem::path queries;
  double qps = 100;
  bool poisson = false;
  double duration_s = 10;
  std::string mode, scoring;
  unsigned k = 0;
  unsigned deadline_ms = 0;
  std::string ranker;  // every request without its own (the query file's third column)
  std::uint64_t seed = 1;
  double drain_s = 30;  // after the last arrival, wait this long for answers
  std::size_t limit = 0;  // at most this many requests (0: as many as the duration gives)
  std::filesystem::path run_path, metrics_path;
  std::string tag = "gpusearch-load";
  std::string id_prefix;  // put before every query id (runs of one soak stay distinct)
  // How the client's event loop waits (for its next send, for answers): a client that sleeps
  // adds its own wake-up to added_ms. block, adaptive or spin (common/wire/rpc_poll_mode.hpp).
  std::string rpc_poll = "block";
  unsigned rpc_spin_us = 5000;
  std::string rpc_thread;  // where the client runs (common/thread_placement.hpp); empty: anywhere
};
// Runs the load, writes the run (answers in send order; a query id of the file's n-th pass
// through it gets the suffix ~n) and the metrics JSON; prints a summary; returns the exit code.
int run_load_command(const LoadCommand& c);

}  // namespace gpusearch
