// The aggregator's term look-up (common/term_dictionary.hpp) answers exactly as the lexicon's
// binary search: every term of the vocabulary to its own ID, anything else to none, and query
// resolution through either gives the same queries.
#include <gtest/gtest.h>

#include <random>

#include "common/huge_page_array.hpp"
#include "common/query.hpp"
#include "common/shard_index.hpp"
#include "common/term_dictionary.hpp"
#include "common/tokenizer.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

TEST(TermDictionary, FindsWhatTheLexiconFinds) {
  TempDir tmp;
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  build_index_synthetic(
      SyntheticParams::parse("docs=3000,seed=9,train_queries=2,test_queries=200,mean_length=120"),
      o);
  const Index index = Index::open(tmp / "idx");
  const ShardIndex& shard = index.shard(0);
  const TermDictionary dict(shard);
  ASSERT_GT(shard.num_terms(), 1000u);
  EXPECT_EQ(dict.size(), shard.num_terms());
  for (TermId t = 0; t < shard.num_terms(); ++t) {
    const std::string_view s = shard.term_string(t);
    ASSERT_EQ(dict.find(s), std::optional<TermId>(t)) << s;
    ASSERT_EQ(dict.df_global(t), shard.term(t).df_global) << s;
    // Neighbours of a known term (a prefix, an extension, one letter changed) are what the
    // lexicon says they are: usually unknown.
    std::string longer(s), shorter(s.substr(0, s.size() - 1)), changed(s);
    longer += 'q';
    changed[0] = changed[0] == 'z' ? 'a' : char(changed[0] + 1);
    for (const std::string& x : {longer, shorter, changed})
      ASSERT_EQ(dict.find(x), shard.find_term(x)) << x;
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 20000; ++i) {
    std::string x(1 + rng() % 12, 'a');
    for (char& c : x) c = char('a' + rng() % 26);
    ASSERT_EQ(dict.find(x), shard.find_term(x)) << x;
  }
  EXPECT_FALSE(dict.find("").has_value() && !shard.find_term("").has_value());

  const QueryFile f = read_query_file(tmp / "idx" / "queries.test.tsv");
  ASSERT_GT(f.queries.size(), 100u);
  // Prefetching (the aggregator's admission: every stage over a batch's terms, known or not,
  // an empty one and one past the end of nothing) is a hint: the answers stay the same.
  for (int stage = -1; stage < 4; ++stage) {
    for (const QueryText& qt : f.queries)
      for_each_token(qt.text, [&](std::string_view tok) { dict.prefetch(tok, stage); });
    for (std::string_view x : {"", "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqq", "a"}) dict.prefetch(x, stage);
  }
  for (TermId t = 0; t < shard.num_terms(); ++t)
    ASSERT_EQ(dict.find(shard.term_string(t)), std::optional<TermId>(t));
  for (const QueryText& qt : f.queries) {
    Query a, b;
    QueryProblem pa, pb;
    const bool ra = resolve_query(shard, qt, {}, a, pa, "test");
    const bool rb = resolve_query(dict, qt, {}, b, pb, "test");
    ASSERT_EQ(ra, rb);
    EXPECT_EQ(a.terms, b.terms) << qt.id;
    EXPECT_EQ(a.unknown_tokens, b.unknown_tokens);
  }
}

// The dictionary's storage: zero-filled, writable, moved without a copy, freed once.
TEST(HugePageArray, ZeroFilledWritableAndMovable) {
  HugePageArray<std::uint64_t> a(3u << 20);  // 24 MiB: several huge pages where given
  ASSERT_EQ(a.size(), 3u << 20);
  for (std::size_t i = 0; i < a.size(); i += 4099) ASSERT_EQ(a[i], 0u) << i;
  for (std::size_t i = 0; i < a.size(); i += 4099) a[i] = i + 1;
  const std::uint64_t* data = a.data();
  HugePageArray<std::uint64_t> b(std::move(a));
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), data);
  for (std::size_t i = 0; i < b.size(); i += 4099) ASSERT_EQ(b[i], i + 1) << i;
  HugePageArray<std::uint64_t> c(5);
  c = std::move(b);
  EXPECT_EQ(c.data(), data);
  EXPECT_EQ(HugePageArray<char>(0).size(), 0u);
}

// OpenOptions::external_ids_in_huge_pages (the ISN's --id-table huge-pages): the same id for
// every document as the mapped files give, read from the copy, not from the mapping.
TEST(ShardIndex, ExternalIdsInHugePagesAreTheMappedOnes) {
  TempDir tmp;
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  build_index_synthetic(
      SyntheticParams::parse("docs=2500,seed=4,train_queries=2,test_queries=10,mean_length=60"),
      o);
  const Index mapped = Index::open(tmp / "idx");
  OpenOptions huge;
  huge.external_ids_in_huge_pages = true;
  const Index copied = Index::open(tmp / "idx", huge);
  const ShardIndex& a = mapped.shard(0);
  const ShardIndex& b = copied.shard(0);
  ASSERT_EQ(a.num_docs(), 2500u);
  ASSERT_EQ(b.num_docs(), a.num_docs());
  for (DocId d = 0; d < a.num_docs(); ++d) {
    ASSERT_FALSE(a.external_id(d).empty()) << d;
    ASSERT_EQ(b.external_id(d), a.external_id(d)) << d;
    // The copy's own memory: not the same bytes as the mapping's.
    ASSERT_NE(b.external_id(d).data(), a.external_id(d).data()) << d;
  }
}
