// Block codec: round trips on random and edge-case inputs, SIMD decoder against the scalar one,
// and both codecs (bit packing, PForDelta).
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/block_codec.hpp"

using namespace gpusearch;
using namespace gpusearch::codec;

namespace {

std::vector<std::uint32_t> round_trip(const std::vector<std::uint32_t>& values, Codec c) {
  std::vector<std::uint32_t> enc;
  encode_block(values.data(), unsigned(values.size()), c, enc);
  EXPECT_EQ(block_words(enc.data()), enc.size());
  EXPECT_TRUE(block_is_well_formed(enc.data(), enc.size()));
  std::vector<std::uint32_t> fast(kBlockSize, 0xdeadbeef), slow(kBlockSize, 0xdeadbeef);
  EXPECT_EQ(decode_block(enc.data(), fast.data()), enc.data() + enc.size());
  EXPECT_EQ(decode_block_scalar(enc.data(), slow.data()), enc.data() + enc.size());
  EXPECT_EQ(fast, slow);
  fast.resize(values.size());
  return fast;
}

class CodecTest : public ::testing::TestWithParam<Codec> {};

TEST_P(CodecTest, RandomBlocksOfEveryBitWidthRoundTrip) {
  std::mt19937_64 rng(42);
  for (unsigned bits = 0; bits <= 32; ++bits) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<std::uint32_t> v(kBlockSize);
      for (auto& x : v) x = bits == 0 ? 0 : std::uint32_t(rng() >> (64 - bits));
      EXPECT_EQ(round_trip(v, GetParam()), v) << "bits " << bits;
    }
  }
}

// Partial blocks (a list's last, a short list's only one) of every length and bit width, decoded
// from the very end of a readable page with an unreadable one after it: the horizontal unpacking
// reads 64-bit windows, and one past the block's last word would fault here.
TEST_P(CodecTest, PartialBlocksOfEveryLengthAndWidthRoundTripAtAPageEnd) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(mem) + page, page, PROT_NONE), 0);
  std::mt19937_64 rng(11);
  for (unsigned n = 1; n < kBlockSize; ++n)
    for (unsigned bits = 0; bits <= 32; ++bits) {
      std::vector<std::uint32_t> v(n);
      for (auto& x : v) x = bits == 0 ? 0 : std::uint32_t(rng() >> (64 - bits));
      if (bits > 0) v[rng() % n] |= 1u << (bits - 1);  // the width is `bits` exactly
      std::vector<std::uint32_t> enc;
      encode_block(v.data(), n, GetParam(), enc);
      ASSERT_LE(enc.size() * 4, page);
      auto* at = reinterpret_cast<std::uint32_t*>(static_cast<char*>(mem) + page) - enc.size();
      std::memcpy(at, enc.data(), enc.size() * 4);
      std::vector<std::uint32_t> fast(kBlockSize, 0xdeadbeef), slow(kBlockSize, 0xdeadbeef);
      ASSERT_EQ(decode_block(at, fast.data()), at + enc.size()) << n << " values, " << bits;
      decode_block_scalar(at, slow.data());
      ASSERT_EQ(fast, slow) << n << " values of " << bits << " bits";
      fast.resize(n);
      ASSERT_EQ(fast, v) << n << " values of " << bits << " bits";
    }
  munmap(mem, 2 * page);
}

TEST_P(CodecTest, SkewedBlocksWithOutliersRoundTrip) {
  std::mt19937_64 rng(7);
  for (int rep = 0; rep < 500; ++rep) {
    std::vector<std::uint32_t> v(1 + rng() % kBlockSize);
    for (auto& x : v) x = std::uint32_t(rng() % 8);
    const unsigned outliers = unsigned(rng() % 12);
    for (unsigned o = 0; o < outliers; ++o)
      v[rng() % v.size()] = std::uint32_t(rng() >> (rng() % 64));
    EXPECT_EQ(round_trip(v, GetParam()), v);
  }
}

