// Ranker feature extraction (common/ranker/document_features.hpp, the FSM both evaluators run):
// every feature equals a brute-force computation from the decoded token list (minimal window and
// pairwise distances over all occurrence pairs) on random and adversarial documents; BM25 equals
// the engines' scoring; features on a real index come from the forward index; `gpusearch
// partition` keeps the forward index.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "common/forward_index.hpp"
#include "common/ranker/feature_batch.hpp"
#include "common/scoring.hpp"
#include "common/shard_index.hpp"
#include "isn/ranker/cpu_ranker.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using namespace gpusearch::ranker;
using namespace gpusearch::testing;
namespace fs = std::filesystem;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The features of one document, computed the obvious way from its tokens.
std::vector<double> brute_force(const std::vector<std::uint32_t>& tokens,
                                const std::vector<std::uint32_t>& terms,
                                const std::vector<float>& idf, const FeatureParams& p, float alpha,
                                float pagerank, float gs) {
  const std::size_t nt = std::min<std::size_t>(terms.size(), kMaxRankerTerms);
  std::vector<std::vector<std::uint32_t>> positions(nt);
  for (std::uint32_t pos = 0; pos < tokens.size(); ++pos)
    for (std::size_t i = 0; i < nt; ++i)
      if (tokens[pos] == terms[i]) positions[i].push_back(pos);
  std::vector<double> f(kNumFeatures, 0.0);
  const double len = double(tokens.size());
  double idf_sum = 0;
  for (std::size_t i = 0; i < nt; ++i) idf_sum += idf[i];
  const Bm25Params bp{p.k1, p.b};
  const double norm = length_norm(bp, std::uint32_t(tokens.size()), p.avg_doc_length);
  std::vector<std::size_t> matched;
  double tf_max = 0, tf_min = 1e30, tfidf_max = -1e30, bm25 = 0, pr_sum = 0;
  double idf_max = 0, idf_min = 0, idf_msum = 0, t_max = 0, t_min = 0, first_sum = 0;
  double first_any = 1e30;
  for (std::size_t i = 0; i < nt; ++i) {
    const double tf = double(positions[i].size());
    f[std::size_t(Feature::kTfSum)] += tf;
    tf_max = std::max(tf_max, tf);
    tf_min = std::min(tf_min, tf);
    f[std::size_t(Feature::kTfIdfSum)] += tf * idf[i];
    tfidf_max = std::max(tfidf_max, tf * double(idf[i]));
    if (tf == 0) continue;
    const double term = idf[i] * impact(std::uint32_t(tf), norm) * (p.k1 + 1.0);
    bm25 += term;
    pr_sum += idf[i] / idf_sum * impact(std::uint32_t(tf), norm);
    idf_max = matched.empty() ? idf[i] : std::max<double>(idf_max, idf[i]);
    idf_min = matched.empty() ? idf[i] : std::min<double>(idf_min, idf[i]);
    t_max = matched.empty() ? term : std::max(t_max, term);
    t_min = matched.empty() ? term : std::min(t_min, term);
    idf_msum += idf[i];
    first_sum += positions[i][0];
    first_any = std::min<double>(first_any, positions[i][0]);
    matched.push_back(i);
  }
  const double m = double(matched.size());
  f[std::size_t(Feature::kDocLength)] = len;
  f[std::size_t(Feature::kPagerank)] = pagerank;
  f[std::size_t(Feature::kGlobalScore)] = gs;
  f[std::size_t(Feature::kQueryTerms)] = double(nt);
  f[std::size_t(Feature::kQueryIdfSum)] = idf_sum;
  f[std::size_t(Feature::kBm25)] = bm25;
  f[std::size_t(Feature::kBm25Pr)] = alpha * pagerank + (1 - alpha) * pr_sum;
  f[std::size_t(Feature::kMatchedTerms)] = m;
  f[std::size_t(Feature::kMatchedFraction)] = nt ? m / double(nt) : 0;
  f[std::size_t(Feature::kTfMax)] = nt ? tf_max : 0;
  f[std::size_t(Feature::kTfMin)] = nt ? tf_min : 0;
  f[std::size_t(Feature::kTfMean)] = nt ? f[std::size_t(Feature::kTfSum)] / double(nt) : 0;
  f[std::size_t(Feature::kTfNormSum)] = len > 0 ? f[std::size_t(Feature::kTfSum)] / len : 0;
  f[std::size_t(Feature::kTfIdfMax)] = nt ? tfidf_max : 0;
  f[std::size_t(Feature::kIdfMatchedSum)] = idf_msum;
  f[std::size_t(Feature::kIdfMatchedMax)] = idf_max;
  f[std::size_t(Feature::kIdfMatchedMin)] = idf_min;
  f[std::size_t(Feature::kBm25TermMax)] = t_max;
  f[std::size_t(Feature::kBm25TermMin)] = t_min;
  f[std::size_t(Feature::kFirstOccurrence)] = m > 0 ? first_any : kNaN;
  f[std::size_t(Feature::kFirstOccurrenceFraction)] = m > 0 ? first_any / len : kNaN;
  f[std::size_t(Feature::kFirstOccurrenceMean)] = m > 0 ? first_sum / m : kNaN;
  // Minimal window: every span [a, b] that holds each matched term.
  double window = kNaN;
  if (m > 0) {
    window = 1e30;
    for (std::uint32_t a = 0; a < tokens.size(); ++a)
      for (std::uint32_t b = a; b < tokens.size(); ++b) {
        bool all = true;
        for (std::size_t i : matched) {
          bool in = false;
          for (std::uint32_t p2 : positions[i]) in = in || (p2 >= a && p2 <= b);
          all = all && in;
        }
        if (all) {
          window = std::min<double>(window, b - a + 1);
          break;
        }
      }
  }
  f[std::size_t(Feature::kMinWindow)] = window;
  f[std::size_t(Feature::kWindowDensity)] = m > 0 ? m / window : kNaN;
  // Pairs of matched terms among the first kMaxPairTerms: least distance over all occurrences.
  double least = 1e30, sum = 0;
  int pairs = 0;
  const std::size_t np = std::min<std::size_t>(nt, kMaxPairTerms);
  for (std::size_t i = 0; i < np; ++i)
    for (std::size_t j = i + 1; j < np; ++j) {
      if (positions[i].empty() || positions[j].empty()) continue;
      double d = 1e30;
      for (auto a : positions[i])
        for (auto b : positions[j]) d = std::min<double>(d, a > b ? a - b : b - a);
      least = std::min(least, d);
      sum += d;
      ++pairs;
    }
  f[std::size_t(Feature::kPairDistanceMin)] = pairs ? least : kNaN;
  f[std::size_t(Feature::kPairDistanceMean)] = pairs ? sum / pairs : kNaN;
  double bigrams = 0;
  for (std::size_t pos = 1; pos < tokens.size(); ++pos)
    for (std::size_t i = 1; i < nt; ++i)
      if (tokens[pos] == terms[i] && tokens[pos - 1] == terms[i - 1]) ++bigrams;
  f[std::size_t(Feature::kOrderedBigrams)] = bigrams;
  double head_tf = 0, head_matched = 0, head_idf = 0;
  for (std::size_t i = 0; i < nt; ++i) {
    bool in_head = false;
    for (auto p2 : positions[i])
      if (p2 < kHeadTokens) ++head_tf, in_head = true;
    if (in_head) ++head_matched, head_idf += idf[i];
  }
  f[std::size_t(Feature::kHeadTfSum)] = head_tf;
  f[std::size_t(Feature::kHeadMatchedFraction)] = nt ? head_matched / double(nt) : 0;
  f[std::size_t(Feature::kHeadIdfFraction)] = idf_sum > 0 ? head_idf / idf_sum : 0;
  return f;
}

