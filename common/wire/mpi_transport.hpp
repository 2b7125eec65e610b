// Wire messages over MPI: one flat Cap'n Proto message per MPI message, its root struct named by
// the tag. Sends are nonblocking and own their message until MPI is done with it; receives poll
// (MPI_Iprobe, paced by common/wire/progress_pacer.hpp) so that no rank ever waits forever on a
// peer that is slow or stuck.
#pragma once

#include <mpi.h>

#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/wire/wire.hpp"

namespace gpusearch::wire {

enum Tag : int { kTagQueryBatch = 11, kTagResultBatch = 12, kTagControl = 13 };

// Throws Error naming the MPI call, file and line when it did not return MPI_SUCCESS.
void mpi_check(int rc, const char* call, const char* file, int line);
#define GPUSEARCH_MPI_CHECK(call) ::gpusearch::wire::mpi_check((call), #call, __FILE__, __LINE__)

// A received message. `rejected` is non-empty when it was too large to accept: it has been
// received into a small buffer and dropped.
// Allocates without value-initializing: a receive buffer is written over whole by MPI, so
// zeroing it first was a wasted pass over every message (the aggregator's MPI thread wrote
// each ISN's answer twice: NOTES-cluster.md, issue-16-s28).
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

struct Received {
  int source = -1;
  int tag = -1;
  std::vector<std::uint64_t, UninitializedAllocator<std::uint64_t>> words;  // 8-byte aligned
  std::size_t bytes = 0;
  std::string rejected;
  std::span<const std::byte> data() const {
    return std::as_bytes(std::span<const std::uint64_t>(words.data(), words.size())).first(bytes);
  }
};

// Returns the next message matching (source, tag) if one has arrived, else nullopt.
std::optional<Received> try_receive(MPI_Comm comm, int source = MPI_ANY_SOURCE,
                                    int tag = MPI_ANY_TAG);
// Blocks until a matching message arrives.
Received receive(MPI_Comm comm, int source = MPI_ANY_SOURCE, int tag = MPI_ANY_TAG);

// An encoded message as MPI sees it: the builder's own memory, one contiguous buffer in the
// usual one-segment case, else a derived datatype (MPI_Type_create_hindexed over absolute
// addresses, sent from MPI_BOTTOM) over the segment table and the segments where they lie.
// Either way nothing is copied before MPI. Shared by the sends of a broadcast.
class OutgoingMessage {
 public:
  explicit OutgoingMessage(EncodedMessage message);
  ~OutgoingMessage();
  OutgoingMessage(const OutgoingMessage&) = delete;
  OutgoingMessage& operator=(const OutgoingMessage&) = delete;
  std::size_t bytes() const { return message_.bytes(); }
  void isend(int dest, int tag, MPI_Comm comm, MPI_Request* request) const;
  void send(int dest, int tag, MPI_Comm comm) const;  // blocking

 private:
  EncodedMessage message_;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;  // several pieces only
};

// One nonblocking send (MPI_Isend) of a message that the other sends of a broadcast share; the
// message stays alive until MPI has finished with it.
class PendingSend {
 public:
  PendingSend(std::shared_ptr<const OutgoingMessage> message, int dest, int tag, MPI_Comm comm);
  PendingSend(PendingSend&& o) noexcept;
  PendingSend& operator=(PendingSend&&) = delete;
  PendingSend(const PendingSend&) = delete;
  ~PendingSend();
  bool test();  // true once complete
  int dest() const { return dest_; }

 private:
  std::shared_ptr<const OutgoingMessage> message_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int dest_ = -1;
};

// Sends a whole message and waits for the send to complete (small control messages).
void send_blocking(EncodedMessage message, int dest, int tag, MPI_Comm comm);

}  // namespace gpusearch::wire
