// Two-stage search (issue 12): `gpusearch search --ranker-store DIR --ranker NAME --candidates N`
// answers every query with the top k of each shard's first-stage top N re-scored by the ranker,
// which equals an independent reference (the reference engine's top N, features from the forward
// index, the ranker spec evaluated input by input in double, the shards merged); a query's own
// ranker (the third TSV column) wins over --ranker; an unknown or malformed ranker leaves its
// queries with the first stage's answer, flagged and counted, and nothing is lost.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/forward_index.hpp"
#include "common/run_file.hpp"
#include "common/shard_index.hpp"
#include "isn/engine_factory.hpp"
#include "isn/ranker/cpu_ranker.hpp"
#include "isn/ranker/ranker_store.hpp"
#include "isn/ranker/reference_rankers.hpp"
#include "isn/ranker/second_stage.hpp"
#include "isn/search_session.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using namespace gpusearch::ranker;
using namespace gpusearch::testing;
namespace fs = std::filesystem;

namespace {

struct Collection {
  TempDir dir;
  fs::path index, store, queries;
  Collection() {
    index = dir / "idx";
    store = dir / "store";
    const auto r = run_gpusearch("generate --docs 3000 --seed 5 --out " + (dir / "gen").string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto b = run_gpusearch("index --corpus " + (dir / "gen" / "corpus.jsonl").string() +
                                 " --out " + index.string() + " --shards 2 --forward-index");
    EXPECT_EQ(b.exit_code, 0) << b.output;
    write_reference_rankers(store, 4);
    // 60 test queries.
    std::istringstream all(read_text(dir / "gen" / "queries.test.tsv"));
    std::string line, text;
    for (int i = 0; i < 60 && std::getline(all, line);) {
      if (line.empty()) continue;
      text += line + "\n";
      ++i;
    }
    queries = dir / "q.tsv";
    write_text(queries, text);
  }
};

Collection& collection() {
  static Collection c;
  return c;
}

// The spec's score of one catalog row, input by input in file order, the net in double.
double spec_score(const RankerSpec& spec, const float* row) {
  std::vector<double> x;
  const auto col = [&](std::uint32_t j) { return row[*find_feature(spec.features[j])]; };
  for (const InputSpec& in : spec.inputs) {
    if (in.type == TransformType::kDecisionTree) {
      const auto& nodes = spec.trees[in.index];
      std::size_t n = 0;
      while (nodes[n].feature >= 0) {
        const float f = col(std::uint32_t(nodes[n].feature));
        n = nodes[n].left +
            ((std::isnan(f) ? nodes[n].default_left != 0 : f < nodes[n].value) ? 0 : 1);
      }
      x.push_back(nodes[n].value);
    } else {
      ModelInputTransform t{in.type, 0, in.param1, in.param2};
      const float v = col(in.index);
      x.push_back(apply_transform(t, nullptr, &v));
    }
  }
  for (const NetLayer& l : spec.net) {
    std::vector<double> y(l.outputs);
    for (std::uint32_t o = 0; o < l.outputs; ++o) {
      double s = l.bias[o];
      for (std::uint32_t i = 0; i < l.inputs; ++i) s += double(l.weights[o * l.inputs + i]) * x[i];
      y[o] = activate(l.activation, float(s));
    }
    x = y;
  }
  return x[0];
}

// qid -> the run's documents with scores, in rank order.
std::map<std::string, std::vector<std::pair<std::string, double>>> run_by_query(
    const std::string& text) {
  std::map<std::string, std::vector<std::pair<std::string, double>>> out;
  std::istringstream in(text);
  std::string qid, q0, doc, tag;
  int rank;
  double score;
  while (in >> qid >> q0 >> doc >> rank >> score >> tag) out[qid].emplace_back(doc, score);
  return out;
}

std::string search(const std::string& extra, const fs::path& queries,
                   nlohmann::json* metrics = nullptr) {
  Collection& c = collection();
  TempDir out;
  const auto r = run_gpusearch("search --index " + c.index.string() + " --queries " +
                               queries.string() + " --k 10 --run " + (out / "run").string() +
                               " --metrics " + (out / "m.json").string() +
                               // The CPU engine on every host: the tests compare runs exactly,
                               // and on a GPU host `auto` would pick the GPU's near-tie order.
                               " --engine cpu " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (metrics) *metrics = nlohmann::json::parse(read_text(out / "m.json"));
  return read_text(out / "run");
}

}  // namespace

TEST(TwoStageSearch, EqualsTheIndependentReference) {
  Collection& c = collection();
  const std::uint32_t n = 50, k = 10;
  for (const char* name : {"R-S-BLG", "R-M-BGD", "R-L-D"}) {
    nlohmann::json m;
    const auto got =
        run_by_query(search(std::string("--ranker-store ") + c.store.string() + " --ranker " +
                                name + " --candidates 50 --ranker-backend cpu",
                            c.queries, &m));
    EXPECT_EQ(m.at("second_stage").at("ranker_fallback_queries"), 0);
    // The reference: each shard's exact first-stage top N, scored from the spec.
    const RankerSpec spec = read_ranker_file(c.store / (std::string(name) + ".ranker.json"));
    const Index index = Index::open(c.index);
    const QueryFile file = read_query_file(c.queries);
    std::vector<Query> queries;
    for (const QueryText& qt : file.queries) {
      Query q;
      QueryProblem p;
      ASSERT_TRUE(resolve_query(index.shard(0), qt, {}, q, p, "q"));
      queries.push_back(q);
    }
    SearchParams first;
    first.k = n;
    first.alpha = index.params().gs_alpha;
    std::vector<std::vector<ShardResult>> per_shard;
    for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
      EngineOptions eo;
      eo.engine = "reference";
      auto engine = make_engine(eo, index.shard(s), index.shard_id(s));
      std::vector<ShardResult> results(queries.size());
      engine->search(queries, first, results);
      const ForwardIndex fwd = ForwardIndex::open(index.shard(s));
      std::vector<std::size_t> all(queries.size());
      for (std::size_t q = 0; q < all.size(); ++q) all[q] = q;
      FeatureBatch batch;
      build_feature_batch(index.shard(s), fwd, queries, all, results, first.alpha, batch);
      std::vector<float> rows(batch.num_docs() * kFeatureStride);
      extract_features(batch, rows);
      std::size_t i = 0;
      for (auto& r : results) {
        for (RankedDoc& h : r.hits) h.score = spec_score(spec, rows.data() + kFeatureStride * i++);
        keep_top_k(r.hits, k);
      }
      per_shard.push_back(std::move(results));
    }
    std::size_t compared = 0;
    for (std::size_t q = 0; q < queries.size(); ++q) {
      std::vector<const ShardResult*> parts;
      for (auto& s : per_shard) parts.push_back(&s[q]);
      SearchParams final_params;
      final_params.k = k;
      const QueryResult want = merge_shard_results(final_params, parts);
      const auto& have = got.at(queries[q].id);
      ASSERT_EQ(have.size(), want.hits.size()) << name << " query " << queries[q].id;
      for (std::size_t r = 0; r < have.size(); ++r) {
        const RankedDoc& w = want.hits[r];
        EXPECT_NEAR(have[r].second, w.score, 1e-4 * std::max(1.0, std::fabs(w.score)))
            << name << " query " << queries[q].id << " rank " << r;
        // Where scores tie within the tolerance either order passes.
        const bool tie =
            (r > 0 && std::fabs(want.hits[r - 1].score - w.score) < 1e-4) ||
            (r + 1 < have.size() && std::fabs(want.hits[r + 1].score - w.score) < 1e-4);
        if (!tie) {
          EXPECT_EQ(have[r].first, index.shard(w.shard).external_id(w.doc))
              << name << " rank " << r;
        }
        ++compared;
      }
    }
    EXPECT_GT(compared, 300u) << name;
  }
}

TEST(TwoStageSearch, OwnRankersUnknownRankersAndNothingLost) {
  Collection& c = collection();
  // Four queries: R-S-BLG by its own column, an unknown ranker, --ranker's R-M-BGD, none given.
  std::istringstream all(read_text(c.queries));
  std::vector<std::string> lines(4);
  for (auto& l : lines) std::getline(all, l);
  TempDir dir;
  const fs::path q = dir / "q.tsv";
  write_text(q, lines[0] + "\tR-S-BLG\n" + lines[1] + "\tno-such-ranker\n" + lines[2] + "\n");
  nlohmann::json m;
  const auto got = run_by_query(search("--ranker-store " + c.store.string() +
                                           " --ranker R-M-BGD --candidates 50 --ranker-backend cpu",
                                       q, &m));
  EXPECT_EQ(got.size(), 3u);  // every query answered
  const auto& ss = m.at("second_stage");
  EXPECT_EQ(ss.at("ranker_fallback_queries"), 1);
  const std::string message = ss.at("shards").at(0).at("fallback_messages").at(0);
  EXPECT_NE(message.find("store.json"), std::string::npos) << message;
  EXPECT_NE(message.find("no-such-ranker"), std::string::npos) << message;
  // The unknown ranker's query has the first stage's answer: the plain BM25 top 10.
  const auto first = run_by_query(search("", q));
  const std::string qid = lines[1].substr(0, lines[1].find('\t'));
  EXPECT_EQ(got.at(qid), first.at(qid));
  // The other two were re-ranked by different rankers: their scores are not BM25's.
  const std::string q0 = lines[0].substr(0, lines[0].find('\t'));
  EXPECT_NE(got.at(q0), first.at(q0));
  // R-S-BLG and R-M-BGD were each loaded once per shard.
  for (const auto& shard : ss.at("shards")) {
    EXPECT_EQ(shard.at("cache").at("loads"), 2);
    EXPECT_EQ(shard.at("cache").at("load_failures"), 1);
    EXPECT_EQ(shard.at("queries_ranked"), 2);
  }
}

TEST(TwoStageSearch, MalformedRankerFileFallsBackWithItsName) {
  Collection& c = collection();
  TempDir dir;
  const fs::path store = dir / "store";
  fs::create_directories(store);
  for (const char* f : {"R-S-BLG.ranker.json", "R-S-BLG.net.bin"}) fs::copy(c.store / f, store / f);
  index_ranker_store(store);
  // Corrupt the net after indexing.
  std::string net = read_text(store / "R-S-BLG.net.bin");
  net[net.size() / 2] ^= 0x40;
  write_text(store / "R-S-BLG.net.bin", net);
  nlohmann::json m;
  const auto got = run_by_query(search(
      "--ranker-store " + store.string() + " --ranker R-S-BLG --candidates 20 --ranker-backend cpu",
      c.queries, &m));
  EXPECT_EQ(got.size(), 60u);
  EXPECT_EQ(m.at("second_stage").at("ranker_fallback_queries"), 60);
  const std::string message = m.at("second_stage").at("shards").at(0).at("fallback_messages").at(0);
  EXPECT_NE(message.find("R-S-BLG"), std::string::npos) << message;
  EXPECT_EQ(got, run_by_query(search("", c.queries)));
}

TEST(TwoStageSearch, FlagsNeedAStoreAndAForwardIndex) {
  Collection& c = collection();
  TempDir out;
  auto r = run_gpusearch("search --index " + c.index.string() + " --queries " + c.queries.string() +
                         " --run " + (out / "run").string() + " --ranker R-S-BLG");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("need a ranker store"), std::string::npos) << r.output;
  // An index without a forward index.
  ASSERT_EQ(run_gpusearch("index --corpus " + (c.dir / "gen" / "corpus.jsonl").string() +
                          " --out " + (out / "plain").string())
                .exit_code,
            0);
  r = run_gpusearch("search --index " + (out / "plain").string() + " --queries " +
                    c.queries.string() + " --run " + (out / "run").string() + " --ranker-store " +
                    c.store.string() + " --ranker R-S-BLG");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("forward"), std::string::npos) << r.output;
}

TEST(TwoStageSearch, RankerMixIsDeterministic) {
  Collection& c = collection();
  nlohmann::json m;
  const std::string flags = "--ranker-store " + c.store.string() +
                            " --ranker-mix 1.0 --candidates 30 --ranker-backend cpu";
  const auto a = search(flags, c.queries, &m);
  EXPECT_EQ(a, search(flags, c.queries));
  // 60 queries over three rankers with Zipf weights 1, 1/2, 1/3: each ranker used.
  std::uint64_t loads = m.at("second_stage").at("shards").at(0).at("cache").at("loads");
  EXPECT_EQ(loads, 3u);
}