void expect_features_match(const std::vector<float>& got, const std::vector<double>& want,
                           const std::string& what) {
  for (std::uint32_t f = 0; f < kNumFeatures; ++f) {
    if (std::isnan(want[f])) {
      EXPECT_TRUE(std::isnan(got[f])) << what << " feature " << feature_name(f) << " = " << got[f];
      continue;
    }
    EXPECT_NEAR(got[f], want[f], 2e-5 * std::max(1.0, std::fabs(want[f])))
        << what << " feature " << feature_name(f);
  }
  for (std::uint32_t f = kNumFeatures; f < kFeatureStride; ++f) EXPECT_EQ(got[f], 0.0f);
}

// One query, one document given as tokens, through a FeatureBatch.
std::vector<float> extract_one(const std::vector<std::uint32_t>& tokens,
                               const std::vector<std::uint32_t>& terms,
                               const std::vector<float>& idf, const FeatureParams& p, float alpha,
                               float pagerank, float gs) {
  FeatureBatch b;
  b.params = p;
  FeatureQuery q;
  q.num_terms = std::uint32_t(std::min<std::size_t>(terms.size(), kMaxRankerTerms));
  for (std::uint32_t i = 0; i < q.num_terms; ++i) q.idf_sum += idf[i];
  q.alpha = alpha;
  b.queries.push_back(q);
  b.terms = terms;
  b.idf = idf;
  for (std::uint32_t t : tokens) vbyte::append(t, b.streams);
  FeatureDoc d;
  d.stream_bytes = std::uint32_t(b.streams.size());
  d.doc_length = std::uint32_t(tokens.size());
  d.pagerank = pagerank;
  d.gs = gs;
  b.docs.push_back(d);
  std::vector<float> out(kFeatureStride, -1.0f);
  extract_features(b, out);
  return out;
}

}  // namespace

