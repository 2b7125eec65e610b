#include "common/block_codec.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gpusearch::codec {

std::string_view to_string(Codec c) {
  return c == Codec::kBitPacking ? "bp128" : "pfor128";
}

Codec parse_codec(std::string_view s) {
  if (s == "bp128") return Codec::kBitPacking;
  if (s == "pfor128") return Codec::kPForDelta;
  throw InputError("--codec", 0, "unknown codec '" + std::string(s) + "' (bp128, pfor128)");
}

namespace {

inline unsigned bits_of(std::uint32_t v) {
  return v == 0 ? 0u : 32u - std::countl_zero(v);
}

// Packs 128 values (b bits each) in the vertical 4-lane layout.
void pack_vertical(const std::uint32_t* v, unsigned b, std::uint32_t* packed) {
  std::fill(packed, packed + 4 * b, 0u);
  if (b == 0) return;
  const std::uint32_t mask = low_mask(b);
  for (unsigned i = 0; i < kBlockSize; ++i) {
    const unsigned lane = i & 3u, slot = i >> 2;
    const unsigned bitpos = slot * b, w = bitpos >> 5, off = bitpos & 31u;
    const std::uint32_t x = v[i] & mask;
    packed[4 * w + lane] |= x << off;
    if (off + b > 32) packed[4 * (w + 1) + lane] |= x >> (32 - off);
  }
}

// Packs n < 128 values (b bits each) one after the other: value i at bit i * b.
void pack_horizontal(const std::uint32_t* v, unsigned n, unsigned b, std::uint32_t* packed) {
  const std::uint32_t mask = low_mask(b);
  for (unsigned i = 0; i < n && b > 0; ++i) {
    const unsigned bitpos = i * b, w = bitpos >> 5, off = bitpos & 31u;
    const std::uint32_t x = v[i] & mask;
    packed[w] |= x << off;
    if (off + b > 32) packed[w + 1] |= x >> (32 - off);
  }
}

}  // namespace

void encode_block(const std::uint32_t* values, unsigned n, Codec codec,
                  std::vector<std::uint32_t>& out) {
  std::array<std::uint32_t, kBlockSize> v{};
  std::copy(values, values + n, v.begin());
  std::array<unsigned, 33> count_by_bits{};
  unsigned max_bits = 0;
  for (unsigned i = 0; i < n; ++i) {
    const std::uint32_t x = v[i];
    const unsigned nb = bits_of(x);
    ++count_by_bits[nb];
    max_bits = std::max(max_bits, nb);
  }
  unsigned best_b = max_bits;
  if (codec == Codec::kPForDelta) {
    // Cost of each b: the packed words plus the exceptions' positions and high bits.
    std::size_t best_words = words_for({max_bits, 0, 0, n});
    unsigned above = 0;  // values needing more than b bits
    for (int b = int(max_bits) - 1; b >= 0; --b) {
      above += count_by_bits[b + 1];
      const std::size_t w = words_for({unsigned(b), above, max_bits - unsigned(b), n});
      if (w < best_words) best_words = w, best_b = unsigned(b);
    }
  }
  std::array<std::uint8_t, kBlockSize> positions{};
  std::array<std::uint32_t, kBlockSize> highs{};
  unsigned exceptions = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (bits_of(v[i]) > best_b) {
      positions[exceptions] = std::uint8_t(i);
      highs[exceptions++] = v[i] >> best_b;
    }
  }
  const unsigned exception_bits = exceptions ? max_bits - best_b : 0;
  const BlockHeader h{best_b, exceptions, exception_bits, n};
  const std::size_t start = out.size();
  out.resize(start + words_for(h), 0u);
  std::uint32_t* p = out.data() + start;
  *p++ = best_b | (exceptions << 8) | (exception_bits << 16) | ((n & 0x7fu) << 24);
  if (n == kBlockSize)
    pack_vertical(v.data(), best_b, p);
  else
    pack_horizontal(v.data(), n, best_b, p);
  p += packed_words(h);
  for (unsigned j = 0; j < exceptions; ++j)
    p[j / 4] |= std::uint32_t(positions[j]) << (8 * (j % 4));
  p += (exceptions + 3) / 4;
  for (unsigned j = 0; j < exceptions; ++j) {
    const unsigned bitpos = j * exception_bits, w = bitpos >> 5, off = bitpos & 31u;
    p[w] |= highs[j] << off;
    if (off + exception_bits > 32) p[w + 1] |= highs[j] >> (32 - off);
  }
}