TEST_P(CodecTest, EdgeCases) {
  EXPECT_EQ(round_trip({0}, GetParam()), std::vector<std::uint32_t>{0});
  EXPECT_EQ(round_trip({0xffffffffu}, GetParam()), std::vector<std::uint32_t>{0xffffffffu});
  std::vector<std::uint32_t> all_max(kBlockSize, 0xffffffffu), all_same(kBlockSize, 5);
  EXPECT_EQ(round_trip(all_max, GetParam()), all_max);
  EXPECT_EQ(round_trip(all_same, GetParam()), all_same);
  std::vector<std::uint32_t> one_huge(kBlockSize, 1);
  one_huge[kBlockSize - 1] = 0xffffffffu;
  EXPECT_EQ(round_trip(one_huge, GetParam()), one_huge);
}

TEST_P(CodecTest, PostingBlocksRoundTripDocidsAndFrequencies) {
  std::mt19937_64 rng(3);
  for (int rep = 0; rep < 300; ++rep) {
    const unsigned n = 1 + unsigned(rng() % kBlockSize);
    const DocId floor = rep % 3 == 0 ? 0 : DocId(rng() % 1000000);
    std::vector<DocId> docs(n);
    std::vector<std::uint32_t> freqs(n);
    DocId d = floor + DocId(rng() % 50);
    for (unsigned i = 0; i < n; ++i) {
      docs[i] = d;
      d += 1 + DocId(rng() % (rep % 5 == 0 ? 1 : 1000));  // some lists are dense runs
      freqs[i] = 1 + std::uint32_t(rng() % (i % 17 == 0 ? 5000 : 4));
    }
    std::vector<std::uint32_t> enc;
    encode_posting_block(docs.data(), freqs.data(), n, floor, GetParam(), enc);
    std::vector<DocId> out_docs(kBlockSize);
    std::vector<std::uint32_t> out_freqs(kBlockSize);
    const std::uint32_t* freq_part = decode_docids(enc.data(), floor, out_docs.data());
    EXPECT_EQ(freq_part, skip_docids(enc.data()));
    decode_freqs(freq_part, out_freqs.data());
    out_docs.resize(n);
    out_freqs.resize(n);
    EXPECT_EQ(out_docs, docs);
    EXPECT_EQ(out_freqs, freqs);
  }
}

// Full blocks (128 postings: the fused unpack-and-finish decoders, with and without
// exceptions) at every bit width of the gaps and frequencies, against the encoded values.
TEST_P(CodecTest, FullPostingBlocksAtEveryBitWidth) {
  std::mt19937_64 rng(17);
  unsigned with_exceptions = 0;
  for (unsigned b = 0; b <= 32; ++b) {
    for (int variant = 0; variant < 3; ++variant) {
      // Gaps of b bits: every gap random below 2^b, one 2^b - 1 (b <= 24, so docIDs stay below
      // 2^32), or small gaps and one of b bits (b > 24); variant 2 adds outliers of b + 6 bits
      // to a few values (exceptions for pfor128).
      std::vector<std::uint32_t> gaps(kBlockSize), f1(kBlockSize);
      const std::uint64_t top = (std::uint64_t(1) << b) - 1;
      for (unsigned i = 0; i < kBlockSize; ++i) {
        gaps[i] = std::uint32_t(b <= 24 ? rng() % (top + 1) : rng() % 16);
        f1[i] = std::uint32_t(rng() % (top + 1));
      }
      if (b > 24)  // one gap of exactly b bits, docIDs below 2^32
        gaps[rng() % kBlockSize] = (1u << (b - 1)) + std::uint32_t(rng() % (1u << (b - 2)));
      else if (b > 0)
        gaps[rng() % kBlockSize] = std::uint32_t(top);
      if (variant == 2 && b < 20)
        for (int o = 0; o < 5; ++o) {
          gaps[rng() % kBlockSize] |= 1u << (b + 6);
          f1[rng() % kBlockSize] |= 1u << (b + 6);
        }
      const DocId floor = variant == 1 ? 0 : DocId(rng() % 1000);
      std::vector<DocId> docs(kBlockSize);
      std::vector<std::uint32_t> freqs(kBlockSize);
      DocId prev = floor - 1;
      for (unsigned i = 0; i < kBlockSize; ++i) {
        docs[i] = prev = prev + gaps[i] + 1;
        freqs[i] = f1[i] == 0xffffffffu ? f1[i] : f1[i] + 1;
      }
      std::vector<std::uint32_t> enc;
      encode_posting_block(docs.data(), freqs.data(), kBlockSize, floor, GetParam(), enc);
      with_exceptions += read_header(enc[0]).exceptions > 0;
      std::vector<DocId> out_docs(kBlockSize);
      std::vector<std::uint32_t> out_freqs(kBlockSize);
      const std::uint32_t* freq_part = decode_docids(enc.data(), floor, out_docs.data());
      ASSERT_EQ(freq_part, skip_docids(enc.data())) << "bits " << b;
      EXPECT_EQ(decode_freqs(freq_part, out_freqs.data()), enc.data() + enc.size()) << "bits " << b;
      ASSERT_EQ(out_docs, docs) << "bits " << b << " variant " << variant;
      ASSERT_EQ(out_freqs, freqs) << "bits " << b << " variant " << variant;
    }
  }
  if (GetParam() == Codec::kPForDelta) {
    EXPECT_GT(with_exceptions, 10u);
  }
}