TEST(RankerFeatures, RandomDocumentsMatchBruteForce) {
  std::mt19937_64 rng(12);
  const FeatureParams p{1.2f, 0.75f, 60.0f};
  for (int trial = 0; trial < 300; ++trial) {
    // A small vocabulary makes query terms frequent, adjacent and repeated.
    const std::uint32_t vocab = 3 + rng() % 40;
    const std::size_t len = rng() % 120;
    std::vector<std::uint32_t> tokens(len);
    for (auto& t : tokens) t = std::uint32_t(rng() % vocab) * 977;  // multi-byte vbyte codes
    const std::size_t nq = std::min<std::size_t>(1 + rng() % 12, vocab + 3);
    std::vector<std::uint32_t> terms;
    std::vector<float> idf;
    while (terms.size() < nq) {
      const std::uint32_t t = std::uint32_t(rng() % (vocab + 3)) * 977;  // some never occur
      if (std::find(terms.begin(), terms.end(), t) != terms.end()) continue;
      terms.push_back(t);
      idf.push_back(0.1f + float(rng() % 1000) / 100.0f);
    }
    const auto got = extract_one(tokens, terms, idf, p, 0.3f, 0.25f, 0.5f);
    const auto want = brute_force(tokens, terms, idf, p, 0.3f, 0.25f, 0.5f);
    expect_features_match(got, want, "trial " + std::to_string(trial));
  }
}

TEST(RankerFeatures, AdversarialDocuments) {
  const FeatureParams p{1.2f, 0.75f, 10.0f};
  const std::vector<float> idf{1.0f, 2.0f, 3.0f};
  struct Case {
    const char* what;
    std::vector<std::uint32_t> tokens, terms;
  };
  const std::vector<Case> cases = {
      {"empty document", {}, {1, 2}},
      {"no query term occurs", {5, 6, 7}, {1, 2}},
      {"one term only", {1, 5, 1}, {1, 2}},
      {"adjacent bigram", {1, 2}, {1, 2}},
      {"reversed order is not a bigram", {2, 1}, {1, 2}},
      {"window at the end", {1, 9, 9, 9, 2, 9, 1, 2}, {1, 2}},
      {"three terms interleaved", {3, 1, 3, 2, 1, 3, 2}, {1, 2, 3}},
      {"large term ids", {0xffffffu, 1u << 20, 0xffffffu}, {0xffffffu, 1u << 20}},
      {"no query terms", {1, 2, 3}, {}},
  };
  for (const Case& c : cases) {
    std::vector<float> w(idf.begin(),
                         idf.begin() + std::ptrdiff_t(std::min(c.terms.size(), idf.size())));
    const auto got = extract_one(c.tokens, c.terms, w, p, 0.0f, 0.0f, 0.0f);
    const auto want = brute_force(c.tokens, c.terms, w, p, 0.0f, 0.0f, 0.0f);
    expect_features_match(got, want, c.what);
  }
}

TEST(RankerFeatures, OnlyTheFirstThirtyTwoTermsCount) {
  std::vector<std::uint32_t> terms, tokens;
  std::vector<float> idf;
  for (std::uint32_t t = 0; t < 40; ++t)
    terms.push_back(t), idf.push_back(1.0f), tokens.push_back(t);
  const auto got = extract_one(tokens, terms, idf, {1.2f, 0.75f, 40.0f}, 0, 0, 0);
  EXPECT_EQ(got[std::size_t(Feature::kQueryTerms)], 32.0f);
  EXPECT_EQ(got[std::size_t(Feature::kMatchedTerms)], 32.0f);
  EXPECT_EQ(got[std::size_t(Feature::kMinWindow)], 32.0f);  // tokens 0..31
  EXPECT_EQ(got[std::size_t(Feature::kOrderedBigrams)], 31.0f);
  EXPECT_EQ(got[std::size_t(Feature::kPairDistanceMin)], 1.0f);
}

