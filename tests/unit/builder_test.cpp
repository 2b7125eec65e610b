// The index builder against a hand-checked tiny corpus, the GS order, the synthetic streaming
// path against the text path, and the manifest's figures.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/shard_index.hpp"
#include "partition/index_builder.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;
using gpusearch::testing::write_text;

namespace {

BuildOptions quiet_options(const std::filesystem::path& out) {
  BuildOptions o;
  o.out_dir = out;
  o.progress = false;
  return o;
}

// d1 "a b a", d2 "b c", d3 "A c c c", d4 "d": 10 tokens, avgdl 2.5, no links (PR' = 1).
// max impact = maxtf / (maxtf + 1.2 * (0.25 + 0.75 * len / 2.5)):
//   d1: 2 / (2 + 1.38) = 0.5917   d2: 1 / (1 + 1.02) = 0.4950
//   d3: 3 / (3 + 1.74) = 0.6329   d4: 1 / (1 + 0.66) = 0.6024
// GS = 0.3 + 0.7 * max impact orders d3, d4, d1, d2: local docIDs 0, 1, 2, 3.
TEST(IndexBuilder, TinyCorpusMatchesHandCheckedIndex) {
  TempDir tmp;
  write_text(tmp / "c.jsonl",
             "{\"id\": \"d1\", \"contents\": \"a b a\"}\n"
             "{\"id\": \"d2\", \"title\": \"b\", \"text\": \"c\"}\n"
             "{\"_id\": \"d3\", \"contents\": \"A c, c; c.\"}\n"
             "{\"id\": \"d4\", \"contents\": \"d\"}\n");
  build_index_from_corpus({tmp / "c.jsonl"}, {}, quiet_options(tmp / "idx"));
  const Index index = Index::open(tmp / "idx");
  const ShardIndex& s = index.shard(0);
  EXPECT_EQ(s.num_docs(), 4u);
  EXPECT_EQ(s.num_terms(), 4u);
  EXPECT_EQ(s.params().collection.total_tokens, 10u);
  EXPECT_DOUBLE_EQ(s.params().collection.avg_doc_length, 2.5);
  EXPECT_EQ(s.params().num_postings_total, 7u);
  EXPECT_FALSE(s.params().has_links);
  const std::vector<std::string> ext = {"d3", "d4", "d1", "d2"};
  for (DocId d = 0; d < 4; ++d) EXPECT_EQ(s.external_id(d), ext[d]);
  EXPECT_EQ(std::vector<std::uint32_t>(s.doc_lengths().begin(), s.doc_lengths().end()),
            (std::vector<std::uint32_t>{4, 1, 3, 2}));
  const double gs[4] = {0.3 + 0.7 * 3 / 4.74, 0.3 + 0.7 * 1 / 1.66, 0.3 + 0.7 * 2 / 3.38,
                        0.3 + 0.7 * 1 / 2.02};
  for (DocId d = 0; d < 4; ++d) {
    EXPECT_NEAR(s.global_scores()[d], gs[d], 1e-6);
    EXPECT_FLOAT_EQ(s.pagerank()[d], 1.0f);
    EXPECT_EQ(s.global_ranks()[d], d);
  }
  struct Expect {
    std::string term;
    std::vector<DocId> docs;
    std::vector<std::uint32_t> freqs;
  };
  const std::vector<Expect> lists = {{"a", {0, 2}, {1, 2}}, {"b", {2, 3}, {1, 1}},
                                     {"c", {0, 3}, {3, 1}}, {"d", {1}, {1}}};
  std::vector<DocId> docs;
  std::vector<std::uint32_t> freqs;
  for (std::size_t i = 0; i < lists.size(); ++i) {
    const auto t = s.find_term(lists[i].term);
    ASSERT_TRUE(t.has_value()) << lists[i].term;
    EXPECT_EQ(*t, TermId(i));  // lexicographic ids
    s.decode_list(*t, docs, freqs);
    EXPECT_EQ(docs, lists[i].docs) << lists[i].term;
    EXPECT_EQ(freqs, lists[i].freqs) << lists[i].term;
    EXPECT_EQ(s.term(*t).df_global, lists[i].docs.size());
    EXPECT_EQ(s.term(*t).num_blocks, 1u);
  }
  EXPECT_FALSE(s.find_term("e").has_value());
  EXPECT_FALSE(s.find_term("").has_value());
  // Block and list maxima bound every impact of the list.
  const auto t = *s.find_term("c");
  const double norm_d3 = 1.2 * (0.25 + 0.75 * 4 / 2.5);
  EXPECT_GE(s.term(t).max_impact, 3 / (3 + norm_d3));
  EXPECT_LE(s.term(t).max_impact, 3 / (3 + norm_d3) + 1e-6);
  EXPECT_EQ(s.block_max_impact()[s.term(t).first_block], s.term(t).max_impact);
}

TEST(IndexBuilder, LinksGivePageRankAndLongListsSpanBlocks) {
  TempDir tmp;
  std::string corpus;
  // 600 documents all containing "common"; every document links to doc 0 and doc 1.
  for (int i = 0; i < 600; ++i)
    corpus += "{\"id\": \"p" + std::to_string(i) + "\", \"contents\": \"common word" +
              std::to_string(i % 7) + "\", \"links\": [\"p0\", \"p1\", \"missing\"]}\n";
  write_text(tmp / "c.jsonl", corpus);
  const auto report = build_index_from_corpus({tmp / "c.jsonl"}, {}, quiet_options(tmp / "idx"));
  EXPECT_EQ(report.at("pagerank").at("dropped_links").get<int>(), 600);
  const Index index = Index::open(tmp / "idx");
  const ShardIndex& s = index.shard(0);
  EXPECT_TRUE(s.params().has_links);
  EXPECT_GT(s.params().pagerank_iterations, 1);
  // The two link targets have the largest PageRank and so the largest GS: docIDs 0 and 1.
  EXPECT_FLOAT_EQ(s.pagerank()[0], 1.0f);
  EXPECT_TRUE((s.external_id(0) == "p0" && s.external_id(1) == "p1") ||
              (s.external_id(0) == "p1" && s.external_id(1) == "p0"));
  const TermId common = *s.find_term("common");
  EXPECT_EQ(s.term(common).df_shard, 600u);
  EXPECT_EQ(s.term(common).num_blocks, 5u);
  std::vector<DocId> docs;
  std::vector<std::uint32_t> freqs;
  s.decode_list(common, docs, freqs);
  for (DocId d = 0; d < 600; ++d) EXPECT_EQ(docs[d], d);
  for (std::size_t b = 0; b < 5; ++b)
    EXPECT_EQ(s.block_last_docid()[s.term(common).first_block + b], std::min<DocId>(127 + 128 * b, 599));
}

TEST(IndexBuilder, GlobalScoreOrderIsNonIncreasingAndRanksArePermutation) {
  TempDir tmp;
  BuildOptions o = quiet_options(tmp / "idx");
  o.num_shards = 3;
  SyntheticParams p = SyntheticParams::parse("docs=3000,seed=11,train_queries=10,test_queries=10");
  build_index_synthetic(p, o);
  const Index index = Index::open(tmp / "idx");
  std::vector<bool> seen(3000, false);
  for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
    const auto gs = index.shard(s).global_scores();
    const auto ranks = index.shard(s).global_ranks();
    for (std::size_t d = 1; d < gs.size(); ++d) {
      EXPECT_LE(gs[d], gs[d - 1]);
      EXPECT_LT(ranks[d - 1], ranks[d]);  // local order is the global order restricted
    }
    for (auto r : ranks) {
      ASSERT_LT(r, 3000u);
      EXPECT_FALSE(seen[r]);
      seen[r] = true;
    }
  }
}