TEST_P(CodecTest, LargestDocidAndLargestGap) {
  std::vector<DocId> docs = {0, 0xfffffffeu};
  std::vector<std::uint32_t> freqs = {1, 0xffffffffu};
  std::vector<std::uint32_t> enc;
  encode_posting_block(docs.data(), freqs.data(), 2, 0, GetParam(), enc);
  std::vector<DocId> out(kBlockSize);
  std::vector<std::uint32_t> f(kBlockSize);
  decode_freqs(decode_docids(enc.data(), 0, out.data()), f.data());
  EXPECT_EQ(out[0], 0u);
  EXPECT_EQ(out[1], 0xfffffffeu);
  EXPECT_EQ(f[1], 0xffffffffu);
}

INSTANTIATE_TEST_SUITE_P(BothCodecs, CodecTest,
                         ::testing::Values(Codec::kBitPacking, Codec::kPForDelta),
                         [](const auto& info) {
                           return std::string(info.param == Codec::kBitPacking ? "bp128"
                                                                               : "pfor128");
                         });

TEST(PForDelta, ExceptionsMakeSkewedBlocksSmaller) {
  std::vector<std::uint32_t> v(kBlockSize, 3);
  v[10] = 1u << 20;
  v[99] = 1u << 25;
  std::vector<std::uint32_t> bp, pfor;
  encode_block(v.data(), kBlockSize, Codec::kBitPacking, bp);
  encode_block(v.data(), kBlockSize, Codec::kPForDelta, pfor);
  EXPECT_EQ(bp.size(), 1u + 4 * 26);
  EXPECT_LT(pfor.size(), 20u);
  EXPECT_EQ(read_header(pfor[0]).exceptions, 2u);
}

TEST(BlockValidation, RejectsMalformedHeaders) {
  std::vector<std::uint32_t> v(kBlockSize, 1), enc;
  encode_block(v.data(), kBlockSize, Codec::kPForDelta, enc);
  EXPECT_TRUE(block_is_well_formed(enc.data(), enc.size()));
  EXPECT_FALSE(block_is_well_formed(enc.data(), enc.size() - 1));  // truncated
  std::uint32_t bad = 40;                                          // b > 32
  EXPECT_FALSE(block_is_well_formed(&bad, 1000));
  bad = 0xff000001u;  // reserved bits set
  EXPECT_FALSE(block_is_well_formed(&bad, 1000));
}

}  // namespace
