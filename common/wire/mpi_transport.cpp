#include "common/wire/mpi_transport.hpp"

#include <fmt/format.h>

namespace gpusearch::wire {

void mpi_check(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(fmt::format("{} failed at {}:{}: {}", call, file, line, std::string(text, len)));
}

namespace {

Received receive_probed(MPI_Comm comm, const MPI_Status& status) {
  Received r;
  r.source = status.MPI_SOURCE;
  r.tag = status.MPI_TAG;
  int count = 0;
  GPUSEARCH_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
  if (count < 0 || std::size_t(count) > kMaxWireBytes) {
    // Drain it into one word: MPI reports truncation (the communicator returns errors), and the
    // message is gone from the queue either way.
    std::uint64_t sink = 0;
    MPI_Recv(&sink, sizeof sink, MPI_BYTE, r.source, r.tag, comm, MPI_STATUS_IGNORE);
    r.rejected = fmt::format("message of {} bytes from rank {} exceeds the limit of {} bytes",
                             count, r.source, kMaxWireBytes);
    return r;
  }
  r.bytes = std::size_t(count);
  r.words.resize((r.bytes + 7) / 8);
  GPUSEARCH_MPI_CHECK(
      MPI_Recv(r.words.data(), count, MPI_BYTE, r.source, r.tag, comm, MPI_STATUS_IGNORE));
  return r;
}

}  // namespace

std::optional<Received> try_receive(MPI_Comm comm, int source, int tag) {
  int flag = 0;
  MPI_Status status;
  GPUSEARCH_MPI_CHECK(MPI_Iprobe(source, tag, comm, &flag, &status));
  if (!flag) return std::nullopt;
  return receive_probed(comm, status);
}

Received receive(MPI_Comm comm, int source, int tag) {
  MPI_Status status;
  GPUSEARCH_MPI_CHECK(MPI_Probe(source, tag, comm, &status));
  return receive_probed(comm, status);
}

OutgoingMessage::OutgoingMessage(EncodedMessage message) : message_(std::move(message)) {
  const auto& pieces = message_.pieces();
  if (pieces.size() <= 1) return;
  std::vector<int> lengths;
  std::vector<MPI_Aint> addresses;
  for (const auto& p : pieces) {
    MPI_Aint a = 0;
    GPUSEARCH_MPI_CHECK(MPI_Get_address(p.data(), &a));
    lengths.push_back(int(p.size()));
    addresses.push_back(a);
  }
  GPUSEARCH_MPI_CHECK(MPI_Type_create_hindexed(int(pieces.size()), lengths.data(),
                                               addresses.data(), MPI_BYTE, &type_));
  GPUSEARCH_MPI_CHECK(MPI_Type_commit(&type_));
}

OutgoingMessage::~OutgoingMessage() {
  if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
}

void OutgoingMessage::isend(int dest, int tag, MPI_Comm comm, MPI_Request* request) const {
  if (type_ == MPI_DATATYPE_NULL) {
    const auto& pieces = message_.pieces();
    GPUSEARCH_MPI_CHECK(MPI_Isend(pieces.empty() ? nullptr : pieces[0].data(),
                                  int(message_.bytes()), MPI_BYTE, dest, tag, comm, request));
  } else {
    GPUSEARCH_MPI_CHECK(MPI_Isend(MPI_BOTTOM, 1, type_, dest, tag, comm, request));
  }
}

void OutgoingMessage::send(int dest, int tag, MPI_Comm comm) const {
  MPI_Request request = MPI_REQUEST_NULL;
  isend(dest, tag, comm, &request);
  GPUSEARCH_MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
}

PendingSend::PendingSend(std::shared_ptr<const OutgoingMessage> message, int dest, int tag,
                         MPI_Comm comm)
    : message_(std::move(message)), dest_(dest) {
  message_->isend(dest, tag, comm, &request_);
}

PendingSend::PendingSend(PendingSend&& o) noexcept
    : message_(std::move(o.message_)), request_(o.request_), dest_(o.dest_) {
  o.request_ = MPI_REQUEST_NULL;
}

PendingSend::~PendingSend() {
  if (request_ == MPI_REQUEST_NULL) return;
  int done = 0;
  MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
  if (done) return;
  // Still in flight (a peer that never received it; we are shutting down): let MPI finish or
  // drop it on its own, and keep the message alive for it rather than free memory MPI may read.
  MPI_Request_free(&request_);
  new std::shared_ptr<const OutgoingMessage>(std::move(message_));  // deliberately leaked
}

bool PendingSend::test() {
  if (request_ == MPI_REQUEST_NULL) return true;
  int done = 0;
  GPUSEARCH_MPI_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

void send_blocking(EncodedMessage message, int dest, int tag, MPI_Comm comm) {
  OutgoingMessage(std::move(message)).send(dest, tag, comm);
}

}  // namespace gpusearch::wire
