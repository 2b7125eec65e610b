// Queries: reading TSV (qid<TAB>text) and TREC topic files, and turning text into term ids with
// the index's vocabulary (tokenize, drop unknown terms, de-duplicate in order of appearance).
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.hpp"

namespace gpusearch {

class ShardIndex;
class TermDictionary;

struct QueryText {
  std::string id;
  std::string text;
  std::uint64_t line = 0;  // where it started in its source, for error messages
  std::string ranker;      // TSV's optional third column: the query's second-stage ranker
};

// A problem with one query line: reported and counted, never silently dropped.
struct QueryProblem {
  std::string source;
  std::uint64_t line = 0;
  std::string qid;  // empty when the line had none
  std::string what;
  std::string message() const;
};

struct QueryFile {
  std::vector<QueryText> queries;
  std::vector<QueryProblem> problems;  // malformed lines
};

// A query id goes into TREC run files, where fields are split on whitespace: it must be
// 1..kMaxQueryIdBytes bytes of valid UTF-8 with no whitespace (ASCII or Unicode) and no control
// characters (C0, DEL, C1). Returns why `id` is not one ("" when it is).
inline constexpr std::size_t kMaxQueryIdBytes = 256;
std::string query_id_problem(std::string_view id);
// `id` printable in a message: bytes outside printable ASCII as \xNN, cut at 64 bytes.
std::string escape_query_id(std::string_view id);

// Reads a query file: TREC topics if it contains "<top>", else TSV. Throws InputError only if
// the file cannot be read; malformed lines go to `problems`.
QueryFile read_query_file(const std::filesystem::path& path);
QueryFile read_query_stream(std::istream& in, const std::string& source_name);
// Parses one TSV line, qid<TAB>text[<TAB>ranker] (for live input); returns false and fills
// `problem` if malformed (no tab, a bad id, more than three columns, a bad ranker name).
bool parse_tsv_query_line(std::string_view line, std::uint64_t line_no, QueryText& out,
                          QueryProblem& problem, const std::string& source_name);

struct Query {
  std::string id;
  std::vector<TermId> terms;  // known terms, de-duplicated, in order of first appearance
  std::uint32_t unknown_tokens = 0;
  std::string ranker;  // second-stage ranker ("" : the first stage's order)
};

struct QueryLimits {
  std::size_t max_terms = 64;  // distinct tokens, known or not; longer queries are rejected
  std::size_t max_text_bytes = 1 << 16;
};

// Resolves query text against the vocabulary. Returns false (and fills `problem`) for a query
// that cannot be run: empty text, too long. A query whose terms are all unknown is valid and has
// no terms (it matches nothing).
bool resolve_query(const ShardIndex& vocabulary, const QueryText& text, const QueryLimits& limits,
                   Query& out, QueryProblem& problem, const std::string& source_name);
// The same, looking terms up in a hash table over that vocabulary (the aggregator's hot path).
bool resolve_query(const TermDictionary& vocabulary, const QueryText& text,
                   const QueryLimits& limits, Query& out, QueryProblem& problem,
                   const std::string& source_name);

// The queries of a query file that resolve against `vocabulary` with at least one known term,
// the first `limit` of them, in file order (what tests and benchmarks serve; the others are
// counted where a run reports them). `source_name` names the file in errors.
std::vector<Query> read_known_queries(const ShardIndex& vocabulary,
                                      const std::filesystem::path& path,
                                      std::size_t limit = std::numeric_limits<std::size_t>::max(),
                                      const std::string& source_name = "");

}  // namespace gpusearch
