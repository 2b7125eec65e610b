// TREC run files: "qid Q0 docid rank score tag", ranks from 1.
#pragma once

#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace gpusearch {

struct RunEntry {
  std::string docid;
  int rank = 0;
  double score = 0;
};

// One query's lines. Scores are printed with 9 significant digits, enough to compare runs
// within the exactness tolerance.
void write_run_line(std::ostream& out, std::string_view qid, std::string_view docid, int rank,
                    double score, std::string_view tag);
// The same bytes appended to `out` (no string per line: the aggregator's run writer formats a
// batch's lines into one buffer and writes it at once).
void append_run_line(std::string& out, std::string_view qid, std::string_view docid, int rank,
                     double score, std::string_view tag);

// Reads and checks a run file: six fields per line, ranks 1, 2, ... per query, scores not
// increasing, no document twice in a query. Throws InputError naming the line otherwise.
std::map<std::string, std::vector<RunEntry>> read_run_file(const std::filesystem::path& path);

}  // namespace gpusearch
