// Wire messages over MPI: one flat Cap'n Proto message per MPI message, its root struct named by
// the tag. Sends are nonblocking and own their buffer until MPI is done with it; receives poll
// (MPI_Iprobe) so that no rank ever waits forever on a peer that is slow or stuck.
#pragma once

#include <mpi.h>

#include <memory>
#include <optional>
#include <string>

#include "common/wire/wire.hpp"

namespace gpusearch::wire {

enum Tag : int { kTagQueryBatch = 11, kTagResultBatch = 12, kTagControl = 13 };

// Throws Error naming the MPI call, file and line when it did not return MPI_SUCCESS.
void mpi_check(int rc, const char* call, const char* file, int line);
#define GPUSEARCH_MPI_CHECK(call) ::gpusearch::wire::mpi_check((call), #call, __FILE__, __LINE__)

// A received message. `rejected` is non-empty when it was too large to accept: it has been
// received into a small buffer and dropped.
struct Received {
  int source = -1;
  int tag = -1;
  WireBytes words;
  std::size_t bytes = 0;
  std::string rejected;
  std::span<const std::byte> data() const { return as_bytes(words).first(bytes); }
};

// Returns the next message matching (source, tag) if one has arrived, else nullopt.
std::optional<Received> try_receive(MPI_Comm comm, int source = MPI_ANY_SOURCE,
                                    int tag = MPI_ANY_TAG);
// Blocks until a matching message arrives.
Received receive(MPI_Comm comm, int source = MPI_ANY_SOURCE, int tag = MPI_ANY_TAG);

// One nonblocking send (MPI_Isend) that shares its buffer with the other sends of a broadcast
// and keeps it alive until MPI has finished with it.
class PendingSend {
 public:
  PendingSend(std::shared_ptr<const WireBytes> buffer, std::size_t bytes, int dest, int tag,
              MPI_Comm comm);
  PendingSend(PendingSend&& o) noexcept;
  PendingSend& operator=(PendingSend&&) = delete;
  PendingSend(const PendingSend&) = delete;
  ~PendingSend();
  bool test();  // true once complete
  int dest() const { return dest_; }

 private:
  std::shared_ptr<const WireBytes> buffer_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int dest_ = -1;
};

// Sends a whole message and waits for the send to complete (small control messages).
void send_blocking(const WireBytes& msg, int dest, int tag, MPI_Comm comm);

}  // namespace gpusearch::wire
