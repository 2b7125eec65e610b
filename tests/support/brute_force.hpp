// An independent brute-force scorer for tests: it reads a JSONL corpus itself, tokenizes with
// its own code, computes N, df, avgdl and PageRank itself, and scores every document of every
// query in double precision straight from the formulas of ARCHITECTURE.md. It shares no code
// with the index or the engines, so agreement means something.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/search_result.hpp"

namespace gpusearch::testing {

struct BruteHit {
  double score;
  std::string docid;
};

class BruteForceCollection {
 public:
  explicit BruteForceCollection(const std::string& jsonl_path) {
    std::ifstream in(jsonl_path);
    std::string line;
    std::vector<std::vector<std::string>> links;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line);
      Doc d;
      d.id = j.contains("id") ? j["id"].get<std::string>() : j["_id"].get<std::string>();
      std::string text = j.contains("contents") ? j["contents"].get<std::string>()
                                                : j.value("title", "") + "\n" + j.value("text", "");
      for (const auto& t : tokenize(text)) {
        ++d.tf[t];
        ++d.length;
      }
      total_tokens_ += d.length;
      for (const auto& [t, f] : d.tf) ++df_[t];
      std::vector<std::string> l;
      if (j.contains("links"))
        for (const auto& x : j["links"]) l.push_back(x.get<std::string>());
      links.push_back(l);
      docs_.push_back(std::move(d));
    }
    compute_pagerank(links);
  }

  static std::vector<std::string> tokenize(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    for (unsigned char c : s) {
      if (std::isalnum(c) || c >= 0x80) cur.push_back(char(c < 0x80 ? std::tolower(c) : c));
      else if (!cur.empty()) out.push_back(std::move(cur)), cur.clear();
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
  }

  // Every document matching the query, for AND and OR, under both scorings, from one scan.
  struct Answers {
    std::vector<BruteHit> and_bm25, or_bm25, and_pr, or_pr;  // best first (ties: any order)
    const std::vector<BruteHit>& get(bool conjunctive, bool pagerank_scoring) const {
      return conjunctive ? (pagerank_scoring ? and_pr : and_bm25) : (pagerank_scoring ? or_pr : or_bm25);
    }
  };
  Answers search(const std::string& text, double alpha) const {
    std::vector<std::string> terms;
    for (const auto& t : tokenize(text))
      if (df_.count(t) && std::find(terms.begin(), terms.end(), t) == terms.end()) terms.push_back(t);
    Answers a;
    if (terms.empty()) return a;
    const double n = double(docs_.size()), avgdl = double(total_tokens_) / n, k1 = 1.2, b = 0.75;
    std::vector<double> idf;
    double sum_idf = 0;
    for (const auto& t : terms) {
      const double df = df_.at(t);
      idf.push_back(std::log(1.0 + (n - df + 0.5) / (df + 0.5)));
      sum_idf += idf.back();
    }
    for (std::size_t d = 0; d < docs_.size(); ++d) {
      const Doc& doc = docs_[d];
      std::size_t matched = 0;
      double bm25 = 0, normalized = 0;
      for (std::size_t i = 0; i < terms.size(); ++i) {
        const auto it = doc.tf.find(terms[i]);
        if (it == doc.tf.end()) continue;
        ++matched;
        const double tf = it->second;
        const double denom = tf + k1 * (1 - b + b * doc.length / avgdl);
        bm25 += idf[i] * tf * (k1 + 1) / denom;
        normalized += idf[i] / sum_idf * tf / denom;  // IR / (k1 + 1)
      }
      if (matched == 0) continue;
      const double pr = alpha * pagerank_[d] / max_pagerank_ + (1 - alpha) * normalized;
      a.or_bm25.push_back({bm25, doc.id});
      a.or_pr.push_back({pr, doc.id});
      if (matched == terms.size()) {
        a.and_bm25.push_back({bm25, doc.id});
        a.and_pr.push_back({pr, doc.id});
      }
    }
    for (auto* v : {&a.and_bm25, &a.or_bm25, &a.and_pr, &a.or_pr})
      std::sort(v->begin(), v->end(), [](const BruteHit& x, const BruteHit& y) { return x.score > y.score; });
    return a;
  }
  std::size_t size() const { return docs_.size(); }

 private:
  struct Doc {
    std::string id;
    std::map<std::string, int> tf;
    std::uint64_t length = 0;
  };
  void compute_pagerank(const std::vector<std::vector<std::string>>& links) {
    const std::size_t n = docs_.size();
    std::unordered_map<std::string, std::size_t> pos;
    for (std::size_t i = 0; i < n; ++i) pos[docs_[i].id] = i;
    std::vector<std::vector<std::size_t>> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      for (const auto& l : links[i]) {
        auto it = pos.find(l);
        if (it == pos.end() || it->second == i) continue;
        if (std::find(out[i].begin(), out[i].end(), it->second) == out[i].end()) out[i].push_back(it->second);
      }
    }
    pagerank_.assign(n, 1.0 / n);
    for (int iter = 0; iter < 1000; ++iter) {
      std::vector<double> next(n, 0.15 / n);
      double dangling = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (out[i].empty()) dangling += pagerank_[i];
        for (auto t : out[i]) next[t] += 0.85 * pagerank_[i] / out[i].size();
      }
      double delta = 0;
      for (std::size_t i = 0; i < n; ++i) {
        next[i] += 0.85 * dangling / n;
        delta += std::abs(next[i] - pagerank_[i]);
      }
      pagerank_.swap(next);
      if (delta < 1e-14) break;
    }
    max_pagerank_ = *std::max_element(pagerank_.begin(), pagerank_.end());
  }
  std::vector<Doc> docs_;
  std::unordered_map<std::string, std::uint64_t> df_;
  std::uint64_t total_tokens_ = 0;
  std::vector<double> pagerank_;
  double max_pagerank_ = 1;
};

// Brute-force hits as RankedDocs in the answer order, ranks looked up by external id.
template <typename ById>
std::vector<RankedDoc> to_ranked(const std::vector<BruteHit>& hits, const ById& by_id) {
  std::vector<RankedDoc> out;
  out.reserve(hits.size());
  for (const BruteHit& h : hits) {
    RankedDoc r = by_id.at(h.docid);
    r.score = h.score;
    out.push_back(r);
  }
  std::sort(out.begin(), out.end(), ranks_before);
  return out;
}

}  // namespace gpusearch::testing
