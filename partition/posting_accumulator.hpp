// In-memory inversion: each term's postings (input-order docID, tf) appended as variable-byte
// gaps to a chain of growing slices in an arena (as Lucene's ByteBlockPool does), so memory
// stays close to the compressed size of the index. Terms are split into partitions (term % P),
// each with its own arena, so that P threads append without locks.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace gpusearch {

class PostingAccumulator {
 public:
  explicit PostingAccumulator(unsigned partitions);
  unsigned partitions() const { return static_cast<unsigned>(arenas_.size()); }
  // Makes room for terms [0, n). Not thread-safe: call between rounds of appends.
  void reserve_terms(std::uint32_t n);
  std::uint32_t num_terms() const { return static_cast<std::uint32_t>(terms_.size()); }
  // Appends one posting of term t (t % partitions() == partition); docs must increase per term.
  // Different partitions may append concurrently.
  void append(unsigned partition, std::uint32_t t, std::uint32_t doc, std::uint32_t tf);
  std::uint32_t df(std::uint32_t t) const { return terms_[t].df; }
  // The postings of t, in append order.
  void read(std::uint32_t t, std::vector<std::pair<std::uint32_t, std::uint32_t>>& out) const;
  std::uint64_t bytes_allocated() const;

 private:
  struct TermState {
    std::uint64_t head = 0;  // address of the first slice
    std::uint64_t pos = 0;   // next byte to write
    std::uint32_t last_doc = 0;
    std::uint32_t df = 0;
    std::uint16_t left = 0;  // data bytes left in the current slice
    std::uint8_t level = 0;
  };
  class Arena {
   public:
    std::uint64_t allocate(std::uint32_t bytes);
    std::uint8_t* at(std::uint64_t address) {
      return pages_[address >> kPageBits].get() + (address & (kPageSize - 1));
    }
    const std::uint8_t* at(std::uint64_t address) const {
      return pages_[address >> kPageBits].get() + (address & (kPageSize - 1));
    }
    std::uint64_t bytes() const { return std::uint64_t(pages_.size()) * kPageSize; }

   private:
    static constexpr unsigned kPageBits = 22;
    static constexpr std::uint64_t kPageSize = 1ull << kPageBits;
    std::vector<std::unique_ptr<std::uint8_t[]>> pages_;
    std::uint64_t used_ = kPageSize;  // of the last page
  };
  void put_byte(Arena& arena, TermState& s, std::uint8_t b);

  std::vector<TermState> terms_;
  std::vector<Arena> arenas_;
};

}  // namespace gpusearch