namespace {

// Adds the exceptions' high bits back into the unpacked values, one layout lookup per exception
// (block_layout.hpp): what decode_block_scalar, the decoders' reference, uses.
inline void patch_exceptions_scalar(const BlockHeader& h, const std::uint32_t* after_packed,
                                    std::uint32_t* out) {
  for (unsigned j = 0; j < h.exceptions; ++j)
    out[exception_position(after_packed, j)] |= exception_high_bits(after_packed, h, j);
}

// The same, fast: the same layout as
// exception_position / exception_high_bits (block_layout.hpp), read sequentially: positions
// byte by byte (byte j of the little-endian words is position j), high bits through a 64-bit
// bit buffer, instead of recomputing word and shift per exception.
inline void patch_exceptions(const BlockHeader& h, const std::uint32_t* after_packed,
                             std::uint32_t* out) {
  const unsigned eb = h.exception_bits;
  const std::uint32_t* high = after_packed + position_words(h);
  const std::uint32_t mask = low_mask(eb);
  // Position j is byte j of the words in memory order on a little-endian host.
  const auto* positions = reinterpret_cast<const unsigned char*>(after_packed);
  std::uint64_t buffer = 0;
  unsigned buffered = 0;
  for (unsigned j = 0; j < h.exceptions; ++j) {
    if (buffered < eb) {
      buffer |= std::uint64_t(*high++) << buffered;
      buffered += 32;
    }
    const unsigned position = std::endian::native == std::endian::little
                                  ? positions[j]
                                  : (after_packed[j / 4] >> (8 * (j % 4))) & 0xffu;
    out[position] |= (std::uint32_t(buffer) & mask) << h.bits;
    buffer >>= eb;
    buffered -= eb;
  }
}

#if defined(__SSE2__)
template <unsigned B, unsigned Slot>
inline void unpack_slot(const __m128i* in, __m128i* out, __m128i mask) {
  constexpr unsigned bitpos = Slot * B, w = bitpos / 32, off = bitpos % 32;
  __m128i v = _mm_srli_epi32(_mm_loadu_si128(in + w), off);
  if constexpr (off + B > 32) {
    v = _mm_or_si128(v, _mm_slli_epi32(_mm_loadu_si128(in + w + 1), 32 - off));
  }
  _mm_storeu_si128(out + Slot, _mm_and_si128(v, mask));
}

template <unsigned B, unsigned... Slots>
inline void unpack_slots(const __m128i* in, __m128i* out,
                         std::integer_sequence<unsigned, Slots...>) {
  const __m128i mask = _mm_set1_epi32(int(low_mask(B)));
  (unpack_slot<B, Slots>(in, out, mask), ...);
}

template <unsigned B>
void unpack(const std::uint32_t* in, std::uint32_t* out) {
  if constexpr (B == 0) {
    std::memset(out, 0, kBlockSize * sizeof(std::uint32_t));
  } else if constexpr (B == 32) {
    std::memcpy(out, in, kBlockSize * sizeof(std::uint32_t));
  } else {
    unpack_slots<B>(reinterpret_cast<const __m128i*>(in), reinterpret_cast<__m128i*>(out),
                    std::make_integer_sequence<unsigned, 32>{});
  }
}
#else
template <unsigned B>
void unpack(const std::uint32_t* in, std::uint32_t* out) {
  constexpr BlockHeader h{B, 0, 0, kBlockSize};
  for (unsigned i = 0; i < kBlockSize; ++i) out[i] = packed_value(in, h, i);
}
#endif

#if defined(__SSE2__)

// Posting blocks of 128 values without exceptions, unpacked and finished in one pass: slot s of
// the vertical layout holds values 4s..4s+3, so each unpacked slot is turned at once into
// docIDs (gaps + 1, prefix sum, carried from the slot before) or frequencies (+ 1) and stored;
// no second pass over the block. (Blocks with exceptions are patched between the two passes.)
template <unsigned B, bool Docids, unsigned... Slots>
inline void unpack_finish_slots(const __m128i* in, __m128i* out, __m128i running,
                                std::integer_sequence<unsigned, Slots...>) {
  const __m128i mask = _mm_set1_epi32(int(low_mask(B)));
  const __m128i one = _mm_set1_epi32(1);
  const auto finish = [&](__m128i x, __m128i* to) {
    x = _mm_add_epi32(x, one);
    if constexpr (Docids) {
      x = _mm_add_epi32(x, _mm_slli_si128(x, 4));
      x = _mm_add_epi32(x, _mm_slli_si128(x, 8));
      x = _mm_add_epi32(x, running);
      running = _mm_shuffle_epi32(x, 0xff);
    }
    _mm_storeu_si128(to, x);
  };
  const auto slot = [&]<unsigned Slot>() {
    constexpr unsigned bitpos = Slot * B, w = bitpos / 32, off = bitpos % 32;
    __m128i v = _mm_srli_epi32(_mm_loadu_si128(in + w), off);
    if constexpr (off + B > 32)
      v = _mm_or_si128(v, _mm_slli_epi32(_mm_loadu_si128(in + w + 1), 32 - off));
    finish(_mm_and_si128(v, mask), out + Slot);
  };
  if constexpr (B == 0) {
    const __m128i zero = _mm_setzero_si128();
    (finish(zero, out + Slots), ...);
  } else {
    (slot.template operator()<Slots>(), ...);
  }
}

template <unsigned B, bool Docids>
void unpack_finish(const std::uint32_t* in, std::uint32_t* out, DocId floor) {
  unpack_finish_slots<B, Docids>(reinterpret_cast<const __m128i*>(in),
                                 reinterpret_cast<__m128i*>(out), _mm_set1_epi32(int(floor - 1)),
                                 std::make_integer_sequence<unsigned, 32>{});
}
// The same finish over a full block already unpacked (and patched) in place: 32 slots, unrolled.
template <bool Docids, unsigned... Slots>
inline void finish_in_place(std::uint32_t* values, DocId floor,
                            std::integer_sequence<unsigned, Slots...>) {
  __m128i* p = reinterpret_cast<__m128i*>(values);
  __m128i running = _mm_set1_epi32(int(floor - 1));
  const __m128i one = _mm_set1_epi32(1);
  const auto finish = [&](__m128i* at) {
    __m128i x = _mm_add_epi32(_mm_loadu_si128(at), one);
    if constexpr (Docids) {
      x = _mm_add_epi32(x, _mm_slli_si128(x, 4));
      x = _mm_add_epi32(x, _mm_slli_si128(x, 8));
      x = _mm_add_epi32(x, running);
      running = _mm_shuffle_epi32(x, 0xff);
    }
    _mm_storeu_si128(at, x);
  };
  (finish(p + Slots), ...);
}

using UnpackFinishFn = void (*)(const std::uint32_t*, std::uint32_t*, DocId);
template <bool Docids, unsigned... Bs>
constexpr std::array<UnpackFinishFn, sizeof...(Bs)> make_unpack_finish_table(
    std::integer_sequence<unsigned, Bs...>) {
  return {&unpack_finish<Bs, Docids>...};
}
constexpr auto kUnpackDocids =
    make_unpack_finish_table<true>(std::make_integer_sequence<unsigned, 33>{});
constexpr auto kUnpackFreqs =
    make_unpack_finish_table<false>(std::make_integer_sequence<unsigned, 33>{});
#endif

using UnpackFn = void (*)(const std::uint32_t*, std::uint32_t*);
template <unsigned... Bs>
constexpr std::array<UnpackFn, sizeof...(Bs)> make_unpack_table(
    std::integer_sequence<unsigned, Bs...>) {
  return {&unpack<Bs>...};
}
constexpr auto kUnpack = make_unpack_table(std::make_integer_sequence<unsigned, 33>{});

// out[i] = floor - 1 + sum_{j <= i} (out[j] + 1), in place, for i < n rounded up to 4.
inline void gaps_to_docids(std::uint32_t* out, unsigned n, DocId floor) {
#if defined(__SSE2__)
  __m128i running = _mm_set1_epi32(int(floor - 1));
  const __m128i one = _mm_set1_epi32(1);
  __m128i* p = reinterpret_cast<__m128i*>(out);
  for (unsigned s = 0; s < (n + 3) / 4; ++s) {
    __m128i x = _mm_add_epi32(_mm_loadu_si128(p + s), one);
    x = _mm_add_epi32(x, _mm_slli_si128(x, 4));
    x = _mm_add_epi32(x, _mm_slli_si128(x, 8));
    x = _mm_add_epi32(x, running);
    _mm_storeu_si128(p + s, x);
    running = _mm_shuffle_epi32(x, 0xff);
  }
#else
  DocId d = floor - 1;
  for (unsigned i = 0; i < n; ++i) out[i] = d = d + out[i] + 1;
#endif
}

}  // namespace

