#include "partition/posting_accumulator.hpp"

#include <cstring>

namespace gpusearch {

namespace {
// Slice sizes by level; the last 8 bytes of each slice hold the address of the next one.
constexpr std::uint32_t kSliceBytes[] = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
constexpr std::uint8_t kMaxLevel = sizeof(kSliceBytes) / sizeof(kSliceBytes[0]) - 1;
constexpr std::uint32_t kLink = 8;
}  // namespace

PostingAccumulator::PostingAccumulator(unsigned partitions) : arenas_(partitions ? partitions : 1) {}

void PostingAccumulator::reserve_terms(std::uint32_t n) {
  if (n > terms_.size()) terms_.resize(n);
}

std::uint64_t PostingAccumulator::Arena::allocate(std::uint32_t bytes) {
  if (used_ + bytes > kPageSize) {
    pages_.push_back(std::make_unique<std::uint8_t[]>(kPageSize));
    used_ = 0;
  }
  const std::uint64_t address = ((pages_.size() - 1) << kPageBits) | used_;
  used_ += bytes;
  return address;
}

void PostingAccumulator::put_byte(Arena& arena, TermState& s, std::uint8_t b) {
  if (s.left == 0) {
    const bool first = s.head == 0;
    const std::uint8_t level = first ? 0 : std::min<std::uint8_t>(s.level + 1, kMaxLevel);
    const std::uint64_t slice = arena.allocate(kSliceBytes[level]);
    if (first) {
      s.head = slice + 1;  // +1 so that 0 means "no slice yet"
    } else {
      std::memcpy(arena.at(s.pos), &slice, kLink);  // link the full slice to the new one
    }
    s.level = level;
    s.pos = slice;
    s.left = std::uint16_t(kSliceBytes[level] - kLink);
  }
  *arena.at(s.pos++) = b;
  --s.left;
}

void PostingAccumulator::append(unsigned partition, std::uint32_t t, std::uint32_t doc,
                                std::uint32_t tf) {
  Arena& arena = arenas_[partition];
  TermState& s = terms_[t];
  std::uint32_t gap = s.df == 0 ? doc : doc - s.last_doc;
  while (gap >= 0x80) {
    put_byte(arena, s, std::uint8_t(gap | 0x80));
    gap >>= 7;
  }
  put_byte(arena, s, std::uint8_t(gap));
  while (tf >= 0x80) {
    put_byte(arena, s, std::uint8_t(tf | 0x80));
    tf >>= 7;
  }
  put_byte(arena, s, std::uint8_t(tf));
  s.last_doc = doc;
  ++s.df;
}

void PostingAccumulator::read(std::uint32_t t,
                              std::vector<std::pair<std::uint32_t, std::uint32_t>>& out) const {
  out.clear();
  const TermState& s = terms_[t];
  if (s.df == 0) return;
  out.reserve(s.df);
  const Arena& arena = arenas_[t % arenas_.size()];
  std::uint64_t pos = s.head - 1;
  std::uint8_t level = 0;
  std::uint32_t left = kSliceBytes[0] - kLink;
  auto next_byte = [&]() -> std::uint8_t {
    if (left == 0) {
      std::uint64_t next;
      std::memcpy(&next, arena.at(pos), kLink);
      level = std::min<std::uint8_t>(level + 1, kMaxLevel);
      pos = next;
      left = kSliceBytes[level] - kLink;
    }
    --left;
    return *arena.at(pos++);
  };
  auto next_varint = [&]() {
    std::uint32_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      const std::uint8_t b = next_byte();
      v |= std::uint32_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  std::uint32_t doc = 0;
  for (std::uint32_t i = 0; i < s.df; ++i) {
    doc = i == 0 ? next_varint() : doc + next_varint();
    out.emplace_back(doc, next_varint());
  }
}

std::uint64_t PostingAccumulator::bytes_allocated() const {
  std::uint64_t b = std::uint64_t(terms_.size()) * sizeof(TermState);
  for (const auto& a : arenas_) b += a.bytes();
  return b;
}

}  // namespace gpusearch