// On a real index: the forward index's streams give the same features as the corpus's tokens,
// and BM25 equals the engines' score of the candidate.
TEST(RankerFeatures, CranfieldCandidatesFromTheForwardIndex) {
  const fs::path corpus = shared_data("cranfield/corpus.jsonl");
  if (!fs::exists(corpus)) GTEST_SKIP() << "no Cranfield at " << corpus;
  TempDir dir;
  ASSERT_EQ(run_gpusearch("index --corpus " + corpus.string() + " --out " + (dir / "idx").string() +
                          " --forward-index")
                .exit_code,
            0);
  const Index index = Index::open(dir / "idx");
  const ShardIndex& shard = index.shard(0);
  const ForwardIndex fwd = ForwardIndex::open(shard);
  const auto terms = std::vector<std::uint32_t>{
      *shard.find_term("wing"), *shard.find_term("slipstream"), *shard.find_term("lift")};
  std::vector<float> idf;
  for (auto t : terms)
    idf.push_back(
        float(gpusearch::idf(shard.params().collection.num_docs, shard.term(t).df_global)));
  const IndexParams& ip = shard.params();
  const FeatureParams p{float(ip.bm25.k1), float(ip.bm25.b), float(ip.collection.avg_doc_length)};
  for (DocId d = 0; d < shard.num_docs(); d += 7) {
    const auto tokens = fwd.tokens(d);
    const auto got =
        extract_one(tokens, terms, idf, p, 0.3f, shard.pagerank()[d], shard.global_scores()[d]);
    const auto want =
        brute_force(tokens, terms, idf, p, 0.3f, shard.pagerank()[d], shard.global_scores()[d]);
    expect_features_match(got, want, "doc " + std::string(shard.external_id(d)));
    // The engines' BM25: sum of idf * (k1 + 1) * impact with the document's length.
    const Bm25Params bp = ip.bm25;
    double bm25 = 0;
    for (std::size_t i = 0; i < terms.size(); ++i) {
      const auto tf = std::uint32_t(std::count(tokens.begin(), tokens.end(), terms[i]));
      if (tf)
        bm25 += gpusearch::idf(ip.collection.num_docs, shard.term(terms[i]).df_global) *
                (bp.k1 + 1) *
                impact(tf, length_norm(bp, shard.doc_lengths()[d], ip.collection.avg_doc_length));
    }
    EXPECT_NEAR(got[std::size_t(Feature::kBm25)], bm25, 1e-4 * std::max(1.0, bm25));
  }
}

TEST(RankerFeatures, PartitionKeepsTheForwardIndex) {
  const fs::path corpus = shared_data("cranfield/corpus.jsonl");
  if (!fs::exists(corpus)) GTEST_SKIP() << "no Cranfield at " << corpus;
  TempDir dir;
  ASSERT_EQ(run_gpusearch("index --corpus " + corpus.string() + " --out " + (dir / "one").string() +
                          " --forward-index")
                .exit_code,
            0);
  const auto r = run_gpusearch("partition --index " + (dir / "one").string() + " --out " +
                               (dir / "three").string() + " --shards 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Index one = Index::open(dir / "one"), three = Index::open(dir / "three");
  const ForwardIndex f1 = ForwardIndex::open(one.shard(0));
  std::unordered_map<std::string, DocId> by_id;
  for (DocId d = 0; d < one.shard(0).num_docs(); ++d)
    by_id[std::string(one.shard(0).external_id(d))] = d;
  std::size_t docs = 0;
  for (std::size_t s = 0; s < three.num_open_shards(); ++s) {
    const ForwardIndex f3 = ForwardIndex::open(three.shard(s));
    for (DocId d = 0; d < three.shard(s).num_docs(); ++d, ++docs)
      ASSERT_EQ(f3.tokens(d), f1.tokens(by_id.at(std::string(three.shard(s).external_id(d)))));
  }
  EXPECT_EQ(docs, one.shard(0).num_docs());
}
