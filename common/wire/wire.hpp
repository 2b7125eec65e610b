// The C++ side of common/wire/messages.capnp: plain structs, and encode/decode to the flat
// Cap'n Proto bytes that travel in one MPI message. Decoding checks every limit (size, alignment,
// traversal, nesting, counts) and throws WireError for malformed or oversized input; it never
// crashes on bad bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/search_result.hpp"

namespace gpusearch::wire {

// Largest message either side accepts (a batch of 4096 queries at k = 1000 with external ids
// stays far below it).
inline constexpr std::size_t kMaxWireBytes = std::size_t(256) << 20;
inline constexpr unsigned kMaxNestingDepth = 16;
inline constexpr std::size_t kMaxBatchQueries = 1 << 16;
inline constexpr std::size_t kMaxQueryTerms = 1024;
inline constexpr unsigned kMaxK = 100000;

class WireError : public Error {
 public:
  using Error::Error;
};

// A flat message: 8-byte words, as Cap'n Proto wants them aligned.
using WireBytes = std::vector<std::uint64_t>;
inline std::span<const std::byte> as_bytes(const WireBytes& w) {
  return std::as_bytes(std::span<const std::uint64_t>(w));
}

struct WireQuery {
  std::string id;
  std::vector<std::string> terms;  // normalized, de-duplicated, in scoring order
  bool operator==(const WireQuery&) const = default;
};

struct QueryBatch {
  std::uint64_t batch_id = 0;
  SearchParams params;
  std::vector<WireQuery> queries;
};

// One query's answer from one shard, with the external ids of its hits (same order).
struct ShardAnswer {
  ShardResult result;
  std::vector<std::string> hit_ids;
  std::vector<std::string> or_hit_ids;
};

struct ResultBatch {
  std::uint64_t batch_id = 0;
  std::uint32_t isn_rank = 0;
  std::uint32_t shard_id = 0;
  std::uint64_t compute_us = 0;
  std::uint64_t idle_us = 0;  // waiting for this batch since the previous one was done
  bool fallback_active = false;
  std::string error;  // non-empty: no answers in this batch
  std::vector<ShardAnswer> answers;
};

struct Control {
  enum class Kind { kHello, kStatsRequest, kStatsReply, kShutdown, kRankerCache };
  Kind kind = Kind::kShutdown;
  std::string payload;  // hello / stats reply: JSON; ranker cache: the op
};

WireBytes encode(const QueryBatch& b);
WireBytes encode(const ResultBatch& b);
WireBytes encode(const Control& c);

// Throw WireError naming what is wrong.
QueryBatch decode_query_batch(std::span<const std::byte> bytes);
ResultBatch decode_result_batch(std::span<const std::byte> bytes);
Control decode_control(std::span<const std::byte> bytes);

}  // namespace gpusearch::wire
