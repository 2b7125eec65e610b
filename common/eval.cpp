#include "common/eval.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/error.hpp"

namespace gpusearch {

namespace {

template <class T>
bool parse_whole(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

// Splits on blanks; a line of only blanks gives no fields.
std::vector<std::string> fields_of(const std::string& line) {
  std::istringstream ls(line);
  std::vector<std::string> out;
  for (std::string f; ls >> f;) out.push_back(std::move(f));
  return out;
}

}  // namespace

Qrels read_qrels(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string(), 0, "cannot open qrels file");
  Qrels qrels;
  std::string line;
  std::uint64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto f = fields_of(line);
    if (f.empty()) continue;
    if (f.size() != 4)
      throw InputError(path.string(), line_no,
                       fmt::format("expected 'qid 0 docid grade' (4 fields), found {}", f.size()));
    int grade = 0;
    if (!parse_whole(f[3], grade))
      throw InputError(path.string(), line_no, fmt::format("grade '{}' is not an integer", f[3]));
    if (!qrels[f[0]].emplace(f[2], grade).second)
      throw InputError(path.string(), line_no,
                       fmt::format("document {} judged twice for query {}", f[2], f[0]));
  }
  return qrels;
}

EvalRun read_eval_run(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string(), 0, "cannot open run file");
  struct Line {
    JudgedRunDoc doc;
    long rank;
    std::uint64_t line_no;
  };
  std::map<std::string, std::vector<Line>> lines;
  std::map<std::string, std::set<std::string>> seen;
  std::string line;
  std::uint64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto f = fields_of(line);
    if (f.empty()) continue;
    if (f.size() != 6)
      throw InputError(path.string(), line_no,
                       fmt::format("expected 'qid Q0 docid rank score tag' (6 fields), found {}",
                                   f.size()));
    long rank = 0;
    double score = 0;
    if (!parse_whole(f[3], rank))
      throw InputError(path.string(), line_no, fmt::format("rank '{}' is not an integer", f[3]));
    if (!parse_whole(f[4], score) || !std::isfinite(score))
      throw InputError(path.string(), line_no, fmt::format("score '{}' is not a number", f[4]));
    if (!seen[f[0]].insert(f[2]).second)
      throw InputError(path.string(), line_no,
                       fmt::format("document {} repeated in query {}", f[2], f[0]));
    lines[f[0]].push_back({{f[2], score}, rank, line_no});
  }
  EvalRun run;
  for (auto& [qid, ls] : lines) {
    std::sort(ls.begin(), ls.end(), [](const Line& a, const Line& b) {
      if (a.doc.score != b.doc.score) return a.doc.score > b.doc.score;
      if (a.rank != b.rank) return a.rank < b.rank;
      return a.line_no < b.line_no;
    });
    auto& docs = run[qid];
    docs.reserve(ls.size());
    for (Line& l : ls) docs.push_back(std::move(l.doc));
  }
  return run;
}

QueryEffectiveness evaluate_query(const std::vector<JudgedRunDoc>& ranked,
                                  const std::map<std::string, int>& judgments, int k) {
  if (k < 1) throw std::invalid_argument("evaluate_query: k must be at least 1");
  QueryEffectiveness e;
  std::vector<int> ideal;
  for (const auto& [doc, grade] : judgments)
    if (grade > 0) {
      ++e.relevant;
      ideal.push_back(grade);
    }
  if (e.relevant == 0) return e;

  const auto discount = [](std::size_t rank) { return 1.0 / std::log2(double(rank) + 1.0); };
  double dcg = 0, precision_sum = 0;
  std::uint64_t relevant_in_k = 0;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const auto it = judgments.find(ranked[i].docid);
    const int grade = it == judgments.end() ? 0 : it->second;
    if (grade <= 0) continue;
    const std::size_t rank = i + 1;
    ++e.relevant_retrieved;
    precision_sum += double(e.relevant_retrieved) / double(rank);
    if (rank <= std::size_t(k)) {
      dcg += grade * discount(rank);
      ++relevant_in_k;
    }
  }
  std::sort(ideal.begin(), ideal.end(), std::greater<>());
  double idcg = 0;
  for (std::size_t i = 0; i < ideal.size() && i < std::size_t(k); ++i)
    idcg += ideal[i] * discount(i + 1);
  e.ndcg = dcg / idcg;
  e.average_precision = precision_sum / double(e.relevant);
  e.precision = double(relevant_in_k) / double(k);
  return e;
}

EvalSummary evaluate_run(const EvalRun& run, const Qrels& qrels, int k) {
  EvalSummary s;
  s.k = k;
  for (const auto& [qid, docs] : run) {
    const auto j = qrels.find(qid);
    if (j == qrels.end()) {
      ++s.run_queries_unjudged;
      continue;
    }
    const QueryEffectiveness e = evaluate_query(docs, j->second, k);
    if (e.relevant == 0) ++s.queries_without_relevant;
    s.mean_ndcg += e.ndcg;
    s.mean_ap += e.average_precision;
    s.mean_precision += e.precision;
    s.per_query.emplace(qid, e);
  }
  for (const auto& [qid, judged] : qrels)
    if (!run.contains(qid)) ++s.judged_queries_missing_from_run;
  if (const double n = double(s.per_query.size()); n > 0) {
    s.mean_ndcg /= n;
    s.mean_ap /= n;
    s.mean_precision /= n;
  }
  return s;
}

nlohmann::json to_json(const EvalSummary& s, bool per_query) {
  const std::string at_k = fmt::format("@{}", s.k);
  nlohmann::json j;
  j["k"] = s.k;
  j["queries"] = s.per_query.size();
  j["ndcg" + at_k] = s.mean_ndcg;
  j["map"] = s.mean_ap;
  j["p" + at_k] = s.mean_precision;
  j["queries_without_relevant"] = s.queries_without_relevant;
  j["run_queries_unjudged"] = s.run_queries_unjudged;
  j["judged_queries_missing_from_run"] = s.judged_queries_missing_from_run;
  if (per_query) {
    nlohmann::json pq = nlohmann::json::object();
    for (const auto& [qid, e] : s.per_query)
      pq[qid] = {{"ndcg" + at_k, e.ndcg},
                 {"ap", e.average_precision},
                 {"p" + at_k, e.precision},
                 {"relevant", e.relevant},
                 {"relevant_retrieved", e.relevant_retrieved}};
    j["per_query"] = std::move(pq);
  }
  return j;
}

}  // namespace gpusearch
