// Every libFuzzer seed and every saved crash input (tests/fuzz/seeds/TARGET,
// tests/fuzz/regressions/TARGET) through the fuzz targets' bodies in the ordinary build: a fixed
// crash stays fixed without clang, and the targets themselves are exercised on every CI run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../fuzz/fuzz_targets.hpp"

namespace {

namespace fs = std::filesystem;

using Body = int (*)(const std::uint8_t*, std::size_t);

std::size_t run_inputs(const std::string& target, Body body) {
  std::size_t n = 0;
  for (const char* kind : {"seeds", "regressions"}) {
    const fs::path dir = fs::path(GPUSEARCH_SOURCE_DIR) / "tests/fuzz" / kind / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      SCOPED_TRACE(e.path().string());
      EXPECT_EQ(body(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), 0);
      ++n;
    }
  }
  return n;
}

}  // namespace

TEST(FuzzRegressions, QueryParser) {
  EXPECT_GT(run_inputs("query_parser", gpusearch::fuzz::query_parser), 0u);
}
TEST(FuzzRegressions, CorpusReader) {
  EXPECT_GT(run_inputs("corpus_reader", gpusearch::fuzz::corpus_reader), 0u);
}
TEST(FuzzRegressions, WireDecoder) {
  // Valid messages of every type, then every prefix and a flipped byte of each.
  for (const auto& w : gpusearch::fuzz::wire_examples()) {
    const auto b = gpusearch::wire::as_bytes(w);
    std::vector<std::uint8_t> bytes(b.size());
    std::memcpy(bytes.data(), b.data(), b.size());
    for (std::size_t n = 0; n <= bytes.size(); n += 8)
      EXPECT_EQ(gpusearch::fuzz::wire_decoder(bytes.data(), n), 0);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] ^= 0xa5;
      EXPECT_EQ(gpusearch::fuzz::wire_decoder(bytes.data(), bytes.size()), 0);
      bytes[i] ^= 0xa5;
    }
  }
  run_inputs("wire_decoder", gpusearch::fuzz::wire_decoder);
}
TEST(FuzzRegressions, IndexOpen) {
  // Each file of the fixture truncated to half, and overwritten at its start.
  const std::size_t files = gpusearch::fuzz::index_fixture().files.size();
  ASSERT_GT(files, 4u);
  for (std::size_t f = 0; f < files; ++f) {
    const std::uint8_t truncate[] = {std::uint8_t(f), 1, 0, 0, 0, 3};
    EXPECT_EQ(gpusearch::fuzz::index_open(truncate, sizeof truncate), 0);
    const std::uint8_t overwrite[] = {std::uint8_t(f), 2, 0, 0xff, 0xff, 0xff, 0xff};
    EXPECT_EQ(gpusearch::fuzz::index_open(overwrite, sizeof overwrite), 0);
  }
  run_inputs("index_open", gpusearch::fuzz::index_open);
}
