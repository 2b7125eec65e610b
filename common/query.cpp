#include "common/query.hpp"

#include "common/ranker/store_index.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/shard_index.hpp"
#include "common/term_dictionary.hpp"
#include "common/tokenizer.hpp"

namespace gpusearch {

std::string QueryProblem::message() const {
  return fmt::format("{}:{}: query{}{}: {}", source, line, qid.empty() ? "" : " ", qid, what);
}

namespace {

std::string_view trim(std::string_view s) {
  const auto ws = " \t\r\n\f\v";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// TREC topics: <top> <num> Number: 301 <title> text ... </top>. The title is the query.
void parse_trec_topics(const std::string& all, const std::string& source, QueryFile& out) {
  std::size_t pos = 0;
  auto line_of = [&](std::size_t off) {
    return std::uint64_t(std::count(all.begin(), all.begin() + std::ptrdiff_t(off), '\n')) + 1;
  };
  while ((pos = all.find("<top>", pos)) != std::string::npos) {
    const std::size_t end = all.find("</top>", pos);
    const std::size_t stop = end == std::string::npos ? all.size() : end;
    const std::string_view topic(all.data() + pos, stop - pos);
    const std::uint64_t line = line_of(pos);
    auto tag_text = [&](std::string_view tag) -> std::string_view {
      const auto t = topic.find(tag);
      if (t == std::string_view::npos) return {};
      auto rest = topic.substr(t + tag.size());
      const auto next = rest.find('<');
      return trim(rest.substr(0, next));
    };
    std::string_view num = tag_text("<num>");
    if (num.starts_with("Number:")) num = trim(num.substr(7));
    const std::string_view title = tag_text("<title>");
    if (end == std::string::npos) {
      out.problems.push_back({source, line, escape_query_id(num), "topic has no </top>"});
      break;
    }
    if (num.empty()) out.problems.push_back({source, line, "", "topic has no <num>"});
    else if (std::string why = query_id_problem(num); !why.empty())
      out.problems.push_back({source, line, escape_query_id(num), "malformed topic: " + why});
    else out.queries.push_back({std::string(num), std::string(title), line, {}});
    pos = end + 6;
  }
}

}  // namespace

std::string escape_query_id(std::string_view id) {
  std::string out;
  const std::size_t n = std::min<std::size_t>(id.size(), 64);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    if (c >= 0x21 && c < 0x7f && c != '\\') out += char(c);
    else out += fmt::format("\\x{:02x}", unsigned(c));
  }
  if (id.size() > n) out += "...";
  return out;
}

std::string query_id_problem(std::string_view id) {
  if (id.empty()) return "empty query id";
  if (id.size() > kMaxQueryIdBytes)
    return fmt::format("query id of {} bytes, over the limit of {}", id.size(), kMaxQueryIdBytes);
  // Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
  for (std::size_t i = 0; i < id.size();) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    std::uint32_t cp = 0;
    std::size_t len = 0;
    if (c < 0x80) cp = c, len = 1;
    else if (c >= 0xc2 && c <= 0xdf) cp = c & 0x1f, len = 2;
    else if (c >= 0xe0 && c <= 0xef) cp = c & 0x0f, len = 3;
    else if (c >= 0xf0 && c <= 0xf4) cp = c & 0x07, len = 4;
    else return fmt::format("query id is not valid UTF-8 (byte 0x{:02x} at {})", unsigned(c), i);
    if (i + len > id.size()) return fmt::format("query id is not valid UTF-8 (truncated at {})", i);
    for (std::size_t j = 1; j < len; ++j) {
      const unsigned char d = static_cast<unsigned char>(id[i + j]);
      if ((d & 0xc0) != 0x80)
        return fmt::format("query id is not valid UTF-8 (byte 0x{:02x} at {})", unsigned(d), i + j);
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return fmt::format("query id is not valid UTF-8 (bad sequence at {})", i);
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f))
      return fmt::format("query id has a control character (U+{:04X} at byte {})", cp, i);
    const bool space = cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
                       (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
                       cp == 0x202f || cp == 0x205f || cp == 0x3000 || cp == 0xfeff;
    if (space) return fmt::format("query id has whitespace (U+{:04X} at byte {})", cp, i);
    i += len;
  }
  return "";
}

