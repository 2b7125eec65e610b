// The RPC front end's settings (aggregator/rpc_front_end.hpp), apart so that AggregatorOptions
// needs no Cap'n Proto RPC header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "common/thread_placement.hpp"
#include "common/wire/rpc_poll_mode.hpp"

namespace gpusearch {

struct FrontEndOptions {
  std::string listen;                 // ADDR:PORT (port 0: any free one); empty: no front end
  std::size_t max_requests = 4096;    // admitted and unanswered, over all clients
  std::size_t max_per_client = 512;   // admitted and unanswered, per connection
  std::uint64_t traversal_limit_words = std::uint64_t(1) << 20;  // 8 MiB read per message
  unsigned nesting_limit = 16;
  std::size_t max_text_bytes = 1 << 16;  // query text (or joined terms)
  bool second_stage = false;             // the cluster ranks with a ranker store: requests may name a ranker
  RpcPolling polling;  // how the event loop waits between events (--rpc-poll, --rpc-spin-us)
  // Where the event-loop thread runs (--rpc-thread); a CPU pins the merge thread there too.
  ThreadPlacement loop_thread;
  std::filesystem::path address_file;  // the bound ADDR:PORT is written here once listening
  std::filesystem::path token_file;    // the operator token for shutdown (mode 0600)
};

}  // namespace gpusearch
