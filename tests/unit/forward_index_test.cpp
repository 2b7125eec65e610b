// The forward index (common/forward_index, written by `gpusearch index --forward-index`): every
// document's stream equals the tokenizer's output on its corpus text (generated corpus, the
// generator indexed directly, Cranfield), corrupt or truncated files are refused naming the
// file, and an index built without it says so.
#include <gtest/gtest.h>

#include <unordered_map>

#include "common/error.hpp"
#include "common/forward_index.hpp"
#include "common/shard_index.hpp"
#include "common/tokenizer.hpp"
#include "partition/corpus_reader.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using namespace gpusearch::testing;
namespace fs = std::filesystem;

namespace {

std::unordered_map<std::string, std::vector<std::string>> tokenized_corpus(const fs::path& corpus) {
  std::unordered_map<std::string, std::vector<std::string>> out;
  CorpusReader reader({corpus}, {});
  RawDocument doc;
  while (reader.next(doc)) {
    auto& tokens = out[doc.id];
    for_each_token(doc.text, [&](std::string_view t) { tokens.emplace_back(t); });
  }
  return out;
}

// Every document of every shard: its stream, as term strings, is the tokenizer's output.
void expect_streams_equal_text(const fs::path& index_dir, const fs::path& corpus) {
  const auto expected = tokenized_corpus(corpus);
  const Index index = Index::open(index_dir);
  ASSERT_GT(index.num_open_shards(), 0u);
  std::size_t docs = 0, tokens = 0;
  std::vector<TermId> stream;
  for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
    const ShardIndex& shard = index.shard(s);
    const ForwardIndex fwd = ForwardIndex::open(shard);
    ASSERT_EQ(fwd.num_docs(), shard.num_docs());
    for (DocId d = 0; d < shard.num_docs(); ++d) {
      const std::string id(shard.external_id(d));
      const auto it = expected.find(id);
      ASSERT_NE(it, expected.end()) << id;
      fwd.tokens(d, stream);
      ASSERT_EQ(stream.size(), it->second.size()) << "document " << id;
      for (std::size_t i = 0; i < stream.size(); ++i)
        ASSERT_EQ(shard.term_string(stream[i]), it->second[i]) << "document " << id << " token " << i;
      ++docs;
      tokens += stream.size();
    }
  }
  EXPECT_EQ(docs, expected.size());
  EXPECT_EQ(tokens, index.params().collection.total_tokens);
}

TEST(ForwardIndex, VbyteRoundTripAndRejectsBadEncodings) {
  std::vector<std::uint8_t> bytes;
  const std::vector<std::uint32_t> values{0, 1, 127, 128, 16383, 16384, 0xffffffffu};
  for (auto v : values) vbyte::append(v, bytes);
  EXPECT_EQ(bytes.size(), 1 + 1 + 1 + 2 + 2 + 3 + 5u);
  const std::uint8_t* p = bytes.data();
  for (auto v : values) {
    std::uint32_t got = 0;
    ASSERT_TRUE(vbyte::next(p, bytes.data() + bytes.size(), got));
    EXPECT_EQ(got, v);
  }
  EXPECT_EQ(p, bytes.data() + bytes.size());
  const std::uint8_t truncated[] = {0x80, 0x80};
  const std::uint8_t too_big[] = {0xff, 0xff, 0xff, 0xff, 0x7f};  // 35 bits
  std::uint32_t v = 0;
  p = truncated;
  EXPECT_FALSE(vbyte::next(p, truncated + 2, v));
  p = too_big;
  EXPECT_FALSE(vbyte::next(p, too_big + 5, v));
}

