// The forward index of a shard (issue 12; paper 004, 3.3): each document's token stream, the
// term IDs of the global vocabulary in document order, for proximity features (minimal window,
// first occurrence, pairwise distances) that need positions the posting lists do not keep.
//
// On disk (optional part of a shard, written by `gpusearch index --forward-index`):
//   forward.offsets  u64[n+1]  byte offsets into forward.data, by shard-local docID
//   forward.data     bytes     document d's term IDs as vbyte (LEB128) integers
// Term IDs in a stream are in document order, not sorted, so the block codec's d-gaps do not
// apply; vbyte stores a token in one to three bytes for vocabularies up to 2^21 terms, decodes
// without tables, and lets a reader decode one document alone. shard.json records the encoding,
// its version and the token count beside the files' sizes and checksums.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/mapped_file.hpp"
#include "common/shard_index.hpp"
#include "common/types.hpp"

namespace gpusearch {

namespace vbyte {
// Appends v: 7 bits a byte, low bits first, high bit set on every byte but the last.
inline void append(std::uint32_t v, std::vector<std::uint8_t>& out) {
  while (v >= 0x80) {
    out.push_back(std::uint8_t(v | 0x80));
    v >>= 7;
  }
  out.push_back(std::uint8_t(v));
}
// Decodes one integer from [p, end); returns false (p unspecified) on a truncated or over-long
// (more than 5 bytes, or above 2^32 - 1) encoding.
inline bool next(const std::uint8_t*& p, const std::uint8_t* end, std::uint32_t& v) {
  std::uint64_t x = 0;
  for (unsigned shift = 0; shift < 35 && p < end; shift += 7) {
    const std::uint8_t b = *p++;
    x |= std::uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      if (x > 0xffffffffu) return false;
      v = std::uint32_t(x);
      return true;
    }
  }
  return false;
}
}  // namespace vbyte

namespace forward_files {
inline constexpr const char* kOffsets = "forward.offsets";  // u64[n+1], bytes in data
inline constexpr const char* kData = "forward.data";        // vbyte term IDs, doc after doc
}  // namespace forward_files
inline constexpr int kForwardIndexFormatVersion = 1;
inline constexpr const char* kForwardIndexEncoding = "vbyte-term-ids";
inline constexpr const char* kForwardIndexSection = "forward_index";  // key in shard.json

// The "forward_index" section of shard.json.
struct ForwardIndexRecord {
  int format_version = kForwardIndexFormatVersion;
  std::string encoding = kForwardIndexEncoding;
  std::uint64_t num_tokens = 0;  // all documents of the shard
  FileRecord offsets, data;
};
nlohmann::json to_json(const ForwardIndexRecord& r);
// The section of the shard manifest `file`, or nullopt when the shard has none. Throws
// IndexFormatError naming the file when the section is malformed.
std::optional<ForwardIndexRecord> read_forward_index_record(const std::filesystem::path& file);

class ForwardIndex {
 public:
  // Maps and validates the forward index of `shard` (which must outlive it). Throws
  // IndexFormatError naming shard.json when the shard was built without --forward-index or
  // records an unknown encoding or version, and naming the file when one is missing, of the
  // wrong size, corrupt (checksum, with verify_checksums) or inconsistent: offsets out of order,
  // or (with verify_checksums) a stream that does not decode to the document's length in term
  // IDs of the vocabulary.
  static ForwardIndex open(const ShardIndex& shard, const OpenOptions& options = {});

  std::uint32_t num_docs() const { return std::uint32_t(offsets_.size() - 1); }
  std::uint64_t num_tokens() const { return num_tokens_; }
  std::uint64_t bytes(DocId d) const { return offsets_[d + 1] - offsets_[d]; }
  // Document d's stream as stored (vbyte term IDs), for readers that decode it themselves (the
  // ranker's feature extraction). Offsets were checked at open: it lies inside the mapping.
  std::span<const std::uint8_t> stream(DocId d) const {
    return data_.subspan(offsets_[d], offsets_[d + 1] - offsets_[d]);
  }
  std::uint64_t stream_offset(DocId d) const { return offsets_[d]; }
  std::span<const std::uint8_t> data() const { return data_; }  // every stream, back to back

  // Document d's token stream into `out` (replaced). Throws IndexFormatError naming
  // forward.data if the stream does not decode to doc_lengths()[d] term IDs of the vocabulary
  // (a corruption that an open without checksums let through).
  void tokens(DocId d, std::vector<TermId>& out) const;
  std::vector<TermId> tokens(DocId d) const {
    std::vector<TermId> out;
    tokens(d, out);
    return out;
  }

 private:
  ForwardIndex() = default;
  const ShardIndex* shard_ = nullptr;
  MappedFile offsets_file_, data_file_;
  std::span<const std::uint64_t> offsets_;
  std::span<const std::uint8_t> data_;
  std::uint64_t num_tokens_ = 0;
};

}  // namespace gpusearch
