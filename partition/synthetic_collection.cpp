#include "partition/synthetic_collection.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <tbb/parallel_for.h>

#include "common/error.hpp"
#include "common/progress.hpp"

namespace gpusearch {

std::uint64_t mix64(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Rng::Rng(std::uint64_t seed) {
  for (auto& s : s_) {  // splitmix64
    seed += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    s = z ^ (z >> 31);
  }
}

std::uint64_t Rng::next() {
  auto rotl = [](std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::normal() {  // Box-Muller
  const double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

namespace {
double helper1(double x) {  // log1p(x) / x
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}
double helper2(double x) {  // expm1(x) / x
  return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
}
}  // namespace

ZipfSampler::ZipfSampler(std::uint64_t n, double s) : n_(std::max<std::uint64_t>(n, 1)), s_(s) {
  h_integral_x1_ = h_integral(1.5) - 1.0;
  h_integral_n_ = h_integral(double(n_) + 0.5);
  s_threshold_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
}
double ZipfSampler::h(double x) const { return std::exp(-s_ * std::log(x)); }
double ZipfSampler::h_integral(double x) const {
  const double lx = std::log(x);
  return helper2((1.0 - s_) * lx) * lx;
}
double ZipfSampler::h_integral_inverse(double x) const {
  double t = x * (1.0 - s_);
  if (t < -1.0) t = -1.0;
  return std::exp(helper1(t) * x);
}

SyntheticParams SyntheticParams::parse(const std::string& spec) {
  SyntheticParams p;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw InputError("--synthetic", 0, "expected key=value, got '" + item + "'");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    static const char* kKeys[] = {"docs", "seed", "mean_length", "length_sigma", "zipf",
                                  "heaps_k", "heaps_beta", "topic_share", "burstiness", "topic_vocabulary",
                                  "site_size", "links", "link_locality", "train_queries",
                                  "test_queries", "query_drift", "drift_ramp", "drift_topics"};
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
      throw InputError("--synthetic", 0,
                       "unknown key '" + key +
                           "' (docs, seed, mean_length, length_sigma, zipf, heaps_k, heaps_beta, "
                           "topic_share, burstiness, topic_vocabulary, site_size, links, link_locality, "
                           "train_queries, test_queries, query_drift, drift_ramp, drift_topics)");
    double v = 0;
    try {
      std::size_t used = 0;
      v = std::stod(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      throw InputError("--synthetic", 0, "value of '" + key + "' is not a number: " + value);
    }
    if (v < 0) throw InputError("--synthetic", 0, "value of '" + key + "' must not be negative");
    if (key == "docs") p.num_docs = std::uint64_t(v);
    else if (key == "seed") p.seed = std::uint64_t(v);
    else if (key == "mean_length") p.mean_doc_length = v;
    else if (key == "length_sigma") p.doc_length_sigma = v;
    else if (key == "zipf") p.zipf_exponent = v;
    else if (key == "heaps_k") p.heaps_k = v;
    else if (key == "heaps_beta") p.heaps_beta = v;
    else if (key == "topic_share") p.topic_share = v;
    else if (key == "burstiness") p.burstiness = v;
    else if (key == "topic_vocabulary") p.topic_vocabulary = std::uint32_t(v);
    else if (key == "site_size") p.mean_site_size = v;
    else if (key == "links") p.mean_out_links = v;
    else if (key == "link_locality") p.link_locality = v;
    else if (key == "train_queries") p.train_queries = std::uint64_t(v);
    else if (key == "test_queries") p.test_queries = std::uint64_t(v);
    else if (key == "query_drift") p.query_drift = v;
    else if (key == "drift_ramp") p.drift_ramp = v;
    else if (key == "drift_topics") {
      if (v != std::floor(v)) throw InputError("--synthetic", 0, "drift_topics is a whole number");
      p.drift_topics = std::uint32_t(v);
    }
  }
  if (p.num_docs == 0) throw InputError("--synthetic", 0, "docs must be at least 1");
  if (p.num_docs > 0xfffffff0ull) throw InputError("--synthetic", 0, "docs must be below 2^32");
  if (p.mean_doc_length < 1) throw InputError("--synthetic", 0, "mean_length must be at least 1");
  if (p.topic_share > 1 || p.link_locality > 1 || p.burstiness >= 1)
    throw InputError("--synthetic", 0,
                     "topic_share, link_locality (in [0, 1]) and burstiness (in [0, 1)) are fractions");
  if (p.zipf_exponent <= 0) throw InputError("--synthetic", 0, "zipf must be positive");
  if (p.query_drift > 1) throw InputError("--synthetic", 0, "query_drift is a fraction in [0, 1]");
  if (!(p.drift_ramp > 0 && p.drift_ramp <= 1))
    throw InputError("--synthetic", 0, "drift_ramp is a fraction of the test log in (0, 1]");
  return p;
}

nlohmann::json SyntheticParams::to_json() const {
  nlohmann::json j = {{"docs", num_docs},          {"seed", seed},
          {"mean_length", mean_doc_length}, {"length_sigma", doc_length_sigma},
          {"zipf", zipf_exponent},     {"heaps_k", heaps_k},
          {"heaps_beta", heaps_beta},  {"topic_share", topic_share}, {"burstiness", burstiness},
          {"topic_vocabulary", topic_vocabulary}, {"site_size", mean_site_size},
          {"links", mean_out_links},   {"link_locality", link_locality},
          {"train_queries", train_queries}, {"test_queries", test_queries}};
  if (query_drift > 0) j["query_drift"] = query_drift;  // absent by default: old manifests stay
  if (drift_ramp != 1) j["drift_ramp"] = drift_ramp;
  if (drift_topics > 0) j["drift_topics"] = drift_topics;
  return j;
}

SyntheticCollection::SyntheticCollection(const SyntheticParams& p) : p_(p) {
  const double tokens = double(p_.num_docs) * p_.mean_doc_length;
  vocabulary_ = std::uint32_t(std::clamp(p_.heaps_k * std::pow(tokens, p_.heaps_beta), 1000.0,
                                         double(1u << 31)));
  num_topics_ = std::uint32_t(std::clamp<std::uint64_t>(p_.num_docs / 1000, 20, 20000));
  // Sites: Pareto sizes (shape 1.5, so mean = 3 * minimum), in input order.
  Rng rng(mix64(p_.seed, 0x517e5));
  ZipfSampler topic_popularity(num_topics_, 0.8);
  const double min_size = std::max(1.0, p_.mean_site_size / 3.0);
  for (std::uint64_t start = 0; start < p_.num_docs;) {
    site_start_.push_back(start);
    site_topic_.push_back(std::uint32_t(topic_popularity(rng) - 1));
    const double size = std::min(20000.0, min_size * std::pow(1.0 - rng.uniform(), -1.0 / 1.5));
    start += std::max<std::uint64_t>(1, std::uint64_t(std::llround(size)));
  }
}

std::uint64_t SyntheticCollection::site_of(std::uint64_t doc) const {
  return std::uint64_t(std::upper_bound(site_start_.begin(), site_start_.end(), doc) -
                       site_start_.begin()) - 1;
}

std::uint32_t SyntheticCollection::topic_term(std::uint32_t topic, std::uint32_t topic_rank) const {
  // A topic's terms are spread over the global vocabulary below its head of common words.
  const std::uint32_t head = std::min<std::uint32_t>(1000, vocabulary_ / 10);
  return head + std::uint32_t(mix64(p_.seed ^ (std::uint64_t(topic) << 32), topic_rank) %
                              (vocabulary_ - head));
}

void SyntheticCollection::document(std::uint64_t i, SyntheticDocument& out) const {
  // Samplers are cheap to build (a few logs), so each call makes its own: no shared state.
  const ZipfSampler global_terms(vocabulary_, p_.zipf_exponent);
  const ZipfSampler topic_terms(p_.topic_vocabulary, 1.0);
  Rng rng(mix64(p_.seed, i));
  out.index = i;
  out.tokens.clear();
  out.links.clear();
  const std::uint64_t site = site_of(i);
  const std::uint32_t topic = site_topic_[site];
  const double sigma = p_.doc_length_sigma;
  const double mu = std::log(p_.mean_doc_length) - 0.5 * sigma * sigma;
  const auto length =
      std::uint32_t(std::clamp(std::llround(std::exp(mu + sigma * rng.normal())), 1ll, 200000ll));
  out.tokens.reserve(length);
  // A repeat copies one of the document's fresh draws, chosen uniformly (copying any earlier
  // token instead would make term frequencies far more skewed than on the web).
  thread_local std::vector<std::uint32_t> fresh;
  fresh.clear();
  for (std::uint32_t t = 0; t < length; ++t) {
    if (!fresh.empty() && rng.uniform() < p_.burstiness) {
      out.tokens.push_back(fresh[rng.below(fresh.size())]);
      continue;
    }
    if (rng.uniform() < p_.topic_share)
      out.tokens.push_back(topic_term(topic, std::uint32_t(topic_terms(rng))));
    else
      out.tokens.push_back(std::uint32_t(global_terms(rng) - 1));
    fresh.push_back(out.tokens.back());
  }
  if (p_.mean_out_links > 0 && p_.num_docs > 1) {
    const double lmu = std::log(p_.mean_out_links) - 0.5;
    const auto links = std::uint32_t(std::clamp(std::llround(std::exp(lmu + rng.normal())), 0ll, 500ll));
    const std::uint64_t site_begin = site_start_[site];
    const std::uint64_t site_end = site + 1 < site_start_.size() ? site_start_[site + 1] : p_.num_docs;
    const ZipfSampler popularity(p_.num_docs, 0.9);
    // A fixed permutation decides which documents are popular: x -> (a x + c) mod N.
    std::uint64_t a = 2654435761ull % p_.num_docs;
    while (std::gcd(a, p_.num_docs) != 1) ++a;
    for (std::uint32_t l = 0; l < links; ++l) {
      std::uint64_t target;
      if (rng.uniform() < p_.link_locality) target = site_begin + rng.below(site_end - site_begin);
      else
        target = std::uint64_t((unsigned __int128)(popularity(rng) - 1) * a % p_.num_docs +
                               p_.seed) % p_.num_docs;
      if (target != i) out.links.push_back(target);
    }
  }
}

std::string SyntheticCollection::doc_id(std::uint64_t i) { return fmt::format("doc{:09d}", i); }

std::string SyntheticCollection::term_string(std::uint32_t rank) {
  static constexpr char kConsonants[] = "bcdfghjklmnprstvz";  // 17
  static constexpr char kVowels[] = "aeiou";                  // 5
  std::string s;
  std::uint64_t x = std::uint64_t(rank) + 1;  // bijective base 85
  while (x > 0) {
    const std::uint64_t digit = (x - 1) % 85;
    s.push_back(kConsonants[digit / 5]);
    s.push_back(kVowels[digit % 5]);
    x = (x - 1) / 85;
  }
  return s;
}

std::vector<std::pair<std::string, std::string>> SyntheticCollection::queries(bool train) const {
  // Query lengths 1..8 as in the TREC 2005/2006 efficiency logs (mean about 3).
  static constexpr double kLengthShare[8] = {0.12, 0.30, 0.28, 0.16, 0.08, 0.035, 0.015, 0.01};
  const std::uint64_t count = train ? p_.train_queries : p_.test_queries;
  const std::uint64_t pool = std::max<std::uint64_t>(1, (p_.train_queries + p_.test_queries));
  // Users ask for a topic's characteristic terms: a steeper Zipf than the documents use.
  const ZipfSampler topic_terms(p_.topic_vocabulary, 1.3);
  const ZipfSampler global_terms(vocabulary_, p_.zipf_exponent);
  const ZipfSampler query_popularity(pool, 0.8);
  const ZipfSampler site_popularity(site_start_.size(), 0.6);
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(count);
  Rng log_rng(mix64(p_.seed, train ? 0x7a1a : 0x7e57));
  for (std::uint64_t q = 0; q < count; ++q) {
    // A drifting test log: query q comes from the other mix with probability
    // drift * min(1, q / (ramp * count)) (no draw at all without drift, so that the default logs
    // stay as they were).
    const bool drifted =
        !train && p_.query_drift > 0 &&
        log_rng.uniform() <
            p_.query_drift * std::min(1.0, double(q) / (p_.drift_ramp * double(count)));
    // Which distinct query: popular ones repeat, as in real logs.
    const std::uint64_t which = query_popularity(log_rng) - 1;
    Rng rng(mix64(p_.seed ^ (drifted ? 0xd21f7ed5a1e5c0deull : 0x9e3779b97f4a7c15ull), which));
    double u = rng.uniform();
    unsigned length = 1;
    for (unsigned l = 0; l < 8; ++l) {
      if (u < kLengthShare[l]) { length = l + 1; break; }
      u -= kLengthShare[l];
      length = 8;
    }
    std::uint64_t site = site_popularity(rng) - 1;
    // The other mix: the same popularity over a different half of the sites (other topics).
    if (drifted) site = (site + site_start_.size() / 2) % site_start_.size();
    // drift_topics: the other mix also asks for other topics (the sites' topics repeat over the
    // collection, so moving the sites alone leaves the topic mix much as it was).
    const std::uint32_t topic =
        drifted ? (site_topic_[site] + p_.drift_topics) % num_topics_ : site_topic_[site];
    std::vector<std::uint32_t> terms;
    for (unsigned tries = 0; terms.size() < length && tries < 100; ++tries) {
      std::uint32_t t;
      if (rng.uniform() < 0.7) {
        t = topic_term(topic, std::uint32_t(topic_terms(rng)));
      } else {
        t = std::uint32_t(global_terms(rng) - 1);
        if (t < 5) continue;  // queries rarely consist of the very commonest words
      }
      if (std::find(terms.begin(), terms.end(), t) == terms.end()) terms.push_back(t);
    }
    std::string text;
    for (auto t : terms) {
      if (!text.empty()) text.push_back(' ');
      text += term_string(t);
    }
    out.emplace_back(std::to_string(train ? 1000000 + q + 1 : q + 1), std::move(text));
  }
  return out;
}

void SyntheticCollection::write_queries(const std::filesystem::path& dir) const {
  for (bool train : {true, false}) {
    const auto path = dir / (train ? "queries.train.tsv" : "queries.test.tsv");
    std::ofstream out(path);
    if (!out) throw Error("cannot write " + path.string());
    for (const auto& [qid, text] : queries(train)) out << qid << '\t' << text << '\n';
  }
}

void SyntheticCollection::write(const std::filesystem::path& dir, bool gzip, bool progress) const {
  std::filesystem::create_directories(dir);
  const auto corpus = dir / (gzip ? "corpus.jsonl.gz" : "corpus.jsonl");
  gzFile out = gzopen(corpus.c_str(), gzip ? "wb6" : "wbT");
  if (!out) throw Error("cannot write " + corpus.string());
  Progress bar("generate", p_.num_docs, "docs", progress);
  constexpr std::uint64_t kBatch = 4096;
  std::vector<std::string> texts(kBatch);
  for (std::uint64_t begin = 0; begin < p_.num_docs; begin += kBatch) {
    const std::uint64_t end = std::min(p_.num_docs, begin + kBatch);
    tbb::parallel_for(begin, end, [&](std::uint64_t i) {
      SyntheticDocument d;
      document(i, d);
      std::string& s = texts[i - begin];
      s = fmt::format("{{\"id\": \"{}\", \"contents\": \"", doc_id(i));
      for (std::size_t t = 0; t < d.tokens.size(); ++t) {
        if (t) s.push_back(' ');
        s += term_string(d.tokens[t]);
      }
      s += "\", \"links\": [";
      for (std::size_t l = 0; l < d.links.size(); ++l)
        s += fmt::format("{}\"{}\"", l ? ", " : "", doc_id(d.links[l]));
      s += "]}\n";
    });
    for (std::uint64_t i = begin; i < end; ++i)
      if (gzwrite(out, texts[i - begin].data(), unsigned(texts[i - begin].size())) <= 0)
        throw Error("write failed: " + corpus.string());
    bar.add(end - begin);
  }
  if (gzclose(out) != Z_OK) throw Error("write failed: " + corpus.string());
  bar.finish();
  write_queries(dir);
  std::ofstream(dir / "params.json") << p_.to_json().dump(2) << '\n';
}

}  // namespace gpusearch
