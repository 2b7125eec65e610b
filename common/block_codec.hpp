// Block codec for posting lists: 128 values per block, bit-packed with one bit width b per block
// in the 4-lane "vertical" layout of SIMD-BP128 (value i sits in lane i % 4, slot i / 4), so
// that a CPU unpacks four values per SSE instruction and a GPU thread i finds its value at a
// computed word. Values that do not fit in b bits can be stored as PForDelta exceptions (paper
// 001, section 4): their positions and high bits follow the packed words, compressed. The
// PForDelta codec picks b per block to minimize the block's size; the bit-packing codec uses no
// exceptions (b = bits of the largest value).
//
// Layout of one block of n values (1 <= n <= 128), in 32-bit words:
//   header        b | exceptions << 8 | exception_bits << 16 | n << 24 (n = 128 stored as 0)
//   packed        full blocks (n = 128): 4 * b words, vertical: lane word j of lane l at 4 * j + l
//                 partial blocks (the last of a list): ceil(n * b / 32) words, value i at bit i * b
//                 (no padding to 128 values, which would cost short lists dearly)
//   positions     ceil(exceptions / 4) words, one byte per exception
//   high bits     ceil(exceptions * exception_bits / 32) words, value j at bit j * exception_bits
//
// A posting block is a docID block (gaps minus one, the first relative to the previous block's
// last docID plus one) followed by a frequency block (tf - 1). The layout's arithmetic is defined
// once, for host and device, in common/block_layout.hpp; the GPU decoders (gpu/) read blocks
// through it; tests/ checks every decoder against decode_block_scalar.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/block_layout.hpp"  // BlockHeader, read_header, words_for: shared with gpu/
#include "common/types.hpp"

namespace gpusearch::codec {

enum class Codec : std::uint8_t { kBitPacking = 0, kPForDelta = 1 };

std::string_view to_string(Codec c);
Codec parse_codec(std::string_view s);  // "bp128" | "pfor128"; throws InputError

// Words the block starting at `in` occupies, read from its header.
inline std::size_t block_words(const std::uint32_t* in) { return words_for(read_header(in[0])); }

// Appends one block encoding values[0..n), 1 <= n <= 128.
void encode_block(const std::uint32_t* values, unsigned n, Codec codec,
                  std::vector<std::uint32_t>& out);

// Decodes the block at `in` into out[0..n); out[n..128) are set to 0 (so that a block-wide
// prefix sum stays defined). Returns in + block_words(in).
const std::uint32_t* decode_block(const std::uint32_t* in, std::uint32_t* out);
// The same, one value at a time: the obviously correct version every fast decoder is tested
// against.
const std::uint32_t* decode_block_scalar(const std::uint32_t* in, std::uint32_t* out);

// Checks that a block's header is well formed and that the block fits in `available` words.
bool block_is_well_formed(const std::uint32_t* in, std::size_t available);

// Posting blocks: docIDs and frequencies of up to 128 postings.
void encode_posting_block(const DocId* docs, const std::uint32_t* freqs, unsigned n,
                          DocId first_docid_floor, Codec codec, std::vector<std::uint32_t>& out);
// Decodes the docIDs of the posting block at `in`: out[i] = floor + sum_{j<=i}(gap_j + 1) - 1
// for i below the block's count (out must hold 128 values; past the count it is unspecified).
// Returns the start of the block's frequency part.
const std::uint32_t* decode_docids(const std::uint32_t* in, DocId first_docid_floor, DocId* out);
// Decodes the frequencies of a posting block, given the start of its frequency part (valid for
// i below the block's count).
const std::uint32_t* decode_freqs(const std::uint32_t* freq_part, std::uint32_t* out);
// Start of the frequency part of the posting block at `in`, without decoding.
inline const std::uint32_t* skip_docids(const std::uint32_t* in) { return in + block_words(in); }

}  // namespace gpusearch::codec