bool parse_tsv_query_line(std::string_view line, std::uint64_t line_no, QueryText& out,
                          QueryProblem& problem, const std::string& source_name) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const auto tab = line.find('\t');
  if (tab == std::string_view::npos) {
    problem = {source_name, line_no, "", "malformed line: expected qid<TAB>text"};
    return false;
  }
  const std::string_view qid = trim(line.substr(0, tab));
  if (qid.empty()) {
    problem = {source_name, line_no, "", "malformed line: empty query id"};
    return false;
  }
  if (std::string why = query_id_problem(qid); !why.empty()) {
    problem = {source_name, line_no, escape_query_id(qid), "malformed line: " + why};
    return false;
  }
  std::string_view text = line.substr(tab + 1), ranker;
  if (const auto tab2 = text.find('\t'); tab2 != std::string_view::npos) {
    ranker = trim(text.substr(tab2 + 1));
    text = text.substr(0, tab2);
    if (ranker.find('\t') != std::string_view::npos) {
      problem = {source_name, line_no, std::string(qid),
                 "malformed line: more than three columns (qid<TAB>text<TAB>ranker)"};
      return false;
    }
    if (!ranker.empty() && !ranker::valid_ranker_name(ranker)) {
      problem = {source_name, line_no, std::string(qid),
                 "malformed line: '" + escape_query_id(ranker) +
                     "' is not a ranker name (1-128 of A-Z a-z 0-9 . _ -)"};
      return false;
    }
  }
  out = {std::string(qid), std::string(text), line_no, std::string(ranker)};
  return true;
}

QueryFile read_query_stream(std::istream& in, const std::string& source_name) {
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string all = buf.str();
  QueryFile out;
  if (all.find("<top>") != std::string::npos) {
    parse_trec_topics(all, source_name, out);
    return out;
  }
  std::size_t start = 0;
  std::uint64_t line_no = 0;
  while (start < all.size()) {
    std::size_t nl = all.find('\n', start);
    if (nl == std::string::npos) nl = all.size();
    const std::string_view line(all.data() + start, nl - start);
    ++line_no;
    start = nl + 1;
    if (trim(line).empty()) continue;  // blank lines are not queries
    QueryText q;
    QueryProblem p;
    if (parse_tsv_query_line(line, line_no, q, p, source_name)) out.queries.push_back(std::move(q));
    else out.problems.push_back(std::move(p));
  }
  return out;
}

std::vector<Query> read_known_queries(const ShardIndex& vocabulary,
                                      const std::filesystem::path& path, std::size_t limit,
                                      const std::string& source_name) {
  std::vector<Query> out;
  const std::string name = source_name.empty() ? path.string() : source_name;
  for (const QueryText& qt : read_query_file(path).queries) {
    if (out.size() >= limit) break;
    Query q;
    QueryProblem problem;
    if (resolve_query(vocabulary, qt, QueryLimits{}, q, problem, name) && !q.terms.empty())
      out.push_back(std::move(q));
  }
  return out;
}

QueryFile read_query_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), 0, "cannot open query file");
  return read_query_stream(in, path.string());
}

namespace {

template <class FindTerm>
bool resolve_with(FindTerm&& find_term, const QueryText& text, const QueryLimits& limits,
                  Query& out, QueryProblem& problem, const std::string& source_name) {
  out = Query{};
  out.id = text.id;
  out.ranker = text.ranker;
  if (text.text.size() > limits.max_text_bytes) {
    problem = {source_name, text.line, text.id,
               fmt::format("query text is {} bytes, over the limit of {}", text.text.size(),
                           limits.max_text_bytes)};
    return false;
  }
  std::size_t tokens = 0;
  std::vector<std::string> distinct;  // all distinct tokens, known or not: what "huge" counts
  distinct.reserve(8);
  out.terms.reserve(8);
  for_each_token(text.text, [&](std::string_view tok) {
    ++tokens;
    if (distinct.size() <= limits.max_terms &&
        std::find(distinct.begin(), distinct.end(), tok) == distinct.end())
      distinct.emplace_back(tok);
    if (auto t = find_term(tok)) {
      if (std::find(out.terms.begin(), out.terms.end(), *t) == out.terms.end())
        out.terms.push_back(*t);
    } else {
      ++out.unknown_tokens;
    }
  });
  if (tokens == 0) {
    problem = {source_name, text.line, text.id, "empty query (no tokens)"};
    return false;
  }
  if (distinct.size() > limits.max_terms) {
    problem = {source_name, text.line, text.id,
               fmt::format("query has more than {} distinct terms (--max-query-terms)",
                           limits.max_terms)};
    return false;
  }
  return true;
}

}  // namespace

bool resolve_query(const ShardIndex& vocabulary, const QueryText& text, const QueryLimits& limits,
                   Query& out, QueryProblem& problem, const std::string& source_name) {
  return resolve_with([&](std::string_view tok) { return vocabulary.find_term(tok); }, text,
                      limits, out, problem, source_name);
}

bool resolve_query(const TermDictionary& vocabulary, const QueryText& text,
                   const QueryLimits& limits, Query& out, QueryProblem& problem,
                   const std::string& source_name) {
  return resolve_with([&](std::string_view tok) { return vocabulary.find(tok); }, text, limits,
                      out, problem, source_name);
}

}  // namespace gpusearch
