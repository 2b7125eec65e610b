#include "common/run_file.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "common/error.hpp"

namespace gpusearch {

void write_run_line(std::ostream& out, std::string_view qid, std::string_view docid, int rank,
                    double score, std::string_view tag) {
  out << fmt::format("{} Q0 {} {} {:.9g} {}\n", qid, docid, rank, score, tag);
}

void append_run_line(std::string& out, std::string_view qid, std::string_view docid, int rank,
                     double score, std::string_view tag) {
  if (std::isnan(score)) {  // to_chars may write "-nan" where fmt writes "nan"
    fmt::format_to(std::back_inserter(out), FMT_COMPILE("{} Q0 {} {} {:.9g} {}\n"), qid, docid,
                   rank, score, tag);
    return;
  }
  // write_run_line's bytes, by hand: this is the aggregator's run writer's whole work, and fmt
  // spent twice the instructions. std::to_chars(general, 9) is printf's %.9g, as fmt's {:.9g}
  // is (RunFile.AppendedLinesAreWriteRunLinesBytes checks them against each other).
  constexpr std::size_t kNumbers = 64;  // " Q0 ", the rank, the score, spaces and newline
  const std::size_t at = out.size();
  out.resize(at + qid.size() + docid.size() + tag.size() + kNumbers);
  char* p = out.data() + at;
  char* const end = out.data() + out.size();
  auto put = [&p](std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  put(qid);
  put(" Q0 ");
  put(docid);
  *p++ = ' ';
  p = std::to_chars(p, end, rank).ptr;
  *p++ = ' ';
  p = std::to_chars(p, end, score, std::chars_format::general, 9).ptr;
  *p++ = ' ';
  put(tag);
  *p++ = '\n';
  out.resize(std::size_t(p - out.data()));
}

std::map<std::string, std::vector<RunEntry>> read_run_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string(), 0, "cannot open run file");
  std::map<std::string, std::vector<RunEntry>> runs;
  std::map<std::string, std::set<std::string>> seen;
  std::string line;
  std::uint64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::istringstream ls(line);
    std::string qid, q0, docid, tag, extra;
    int rank = 0;
    double score = 0;
    if (!(ls >> qid >> q0 >> docid >> rank >> score >> tag) || (ls >> extra))
      throw InputError(path.string(), line_no, "expected 'qid Q0 docid rank score tag'");
    if (q0 != "Q0") throw InputError(path.string(), line_no, "second field must be Q0");
    auto& entries = runs[qid];
    if (rank != int(entries.size()) + 1)
      throw InputError(
          path.string(), line_no,
          fmt::format("rank {} out of sequence (expected {})", rank, entries.size() + 1));
    if (!entries.empty() && score > entries.back().score)
      throw InputError(path.string(), line_no, "score increases within a query");
    if (!seen[qid].insert(docid).second)
      throw InputError(path.string(), line_no, "document " + docid + " repeated in query " + qid);
    entries.push_back({docid, rank, score});
  }
  return runs;
}

}  // namespace gpusearch