TEST(ForwardIndex, GeneratedCorpusAndGeneratorStreamsEqualTheText) {
  TempDir tmp;
  auto r = run_gpusearch("generate --docs 400 --seed 11 --out " + (tmp / "gen").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto corpus = tmp / "gen" / "corpus.jsonl";
  r = run_gpusearch("index --corpus " + corpus.string() + " --shards 3 --forward-index --out " +
                    (tmp / "text").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_streams_equal_text(tmp / "text", corpus);
  r = run_gpusearch("index --synthetic docs=400,seed=11 --shards 2 --split gs-tiers "
                    "--forward-index --out " + (tmp / "synth").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_streams_equal_text(tmp / "synth", corpus);
  r = run_gpusearch("info --verify --index " + (tmp / "synth").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("forward index: yes"), std::string::npos) << r.output;
}

TEST(ForwardIndex, CranfieldStreamsEqualTheText) {
  const auto corpus = shared_data("cranfield") / "corpus.jsonl";
  if (!fs::exists(corpus))
    GTEST_SKIP() << "SKIPPED: " << corpus << " not found (the shared data folder is not beside the checkout)";
  TempDir tmp;
  const auto r = run_gpusearch("index --corpus " + corpus.string() +
                               " --shards 2 --forward-index --out " + (tmp / "idx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_streams_equal_text(tmp / "idx", corpus);
}

// A small indexed corpus with a forward index, for the damage tests.
struct SmallIndex {
  TempDir tmp;
  fs::path dir = tmp / "idx";
  fs::path shard_dir = dir / shard_dir_name(0);
  explicit SmallIndex(bool forward) {
    write_text(tmp / "c.jsonl",
               "{\"id\": \"a\", \"contents\": \"the quick brown fox jumps over the lazy dog\"}\n"
               "{\"id\": \"b\", \"contents\": \"\"}\n"
               "{\"id\": \"c\", \"contents\": \"fox fox fox and a dog\"}\n");
    const auto r = run_gpusearch("index --corpus " + (tmp / "c.jsonl").string() + " --out " +
                                 dir.string() + (forward ? " --forward-index" : ""));
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
};

void expect_refused(const fs::path& index_dir, const OpenOptions& oo, const std::string& file,
                    const std::string& what) {
  try {
    const Index index = Index::open(index_dir, oo);
    const ForwardIndex fwd = ForwardIndex::open(index.shard(0), oo);
    std::vector<TermId> out;
    for (DocId d = 0; d < fwd.num_docs(); ++d) fwd.tokens(d, out);
    ADD_FAILURE() << "damaged " << file << " was accepted";
  } catch (const IndexFormatError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(ForwardIndex, CorruptOrTruncatedFilesAreRefusedNamingTheFile) {
  SmallIndex idx(true);
  const auto data = idx.shard_dir / forward_files::kData;
  const auto offsets = idx.shard_dir / forward_files::kOffsets;
  const std::string good_data = read_text(data), good_offsets = read_text(offsets);
  ASSERT_EQ(good_data.size(), 15u);  // 15 tokens, all term IDs below 128
  {  // the intact index reads
    const Index index = Index::open(idx.dir);
    EXPECT_EQ(ForwardIndex::open(index.shard(0)).num_tokens(), 15u);
  }
  std::string bad = good_data;
  bad[3] ^= 0x01;
  write_text(data, bad);
  expect_refused(idx.dir, {}, data.string(), "checksum mismatch");
  write_text(data, good_data.substr(0, good_data.size() - 1));
  expect_refused(idx.dir, {}, data.string(), "truncated");
  write_text(data, good_data);
  write_text(offsets, good_offsets.substr(0, 16));
  expect_refused(idx.dir, {}, offsets.string(), "truncated");
  write_text(offsets, good_offsets);
  // Without checksums, a stream cut short by a bad byte is still caught when decoded.
  bad = good_data;
  bad.back() = char(0x80);  // the last token now continues past the end of its document
  write_text(data, bad);
  OpenOptions no_hash;
  no_hash.verify_checksums = false;
  expect_refused(idx.dir, no_hash, data.string(), "malformed");
  // An unknown encoding version in the manifest is refused naming shard.json.
  write_text(data, good_data);
  const auto manifest = idx.shard_dir / kShardManifestName;
  std::string m = read_text(manifest);
  const auto at = m.find("\"format_version\": 1", m.find("\"forward_index\": {"));
  ASSERT_NE(at, std::string::npos);
  m.replace(at, 19, "\"format_version\": 9");
  write_text(manifest, m);
  // The root manifest's checksum of shard.json catches the edit; the shard alone reports it.
  expect_refused(idx.dir, no_hash, manifest.string(), "root manifest");
  const auto shard = ShardIndex::open(idx.shard_dir, no_hash);
  try {
    ForwardIndex::open(*shard, no_hash);
    ADD_FAILURE() << "opened a forward index of version 9";
  } catch (const IndexFormatError& e) {
    EXPECT_NE(std::string(e.what()).find(manifest.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("forward index version 9"), std::string::npos) << e.what();
  }
}

TEST(ForwardIndex, IndexWithoutItSaysSo) {
  SmallIndex idx(false);
  EXPECT_FALSE(fs::exists(idx.shard_dir / forward_files::kData));
  const Index index = Index::open(idx.dir);
  try {
    ForwardIndex::open(index.shard(0));
    ADD_FAILURE() << "opened a forward index that was never built";
  } catch (const IndexFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("shard.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--forward-index"), std::string::npos) << e.what();
  }
  const auto r = run_gpusearch("info --index " + idx.dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("forward index: none"), std::string::npos) << r.output;
}

}  // namespace