// Partial blocks: horizontal layout, value i at bit i * b (packed_value's horizontal case).
// Values up to the next multiple of 4 are written (as 0) so that 4-wide prefix sums read
// defined data. Each value whose two words lie inside the packed words is read from a 64-bit
// window of its own (no state carried from value to value: they overlap in the pipeline); the
// last few go through a running bit buffer, which reads no word past the packed ones. A shard
// holds one partial block per list, and every short list is one: four quarter shards unpack
// four times as many as one shard (issue 16).
void unpack_horizontal(const std::uint32_t* in, const BlockHeader& h, std::uint32_t* out) {
  const unsigned padded = (h.count + 3) & ~3u;
  const unsigned b = h.bits;
  if (b == 0) {
    std::fill(out, out + padded, 0u);
    return;
  }
  const std::uint32_t mask = low_mask(b);
  const unsigned words = packed_words(h);
  // Value i's window is words (i*b)/32 and the next: inside while i*b < 32 * (words - 1).
  const unsigned windowed =
      words < 2 ? 0u : std::min(h.count, (32u * (words - 1) + b - 1) / b);
  unsigned i = 0;
  for (; i < windowed; ++i) {
    const unsigned bit = i * b;
    std::uint64_t window;
    std::memcpy(&window, in + (bit >> 5), sizeof window);  // little-endian: word, next word
    out[i] = std::uint32_t(window >> (bit & 31u)) & mask;
  }
  if (i < h.count) {
    const unsigned bit = i * b;
    const std::uint32_t* w = in + (bit >> 5);
    std::uint64_t buffer = *w++ >> (bit & 31u);
    unsigned buffered = 32 - (bit & 31u);
    for (; i < h.count; ++i) {
      if (buffered < b) {
        buffer |= std::uint64_t(*w++) << buffered;
        buffered += 32;
      }
      out[i] = std::uint32_t(buffer) & mask;
      buffer >>= b;
      buffered -= b;
    }
  }
  std::fill(out + h.count, out + padded, 0u);
}