TEST(IndexBuilder, SyntheticStreamEqualsGeneratedTextIndexed) {
  TempDir tmp;
  const SyntheticParams p = SyntheticParams::parse("docs=1500,seed=5,train_queries=5,test_queries=5");
  SyntheticCollection(p).write(tmp / "coll", /*gzip=*/true, /*progress=*/false);
  build_index_from_corpus({tmp / "coll" / "corpus.jsonl.gz"}, {}, quiet_options(tmp / "text"));
  build_index_synthetic(p, quiet_options(tmp / "stream"));
  const auto a = read_shard_manifest(tmp / "text" / "shard-0000" / "shard.json");
  const auto b = read_shard_manifest(tmp / "stream" / "shard-0000" / "shard.json");
  EXPECT_EQ(a.num_postings, b.num_postings);
  for (const auto& [name, rec] : a.files) {
    EXPECT_EQ(rec.bytes, b.files.at(name).bytes) << name;
    EXPECT_EQ(rec.xxh3, b.files.at(name).xxh3) << name;
  }
  EXPECT_EQ(gpusearch::testing::read_text(tmp / "coll" / "queries.test.tsv"),
            gpusearch::testing::read_text(tmp / "stream" / "queries.test.tsv"));
}

TEST(IndexBuilder, TrecCorpusWithHtmlAndHeaders) {
  TempDir tmp;
  write_text(tmp / "c.trec",
             "<DOC>\n<DOCNO> GX000-01 </DOCNO>\n<DOCHDR>\nhttp://x.gov/ Server: apache\n</DOCHDR>\n"
             "<html><body>Alpha beta</body></html>\n</DOC>\n"
             "<DOC><DOCNO>GX000-02</DOCNO>beta gamma</DOC>\n");
  build_index_from_corpus({tmp / "c.trec"}, {}, quiet_options(tmp / "idx"));
  const Index index = Index::open(tmp / "idx");
  const ShardIndex& s = index.shard(0);
  EXPECT_EQ(s.num_docs(), 2u);
  EXPECT_TRUE(s.find_term("alpha"));
  EXPECT_FALSE(s.find_term("apache"));  // header skipped
  EXPECT_FALSE(s.find_term("html"));    // tags removed
  EXPECT_EQ(s.params().collection.total_tokens, 4u);
}

}  // namespace
