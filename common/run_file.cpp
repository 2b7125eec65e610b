#include "common/run_file.hpp"

#include <charconv>
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
  fmt::format_to(std::back_inserter(out), FMT_COMPILE("{} Q0 {} {} {:.9g} {}\n"), qid, docid, rank,
                 score, tag);
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
      throw InputError(path.string(), line_no,
                       fmt::format("rank {} out of sequence (expected {})", rank,
                                   entries.size() + 1));
    if (!entries.empty() && score > entries.back().score)
      throw InputError(path.string(), line_no, "score increases within a query");
    if (!seen[qid].insert(docid).second)
      throw InputError(path.string(), line_no, "document " + docid + " repeated in query " + qid);
    entries.push_back({docid, rank, score});
  }
  return runs;
}

}  // namespace gpusearch