// Unpacks and patches; returns the block's value count.
inline unsigned unpack_block(const std::uint32_t* in, std::uint32_t* out) {
  const BlockHeader h = read_header(in[0]);
  if (h.count == kBlockSize)
    kUnpack[h.bits](in + 1, out);
  else
    unpack_horizontal(in + 1, h, out);
  if (h.exceptions) patch_exceptions(h, in + 1 + packed_words(h), out);
  return h.count;
}

const std::uint32_t* decode_block(const std::uint32_t* in, std::uint32_t* out) {
  const unsigned n = unpack_block(in, out);
  std::fill(out + n, out + kBlockSize, 0u);
  return in + block_words(in);
}

const std::uint32_t* decode_block_scalar(const std::uint32_t* in, std::uint32_t* out) {
  const BlockHeader h = read_header(in[0]);
  const std::uint32_t* packed = in + 1;
  for (unsigned i = 0; i < kBlockSize; ++i) {
    std::uint32_t x = 0;
    for (unsigned bit = 0; bit < h.bits && i < h.count; ++bit) {  // bit by bit: plainly right
      std::uint32_t word;
      unsigned pos;
      if (h.count == kBlockSize) {
        pos = (i >> 2) * h.bits + bit;
        word = packed[4 * (pos >> 5) + (i & 3u)];
      } else {
        pos = i * h.bits + bit;
        word = packed[pos >> 5];
      }
      x |= ((word >> (pos & 31u)) & 1u) << bit;
    }
    out[i] = x;
  }
  if (h.exceptions) patch_exceptions_scalar(h, packed + packed_words(h), out);
  return in + words_for(h);
}

