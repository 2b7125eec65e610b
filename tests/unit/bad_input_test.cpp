// Bad input of every kind gets a clear error naming the input (file and line where there is
// one), and with --skip-bad loses nothing silently.
#include <gtest/gtest.h>

#include <zlib.h>

#include <fstream>

#include "common/query.hpp"
#include "common/shard_index.hpp"
#include "partition/index_builder.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using namespace gpusearch::testing;

namespace {

std::string index_cmd(const TempDir& tmp, const std::string& corpus, const std::string& extra = "") {
  return "index --corpus " + (tmp / corpus).string() + " --out " + (tmp / "idx").string() + " " + extra;
}

TEST(BadCorpus, MalformedJsonLineNamesFileAndLine) {
  TempDir tmp;
  write_text(tmp / "c.jsonl", "{\"id\": \"a\", \"contents\": \"x\"}\n{\"id\": \"b\", \"contents\": \n{\"id\": \"c\", \"contents\": \"y\"}\n");
  auto r = run_gpusearch(index_cmd(tmp, "c.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("c.jsonl:2: malformed JSON line"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--skip-bad"), std::string::npos);
  r = run_gpusearch(index_cmd(tmp, "c.jsonl", "--skip-bad"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipped 1 malformed documents"), std::string::npos) << r.output;
  EXPECT_EQ(Index::open(tmp / "idx").params().collection.num_docs, 2u);
}

TEST(BadCorpus, EveryKindOfBadDocumentIsNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"contents\": \"no id\"}\n", "c.jsonl:1: document has no \"id\""},
      {"{\"id\": \"a\"}\n", "c.jsonl:1: document a has no \"contents\""},
      {"{\"id\": \"a\", \"contents\": 5}\n", "c.jsonl:1: text fields must be strings"},
      {"{\"id\": \"a\", \"contents\": \"x\", \"links\": \"b\"}\n", "c.jsonl:1: \"links\" must be a list"},
      {"[1, 2]\n", "c.jsonl:1: malformed JSON line"},
      {"{\"id\": \"a\", \"contents\": \"x\"}\n{\"id\": \"a\", \"contents\": \"y\"}\n",
       "c.jsonl:2: duplicate document id 'a'"},
  };
  for (const auto& [text, message] : cases) {
    TempDir tmp;
    write_text(tmp / "c.jsonl", text);
    const auto r = run_gpusearch(index_cmd(tmp, "c.jsonl"));
    EXPECT_EQ(r.exit_code, 1) << text;
    EXPECT_NE(r.output.find(message), std::string::npos) << "expected '" << message << "' in: " << r.output;
  }
}

TEST(BadCorpus, TrecDocumentsWithoutDocnoOrEnd) {
  TempDir tmp;
  write_text(tmp / "c.trec", "<DOC>\n<DOCNO>a</DOCNO>\nfine\n</DOC>\n<DOC>\nno number\n</DOC>\n<DOC>\n<DOCNO>c</DOCNO>\nunclosed\n<DOC>\n<DOCNO>d</DOCNO> ok </DOC>\n");
  auto r = run_gpusearch(index_cmd(tmp, "c.trec"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("c.trec:5: <DOC> without <DOCNO>"), std::string::npos) << r.output;
  r = run_gpusearch(index_cmd(tmp, "c.trec", "--skip-bad"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipped 2 malformed documents"), std::string::npos) << r.output;
  const Index index = Index::open(tmp / "idx");
  EXPECT_EQ(index.params().collection.num_docs, 2u);  // a and d survive
}

TEST(BadCorpus, GzipCorpusIsRead) {
  TempDir tmp;
  gzFile f = gzopen((tmp / "c.jsonl.gz").c_str(), "wb");
  const std::string text = "{\"id\": \"a\", \"contents\": \"hello world\"}\n";
  gzwrite(f, text.data(), unsigned(text.size()));
  gzclose(f);
  const auto r = run_gpusearch(index_cmd(tmp, "c.jsonl.gz"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(BadCorpus, EmptyCorpusAndMissingFile) {
  TempDir tmp;
  write_text(tmp / "c.jsonl", "\n\n");
  auto r = run_gpusearch(index_cmd(tmp, "c.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no documents"), std::string::npos) << r.output;
  r = run_gpusearch(index_cmd(tmp, "missing.jsonl"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("missing.jsonl"), std::string::npos) << r.output;
}

class BadIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    BuildOptions o;
    o.out_dir = tmp_ / "idx";
    o.progress = false;
    build_index_synthetic(SyntheticParams::parse("docs=300,seed=1,train_queries=2,test_queries=20"), o);
  }
  std::string open_error() {
    try {
      Index::open(tmp_ / "idx");
    } catch (const IndexFormatError& e) {
      return e.what();
    }
    return "";
  }
  std::filesystem::path shard_file(const std::string& name) { return tmp_ / "idx" / "shard-0000" / name; }
  TempDir tmp_;
};

TEST_F(BadIndex, TruncatedFileIsNamed) {
  std::filesystem::resize_file(shard_file("postings.bin"), std::filesystem::file_size(shard_file("postings.bin")) - 4);
  const std::string e = open_error();
  EXPECT_NE(e.find("postings.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST_F(BadIndex, CorruptByteIsCaughtByChecksum) {
  {
    std::fstream f(shard_file("docs.length"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(17);
    f.put('\x7f');
  }
  const std::string e = open_error();
  EXPECT_NE(e.find("docs.length"), std::string::npos) << e;
  EXPECT_NE(e.find("checksum"), std::string::npos) << e;
}

TEST_F(BadIndex, WrongFormatVersionIsNamed) {
  std::string m = read_text(shard_file("shard.json"));
  const auto p = m.find("\"format_version\": 1");
  ASSERT_NE(p, std::string::npos);
  m.replace(p, 19, "\"format_version\": 99");
  write_text(shard_file("shard.json"), m);
  const std::string e = open_error();
  EXPECT_NE(e.find("shard.json"), std::string::npos) << e;
  EXPECT_NE(e.find("format version 99"), std::string::npos) << e;
}

TEST_F(BadIndex, MissingFilesAndGarbageManifest) {
  std::filesystem::remove(shard_file("blocks.offsets"));
  std::string e = open_error();
  EXPECT_NE(e.find("blocks.offsets"), std::string::npos) << e;
  write_text(tmp_ / "idx" / "manifest.json", "{not json");
  e = open_error();
  EXPECT_NE(e.find("manifest.json"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  const auto r = run_gpusearch("info --index " + (tmp_ / "idx").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("manifest.json"), std::string::npos);
}

TEST_F(BadIndex, ExistingIndexIsNotOverwrittenWithoutForce) {
  auto r = run_gpusearch("index --synthetic docs=100 --out " + (tmp_ / "idx").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--force"), std::string::npos) << r.output;
  r = run_gpusearch("index --synthetic docs=100 --force --out " + (tmp_ / "idx").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(BadIndex, BadQueriesAreReportedAndCountedNotLost) {
  std::string huge = "9\t";
  for (int i = 0; i < 100; ++i) huge += "w" + std::to_string(i) + " ";
  write_text(tmp_ / "q.tsv", "1\tzzzunknownzzz\nno tab here\n\tno id\n2\t   \n" + huge + "\n3\t" +
                                 read_text(tmp_ / "idx" / "queries.test.tsv").substr(2, 40) + "\n");
  const auto r = run_gpusearch("search --index " + (tmp_ / "idx").string() + " --queries " +
                               (tmp_ / "q.tsv").string() + " --run " + (tmp_ / "run").string() +
                               " --metrics " + (tmp_ / "m.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("q.tsv:2: query: malformed line"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("q.tsv:3: query: malformed line: empty query id"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("q.tsv:4: query 2: empty query"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("query 9: query has more than 64 distinct terms"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("4 skipped, 1 with no known terms"), std::string::npos) << r.output;
}

TEST(BadFlags, ClearErrors) {
  TempDir tmp;
  auto r = run_gpusearch("index --synthetic docs=10,colour=red --out " + (tmp / "i").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("unknown key 'colour'"), std::string::npos) << r.output;
  r = run_gpusearch("index --synthetic docs=100 --shards 0 --out " + (tmp / "i").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--shards"), std::string::npos) << r.output;
  r = run_gpusearch("index --synthetic docs=100 --codec zip --out " + (tmp / "i").string());
  EXPECT_NE(r.output.find("unknown codec 'zip'"), std::string::npos) << r.output;
  r = run_gpusearch("index --synthetic docs=50 --out " + (tmp / "i").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_gpusearch("search --index " + (tmp / "i").string() + " --queries " + (tmp / "i" / "queries.test.tsv").string() +
                    " --mode xor --run " + (tmp / "r").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("unknown mode 'xor'"), std::string::npos) << r.output;
  r = run_gpusearch("search --index " + (tmp / "i").string() + " --queries " + (tmp / "i" / "queries.test.tsv").string() +
                    " --engine warp --run " + (tmp / "r").string());
  EXPECT_NE(r.output.find("unknown engine 'warp'"), std::string::npos) << r.output;
  // The online list cache's sample: 0 would mean nothing replayed, not "off".
  r = run_gpusearch("search --index " + (tmp / "i").string() + " --queries " + (tmp / "i" / "queries.test.tsv").string() +
                    " --cache-sample 0 --run " + (tmp / "r").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--cache-sample"), std::string::npos) << r.output;
  r = run_gpusearch("frobnicate");
  EXPECT_NE(r.exit_code, 0);
}

TEST(QueryFiles, TrecTopicsAreRead) {
  std::istringstream in("<top>\n<num> Number: 301\n<title> International Organized Crime\n<desc> x\n</top>\n"
                        "<top>\n<num> Number: 302\n<title> Poliomyelitis\n</top>\n");
  const QueryFile f = read_query_stream(in, "topics");
  ASSERT_EQ(f.queries.size(), 2u);
  EXPECT_EQ(f.queries[0].id, "301");
  EXPECT_EQ(f.queries[0].text, "International Organized Crime");
  EXPECT_EQ(f.queries[1].id, "302");
}

}  // namespace
