// The C++ side of common/wire/messages.capnp: plain structs, and encode/decode to the flat
// Cap'n Proto bytes that travel in one MPI message. Decoding checks every limit (size, alignment,
// traversal, nesting, counts) and throws WireError for malformed or oversized input; it never
// crashes on bad bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/index_format.hpp"
#include "common/search_result.hpp"
#include "common/wire/segment_pool.hpp"

namespace gpusearch::wire {

// Largest message either side accepts (a batch of 4096 queries at k = 1000 with external ids
// stays far below it).
inline constexpr std::size_t kMaxWireBytes = std::size_t(256) << 20;
inline constexpr unsigned kMaxNestingDepth = 16;
inline constexpr std::size_t kMaxBatchQueries = 1 << 16;
inline constexpr std::size_t kMaxQueryTerms = 1024;
inline constexpr unsigned kMaxK = 100000;
inline constexpr std::size_t kMaxRankerCommandNames = 4096;  // per list of a ranker-cache command

class WireError : public Error {
 public:
  using Error::Error;
};

// A flat message: 8-byte words, as Cap'n Proto wants them aligned.
using WireBytes = std::vector<std::uint64_t>;
inline std::span<const std::byte> as_bytes(const WireBytes& w) {
  return std::as_bytes(std::span<const std::uint64_t>(w));
}

// A query's terms in scoring order: as term IDs of the global vocabulary (term_ids) when every
// shard shares it, else as normalized strings (terms). One of the two is empty.
struct WireQuery {
  std::string id;
  std::vector<std::string> terms;
  std::vector<std::uint32_t> term_ids;
  std::string ranker = {};  // second-stage ranker ("" : none)
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

// Everything of a result batch but its answers: O(1) to read (decode_result_header), so that
// the aggregator's receive path can route a message without decoding its hits.
struct ResultHeader {
  std::uint64_t batch_id = 0;
  std::uint32_t isn_rank = 0;
  std::uint32_t shard_id = 0;
  std::uint64_t compute_us = 0;
  std::uint64_t idle_us = 0;  // the ISN's engine waited this long for this batch
  bool fallback_active = false;
  std::string error;  // non-empty: no answers in this batch
  // On the ISN's steady clock (us): message received, engine started and done, answer encoded.
  // encode_results sets encoded_us itself, after the answers are packed.
  std::uint64_t received_us = 0, start_us = 0, end_us = 0, encoded_us = 0;
  // Encoded by another thread than the engine's (the ISN's --answer-thread mpi): the engine was
  // free for the next batch from end_us on, not only from encoded_us on.
  bool encoded_off_engine = false;
};

struct ResultBatch : ResultHeader {
  std::vector<ShardAnswer> answers;
};

// Evict, then load, rankers before batch `batch_id` (common/wire/messages.capnp).
struct RankerCacheCommand {
  std::uint64_t batch_id = 0;
  std::vector<std::string> evict, load;
  bool operator==(const RankerCacheCommand&) const = default;
};

struct Control {
  enum class Kind {
    kHello,
    kStatsRequest,
    kStatsReply,
    kShutdown,
    kRankerCache,
    kClockPing,  // value: sequence number
    kClockPong,  // value: the ISN's steady clock (us) when the ping arrived
  };
  Kind kind = Kind::kShutdown;
  std::string payload;  // hello / stats reply: JSON
  std::uint64_t value = 0;
  RankerCacheCommand ranker_cache = {};  // kRankerCache
};

// A message built once. Its Cap'n Proto segments stay where the builder put them: pieces() are
// the segment table and the segments, which the transport hands to MPI as one derived datatype
// (common/wire/mpi_transport.hpp), so nothing is flattened or copied before the send.
class EncodedMessage {
 public:
  EncodedMessage();
  EncodedMessage(EncodedMessage&&) noexcept;
  EncodedMessage& operator=(EncodedMessage&&) noexcept;
  ~EncodedMessage();
  std::size_t bytes() const;
  const std::vector<std::span<const std::byte>>& pieces() const;
  WireBytes flat() const;  // one contiguous copy (tests, small blocking sends)

  struct Impl;  // the builder and the segment table (wire.cpp)
  explicit EncodedMessage(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

EncodedMessage encode_message(const QueryBatch& b);
// A batch's query as the encoder reads it: views into the caller's own queries (the
// aggregator's pending ones), so that a batch is encoded at its cut without copying them into a
// QueryBatch first (and freeing that on the batch's critical path). Same message.
struct WireQueryView {
  std::string_view id;
  std::span<const std::string> terms;
  std::span<const std::uint32_t> term_ids;
  std::string_view ranker;
};
EncodedMessage encode_query_batch(std::uint64_t batch_id, const SearchParams& params,
                                  std::span<const WireQueryView> queries);
EncodedMessage encode_message(const ResultBatch& b);
EncodedMessage encode_message(const Control& c);
// The ISN's path: packs the engine's results straight from its ShardResults, with each hit's
// external id (`ids`, in packing order: query by query, its AND/only hits before its OR hits);
// no intermediate ResultBatch. Batches of kParallelPackQueries queries or more are packed on
// oneTBB's threads. Sets the encoded_us timestamp at the end. With a pool, the first segment
// comes from it and goes back when the message is destroyed.
inline constexpr std::size_t kParallelPackQueries = 256;
EncodedMessage encode_results(const ResultHeader& header, std::span<const ShardResult> results,
                              std::span<const std::string_view> ids,
                              std::shared_ptr<SegmentPool> pool = nullptr);
// The same, looking each hit's external id up with `external_id` (on this thread).
EncodedMessage encode_results(const ResultHeader& header, std::span<const ShardResult> results,
                              const std::function<std::string_view(DocId)>& external_id,
                              std::shared_ptr<SegmentPool> pool = nullptr);

inline WireBytes encode(const QueryBatch& b) { return encode_message(b).flat(); }
inline WireBytes encode(const ResultBatch& b) { return encode_message(b).flat(); }
inline WireBytes encode(const Control& c) { return encode_message(c).flat(); }

// Names the global vocabulary a shard carries (term count and the lexicon files' checksums):
// when every ISN reports the aggregator's own, term IDs mean the same on every shard and
// queries travel as IDs.
std::string vocabulary_fingerprint(const ShardManifest& manifest, std::uint32_t num_terms);

// Throw WireError naming what is wrong.
QueryBatch decode_query_batch(std::span<const std::byte> bytes);
ResultBatch decode_result_batch(std::span<const std::byte> bytes);
ResultHeader decode_result_header(std::span<const std::byte> bytes);  // no answers read
Control decode_control(std::span<const std::byte> bytes);

}  // namespace gpusearch::wire