bool block_is_well_formed(const std::uint32_t* in, std::size_t available) {
  if (available < 1) return false;
  const BlockHeader h = read_header(in[0]);
  if ((in[0] >> 31) != 0 || h.bits > 32 || h.exceptions > h.count || h.exception_bits > 32)
    return false;
  if (h.exceptions > 0 && (h.exception_bits == 0 || h.bits + h.exception_bits > 32)) return false;
  if (words_for(h) > available) return false;
  const std::uint32_t* pos = in + 1 + packed_words(h);
  for (unsigned j = 0; j < h.exceptions; ++j)
    if (((pos[j / 4] >> (8 * (j % 4))) & 0xffu) >= h.count) return false;
  return true;
}

void encode_posting_block(const DocId* docs, const std::uint32_t* freqs, unsigned n,
                          DocId first_docid_floor, Codec codec, std::vector<std::uint32_t>& out) {
  std::array<std::uint32_t, kBlockSize> tmp{};
  DocId prev = first_docid_floor - 1;  // wraps for floor 0; differences stay exact mod 2^32
  for (unsigned i = 0; i < n; ++i) {
    tmp[i] = docs[i] - prev - 1;
    prev = docs[i];
  }
  encode_block(tmp.data(), n, codec, out);
  for (unsigned i = 0; i < n; ++i) tmp[i] = freqs[i] - 1;
  std::fill(tmp.begin() + n, tmp.end(), 0u);
  encode_block(tmp.data(), n, codec, out);
}

const std::uint32_t* decode_docids(const std::uint32_t* in, DocId first_docid_floor, DocId* out) {
#if defined(__SSE2__)
  const BlockHeader h = read_header(in[0]);
  if (h.count == kBlockSize) {
    if (h.exceptions == 0) {
      kUnpackDocids[h.bits](in + 1, out, first_docid_floor);
    } else {
      kUnpack[h.bits](in + 1, out);
      patch_exceptions(h, in + 1 + packed_words(h), out);
      finish_in_place<true>(out, first_docid_floor, std::make_integer_sequence<unsigned, 32>{});
    }
    return in + words_for(h);
  }
#endif
  const unsigned n = unpack_block(in, out);
  gaps_to_docids(out, n, first_docid_floor);
  return in + block_words(in);
}

const std::uint32_t* decode_freqs(const std::uint32_t* freq_part, std::uint32_t* out) {
#if defined(__SSE2__)
  const BlockHeader h = read_header(freq_part[0]);
  if (h.count == kBlockSize) {
    if (h.exceptions == 0) {
      kUnpackFreqs[h.bits](freq_part + 1, out, 0);
    } else {
      kUnpack[h.bits](freq_part + 1, out);
      patch_exceptions(h, freq_part + 1 + packed_words(h), out);
      finish_in_place<false>(out, 0, std::make_integer_sequence<unsigned, 32>{});
    }
    return freq_part + words_for(h);
  }
#endif
  const unsigned n = unpack_block(freq_part, out);
#if defined(__SSE2__)
  // Four at a time: unpack_block leaves defined values up to n rounded up to 4.
  const __m128i one = _mm_set1_epi32(1);
  __m128i* p = reinterpret_cast<__m128i*>(out);
  for (unsigned s = 0; s < (n + 3) / 4; ++s)
    _mm_storeu_si128(p + s, _mm_add_epi32(_mm_loadu_si128(p + s), one));
#else
  for (unsigned i = 0; i < n; ++i) out[i] += 1;
#endif
  return freq_part + block_words(freq_part);
}

}  // namespace gpusearch::codec
