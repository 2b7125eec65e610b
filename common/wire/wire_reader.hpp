// Internal to common/wire/: the checked Cap'n Proto reader every decode goes through, and the
// result batch's header reader, shared by wire.cpp and result_view.cpp. Not for other folders.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>

#include "common/wire/messages.capnp.h"
#include "common/wire/wire.hpp"

namespace gpusearch::wire::detail {

// Runs `read` on a reader over `bytes` with the wire's limits; every Cap'n Proto failure (short
// or garbage segments, pointers out of bounds, traversal or nesting limit) becomes WireError.
template <typename Fn>
auto with_reader(std::span<const std::byte> bytes, const char* what, Fn&& read) {
  if (bytes.size() > kMaxWireBytes)
    throw WireError(fmt::format("{}: message of {} bytes exceeds the limit of {}", what,
                                bytes.size(), kMaxWireBytes));
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0)
    throw WireError(
        fmt::format("{}: message of {} bytes is not a whole number of words", what, bytes.size()));
  // MPI buffers are ours and aligned; a caller's span may not be: copy then.
  // (Words as uint64_t: capnp::word is not copyable, which libc++-strict vector code rejects.)
  std::vector<std::uint64_t> aligned;
  const capnp::word* data = reinterpret_cast<const capnp::word*>(bytes.data());
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(capnp::word) != 0) {
    aligned.resize(bytes.size() / sizeof(capnp::word));
    std::memcpy(aligned.data(), bytes.data(), bytes.size());
    data = reinterpret_cast<const capnp::word*>(aligned.data());
  }
  capnp::ReaderOptions options;
  // Each word may be visited at most twice: defeats amplification through shared pointers.
  options.traversalLimitInWords = 2 * bytes.size() / sizeof(capnp::word) + 64;
  options.nestingLimit = kMaxNestingDepth;
  try {
    capnp::FlatArrayMessageReader reader(
        kj::ArrayPtr<const capnp::word>(data, bytes.size() / sizeof(capnp::word)), options);
    return read(reader);
  } catch (const kj::Exception& e) {
    throw WireError(fmt::format("{}: malformed message: {}", what, e.getDescription().cStr()));
  }
}

ResultHeader get_header(schema::ResultBatch::Reader root);

}  // namespace gpusearch::wire::detail
