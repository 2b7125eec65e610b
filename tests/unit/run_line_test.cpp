// The aggregator's run lines (append_run_line, formatted by hand for speed) are the bytes of
// write_run_line (fmt's "{} Q0 {} {} {:.9g} {}"): every run file stays the same bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "common/run_file.hpp"

using namespace gpusearch;

namespace {

std::string written(std::string_view qid, std::string_view docid, int rank, double score,
                    std::string_view tag) {
  std::ostringstream out;
  write_run_line(out, qid, docid, rank, score, tag);
  return out.str();
}

}  // namespace

TEST(RunFile, AppendedLinesAreWriteRunLinesBytes) {
  std::mt19937_64 rng(31);
  std::vector<double> scores = {0.0,
                                -0.0,
                                1.0,
                                0.5,
                                1e9,
                                999999999.5,  // rounds up into the exponent form
                                9999999995.0,
                                0.0001,
                                0.00001,  // the switch to the exponent form
                                123456789012.0,
                                -17.25,
                                std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN()};
  std::uniform_real_distribution<double> bm25(0, 60);
  for (int i = 0; i < 200000; ++i) scores.push_back(bm25(rng));
  // Values of few bits: exact decimal ties at the ninth digit, which must round alike.
  for (int i = 0; i < 100000; ++i)
    scores.push_back(std::ldexp(double(rng() % 100000000), -int(rng() % 40)));
  for (int i = 0; i < 100000; ++i) {  // any bit pattern
    const std::uint64_t bits = rng();
    double x;
    std::memcpy(&x, &bits, sizeof x);
    scores.push_back(x);
  }
  std::string lines;  // appended to one buffer, as the run writer does
  std::string expected;
  int differ = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const std::string qid = "q" + std::to_string(i % 1000);
    const std::string docid(i % 37, char('a' + i % 26));  // empty to past the SSO buffer
    const int rank = i % 3 == 0 ? int(i) : int(i % 11);
    const std::size_t at = lines.size();
    append_run_line(lines, qid, docid, rank, scores[i], "tag");
    const std::string want = written(qid, docid, rank, scores[i], "tag");
    if (lines.compare(at, std::string::npos, want) != 0 && ++differ <= 5)
      ADD_FAILURE() << "score " << scores[i] << ": '" << lines.substr(at) << "' against '" << want
                    << "'";
    expected += want;
  }
  EXPECT_EQ(differ, 0);
  EXPECT_TRUE(lines == expected);
  std::string one;
  append_run_line(one, "7", "doc-1", 3, 12.3456789012, "gs");
  EXPECT_EQ(one, "7 Q0 doc-1 3 12.3456789 gs\n");
}
