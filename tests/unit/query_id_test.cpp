// Query ids end up as the first field of TREC run lines: an id that whitespace, control bytes or
// invalid UTF-8 could split or corrupt makes its line malformed (issue 14).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "common/query.hpp"

using namespace gpusearch;

TEST(QueryIds, ValidIdsAreAccepted) {
  for (const std::string& id : std::vector<std::string>{"1", "q-301", "topic_7.b", "\xc3\xa9t\xc3\xa9", "\xe6\x97\xa5",
                               "\xf0\x9f\x98\x80", std::string(kMaxQueryIdBytes, 'a')})
    EXPECT_EQ(query_id_problem(id), "") << escape_query_id(id);
}

TEST(QueryIds, EachKindOfBadIdIsNamed) {
  struct Case {
    std::string id, expect;
  };
  const Case cases[] = {
      {"", "empty"},
      {std::string(kMaxQueryIdBytes + 1, 'a'), "over the limit of 256"},
      {"a b", "whitespace"},
      {"a\xc2\xa0" "b", "whitespace"},          // U+00A0 no-break space
      {"a\xe3\x80\x80" "b", "whitespace"},      // U+3000 ideographic space
      {std::string("a\0b", 3), "control character"},
      {"a\x1b[31mb", "control character"},      // an escape sequence
      {"a\x7f", "control character"},           // DEL
      {"a\xc2\x85", "control character"},       // U+0085 NEL (a C1 control)
      {"a\xc2\x9b", "control character"},       // C1 CSI
      {"\xff\xfe", "not valid UTF-8"},
      {"\xc0\xaf", "not valid UTF-8"},           // overlong '/'
      {"\xed\xa0\x80", "not valid UTF-8"},       // a surrogate
      {"\xf4\x90\x80\x80", "not valid UTF-8"},   // above U+10FFFF
      {"ab\xe6\x97", "not valid UTF-8"},         // truncated
      {"a\xe6(b", "not valid UTF-8"},            // bad continuation
  };
  for (const Case& c : cases) {
    const std::string why = query_id_problem(c.id);
    EXPECT_NE(why.find(c.expect), std::string::npos) << escape_query_id(c.id) << ": " << why;
  }
}

TEST(QueryIds, MalformedTsvLinesAreReportedWithFileAndLineAndSkipped) {
  std::istringstream in(std::string("good1\tfirst query\n"
                                    "\x8f\xff\x01garbage\tsecond\n"
                                    "two words\tthird\n"
                                    "good2\tfourth\n") +
                        std::string(300, 'x') + "\tfifth\n");
  const QueryFile f = read_query_stream(in, "queries.tsv");
  ASSERT_EQ(f.queries.size(), 2u);
  EXPECT_EQ(f.queries[0].id, "good1");
  EXPECT_EQ(f.queries[1].id, "good2");
  EXPECT_EQ(f.queries[1].line, 4u);
  ASSERT_EQ(f.problems.size(), 3u);
  EXPECT_EQ(f.problems[0].line, 2u);
  EXPECT_EQ(f.problems[1].line, 3u);
  EXPECT_EQ(f.problems[2].line, 5u);
  const std::string m = f.problems[0].message();
  EXPECT_EQ(m.rfind("queries.tsv:2:", 0), 0u) << m;
  EXPECT_NE(m.find("not valid UTF-8"), std::string::npos) << m;
  // The message itself stays printable: the bad bytes are escaped.
  for (char c : m) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << m;
  EXPECT_NE(f.problems[1].message().find("whitespace"), std::string::npos);
  EXPECT_NE(f.problems[2].message().find("over the limit"), std::string::npos);
}

TEST(QueryIds, LiveLinesAreCheckedToo) {
  QueryText q;
  QueryProblem p;
  EXPECT_FALSE(parse_tsv_query_line("bad\x01id\ttext", 7, q, p, "<stdin>"));
  EXPECT_EQ(p.line, 7u);
  EXPECT_NE(p.message().find("control character"), std::string::npos);
  EXPECT_TRUE(parse_tsv_query_line("ok\ttext", 8, q, p, "<stdin>"));
  EXPECT_EQ(q.id, "ok");
}

TEST(QueryIds, TrecTopicWithABadNumberIsReported) {
  std::istringstream in(
      "<top>\n<num> Number: 301\n<title> good topic\n</top>\n"
      "<top>\n<num> Number: 3 02\n<title> spaced number\n</top>\n");
  const QueryFile f = read_query_stream(in, "topics.txt");
  ASSERT_EQ(f.queries.size(), 1u);
  EXPECT_EQ(f.queries[0].id, "301");
  ASSERT_EQ(f.problems.size(), 1u);
  EXPECT_EQ(f.problems[0].line, 5u);
  EXPECT_NE(f.problems[0].message().find("whitespace"), std::string::npos);
}
