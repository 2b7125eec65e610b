// Block codec: round trips on random and edge-case inputs, SIMD decoder against the scalar one,
// and both codecs (bit packing, PForDelta).
#include <gtest/gtest.h>

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

TEST_P(CodecTest, SkewedBlocksWithOutliersRoundTrip) {
  std::mt19937_64 rng(7);
  for (int rep = 0; rep < 500; ++rep) {
    std::vector<std::uint32_t> v(1 + rng() % kBlockSize);
    for (auto& x : v) x = std::uint32_t(rng() % 8);
    const unsigned outliers = unsigned(rng() % 12);
    for (unsigned o = 0; o < outliers; ++o) v[rng() % v.size()] = std::uint32_t(rng() >> (rng() % 64));
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
                         [](const auto& info) { return std::string(info.param == Codec::kBitPacking ? "bp128" : "pfor128"); });

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
