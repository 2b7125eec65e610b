// A synthetic GOV2-like web collection, deterministic by seed and generated one document at a
// time (document i depends only on the seed and i, so any thread may make any document):
//  - vocabulary: Zipfian term ranks over a vocabulary whose size grows with the collection by
//    Heaps' law (V = heaps_k * tokens^heaps_beta);
//  - document lengths: log-normal; burstiness (a token repeats an earlier token of the same
//    document with some probability) gives web pages' heavy-tailed term frequencies;
//  - topical locality: documents come in "sites" (contiguous runs of the input order, sizes
//    Pareto-distributed, as URL order groups a site's pages); each site has a topic, and a share
//    of each document's tokens comes from its topic's own Zipfian vocabulary, so that postings
//    cluster in docID order;
//  - links: out-degrees log-normal, targets mostly within the site, else drawn by a Zipfian
//    popularity over a fixed permutation of the documents (power-law in-degrees, for PageRank);
//  - query logs: lengths 1..8 terms (mean about 3) as in the TREC 2005/2006 efficiency-track
//    logs, terms drawn mostly from one topic (so AND queries have answers) plus popular terms,
//    queries repeating with Zipfian popularity; separate train and test logs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gpusearch {

struct SyntheticParams {
  std::uint64_t num_docs = 100000;
  std::uint64_t seed = 7;
  double mean_doc_length = 900;   // tokens (log-normal mean); GOV2 has about 900
  double doc_length_sigma = 1.0;  // of log length
  double zipf_exponent = 1.0;     // global term ranks
  double heaps_k = 40;
  double heaps_beta = 0.55;
  double topic_share = 0.2;  // fraction of tokens drawn from the document's topic
  double burstiness = 0.65;  // chance that a token repeats one of the document's earlier draws
  std::uint32_t topic_vocabulary = 4000;
  double mean_site_size = 40;
  double mean_out_links = 10;
  double link_locality = 0.6;  // fraction of links that stay within the site
  std::uint64_t train_queries = 10000;
  std::uint64_t test_queries = 10000;
  // A drifting test log (the online cache policy's benchmark): query i of the test log comes
  // from another popularity over the sites (other topics) with probability query_drift * i / n.
  double query_drift = 0;
  // How fast: the chance reaches query_drift at this fraction of the log (1: at its end; 0.5: the
  // second half is all drifted at query_drift = 1).
  double drift_ramp = 1;
  // The other mix also rotates the topics asked for by this many topic ranks (0: the sites
  // move, the topics stay; the sites' topics repeat, so that mix moves little).
  std::uint32_t drift_topics = 0;

  // "docs=25000000,seed=7,mean_length=600,...": keys as the fields above.
  static SyntheticParams parse(const std::string& spec);
  nlohmann::json to_json() const;
};

struct SyntheticDocument {
  std::uint64_t index = 0;
  std::vector<std::uint32_t> tokens;  // term ranks (0 = most frequent), in text order
  std::vector<std::uint64_t> links;   // target document indices
};

class SyntheticCollection {
 public:
  explicit SyntheticCollection(const SyntheticParams& p);
  const SyntheticParams& params() const { return p_; }
  std::uint32_t vocabulary_size() const { return vocabulary_; }
  std::uint64_t num_sites() const { return site_start_.size(); }

  void document(std::uint64_t i, SyntheticDocument& out) const;
  static std::string doc_id(std::uint64_t i);
  // The term with rank r: letters only, unique (bijective base-85 consonant-vowel syllables).
  static std::string term_string(std::uint32_t rank);

  // Query log lines "qid<TAB>text"; `train` selects the training log.
  std::vector<std::pair<std::string, std::string>> queries(bool train) const;

  // Writes corpus.jsonl (or .jsonl.gz), queries.train.tsv, queries.test.tsv and params.json.
  void write(const std::filesystem::path& dir, bool gzip, bool progress) const;
  void write_queries(const std::filesystem::path& dir) const;

 private:
  std::uint64_t site_of(std::uint64_t doc) const;
  std::uint32_t topic_term(std::uint32_t topic, std::uint32_t topic_rank) const;
  SyntheticParams p_;
  std::uint32_t vocabulary_ = 0;
  std::uint32_t num_topics_ = 0;
  std::vector<std::uint64_t> site_start_;
  std::vector<std::uint32_t> site_topic_;
};

// Samples k in [1, n] with P(k) proportional to k^-s, in O(1) expected time: the
// rejection-inversion method of Hoermann and Derflinger (1996).
class ZipfSampler {
 public:
  ZipfSampler(std::uint64_t n, double s);
  template <typename Rng>
  std::uint64_t operator()(Rng& rng) const {
    for (;;) {
      const double u = h_integral_n_ + rng.uniform() * (h_integral_x1_ - h_integral_n_);
      const double x = h_integral_inverse(u);
      std::uint64_t k = static_cast<std::uint64_t>(x + 0.5);
      if (k < 1) k = 1;
      else if (k > n_) k = n_;
      if (double(k) - x <= s_threshold_ || u >= h_integral(double(k) + 0.5) - h(double(k)))
        return k;
    }
  }

 private:
  double h(double x) const;
  double h_integral(double x) const;
  double h_integral_inverse(double x) const;
  std::uint64_t n_;
  double s_;
  double h_integral_x1_, h_integral_n_, s_threshold_;
};

// xoshiro256**, seeded through splitmix64: small state, so one per document is cheap.
class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal();
  std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }

 private:
  std::uint64_t s_[4];
};

std::uint64_t mix64(std::uint64_t a, std::uint64_t b);

}  // namespace gpusearch
