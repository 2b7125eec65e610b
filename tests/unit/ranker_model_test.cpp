// Rankers (isn/ranker): the transforms of Table 3.1, compilation into type groups padded to whole
// warps (3.4) that scores exactly as the inputs in file order, the ranker file and net file
// round trip, the reference rankers' shapes (Table 4.2) and determinism, and the store: loads by
// name, refuses unknown, changed and malformed rankers with an error naming the file.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "common/ranker/feature_catalog.hpp"
#include "isn/ranker/cpu_ranker.hpp"
#include "isn/ranker/ranker_file.hpp"
#include "isn/ranker/ranker_store.hpp"
#include "isn/ranker/reference_rankers.hpp"
#include "isn/ranker/xgboost_model.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using namespace gpusearch::ranker;
using namespace gpusearch::testing;
namespace fs = std::filesystem;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The spec evaluated the obvious way: inputs in file order, trees walked by their own node
// lists, the net in double.
double naive_score(const RankerSpec& spec, const std::vector<float>& row /* spec columns */) {
  std::vector<double> x;
  for (const InputSpec& in : spec.inputs) {
    const float v = in.type == TransformType::kDecisionTree ? 0.0f : row[in.index];
    switch (in.type) {
      case TransformType::kLinear:
        x.push_back(std::isnan(v) ? 0.0 : double(v * in.param1 + in.param2));
        break;
      case TransformType::kLogLinear:
        x.push_back(std::isnan(v)
                        ? 0.0
                        : double(std::log(std::max(v, 0.0f) + 1.0f) * in.param1 + in.param2));
        break;
      case TransformType::kBucket:
        x.push_back(in.param1 <= v && v < in.param2 ? 1.0 : 0.0);
        break;
      case TransformType::kDecisionTree: {
        const auto& nodes = spec.trees[in.index];
        std::size_t n = 0;
        while (nodes[n].feature >= 0) {
          const float f = row[std::size_t(nodes[n].feature)];
          const bool left = std::isnan(f) ? nodes[n].default_left != 0 : f < nodes[n].value;
          n = nodes[n].left + (left ? 0 : 1);
        }
        x.push_back(nodes[n].value);
        break;
      }
      default:
        ADD_FAILURE() << "dummy in a spec";
    }
  }
  if (spec.net.empty()) {
    double s = spec.sum_bias;
    for (double v : x) s += v;
    return s;
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

std::vector<float> random_catalog_row(std::mt19937_64& rng) {
  std::vector<float> row(kFeatureStride, 0.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (std::uint32_t f = 0; f < kNumFeatures; ++f) {
    const float scale = f == std::uint32_t(Feature::kDocLength) ? 400.0f : 30.0f;
    row[f] = u(rng) < 0.1f ? kNaN : u(rng) * scale;
  }
  return row;
}

RankerSpec small_spec() {
  RankerSpec s;
  s.name = "small";
  s.features = {"bm25", "doc_length", "min_window"};
  s.inputs = {{TransformType::kLinear, 0, 0.5f, 1.0f},
              {TransformType::kBucket, 1, 10.0f, 100.0f},
              {TransformType::kDecisionTree, 0, 0, 0},
              {TransformType::kLogLinear, 1, 2.0f, -1.0f}};
  // min_window < 5 ? (bm25 < 3 ? 1 : 2) : 3, NaN goes right.
  s.trees = {
      {{2, 1, 5.0f, 0}, {0, 3, 3.0f, 1}, {-1, 0, 3.0f, 0}, {-1, 0, 1.0f, 0}, {-1, 0, 2.0f, 0}}};
  s.net = {{4, 2, Activation::kRelu, {1, 2, 3, 4, -1, 0.5f, 0, 1}, {0.1f, -0.2f}},
           {2, 1, Activation::kIdentity, {1.5f, -0.5f}, {0.25f}}};
  return s;
}

}  // namespace

TEST(RankerTransforms, Table31Semantics) {
  const float row[3] = {2.0f, kNaN, -5.0f};
  EXPECT_FLOAT_EQ(apply_transform({TransformType::kLinear, 0, 3.0f, 1.0f}, nullptr, row), 7.0f);
  EXPECT_FLOAT_EQ(apply_transform({TransformType::kLogLinear, 0, 2.0f, 1.0f}, nullptr, row),
                  std::log(3.0f) * 2.0f + 1.0f);
  EXPECT_FLOAT_EQ(apply_transform({TransformType::kLogLinear, 2, 2.0f, 1.0f}, nullptr, row), 1.0f);
  EXPECT_EQ(apply_transform({TransformType::kBucket, 0, 2.0f, 3.0f}, nullptr, row),
            1.0f);  // lower <=
  EXPECT_EQ(apply_transform({TransformType::kBucket, 0, 1.0f, 2.0f}, nullptr, row),
            0.0f);  // < upper
  // A missing feature contributes nothing.
  EXPECT_EQ(apply_transform({TransformType::kLinear, 1, 3.0f, 1.0f}, nullptr, row), 0.0f);
  EXPECT_EQ(apply_transform({TransformType::kBucket, 1, -1e30f, 1e30f}, nullptr, row), 0.0f);
  EXPECT_EQ(apply_transform({TransformType::kDummy, 0, 3.0f, 1.0f}, nullptr, row), 0.0f);
  // A tree: x < threshold goes left; NaN follows default_left.
  const TreeNode tree[3] = {{0, 1, 2.0f, 1}, {-1, 0, 10.0f, 0}, {-1, 0, 20.0f, 0}};
  EXPECT_EQ(apply_transform({TransformType::kDecisionTree, 0, 0, 0}, tree, row),
            20.0f);  // 2 < 2 false
  const TreeNode nan_tree[3] = {{1, 1, 2.0f, 1}, {-1, 0, 10.0f, 0}, {-1, 0, 20.0f, 0}};
  EXPECT_EQ(apply_transform({TransformType::kDecisionTree, 0, 0, 0}, nan_tree, row), 10.0f);
}

TEST(RankerCompile, GroupsByTypeAndPadsToWarps) {
  const RankerSpec spec = generate_ranker(reference_shapes()[1], 9);  // R-M-BGD
  const CompiledRanker r = compile(spec, ColumnSpace::kCatalog, "R-M-BGD");
  ASSERT_EQ(r.groups.size(), 3u);  // log-linear, bucket, trees (no linear)
  EXPECT_EQ(r.groups[0].type, TransformType::kLogLinear);
  EXPECT_EQ(r.groups[0].used, 5u);
  EXPECT_EQ(r.groups[1].type, TransformType::kBucket);
  EXPECT_EQ(r.groups[1].used, 10u);
  EXPECT_EQ(r.groups[2].type, TransformType::kDecisionTree);
  EXPECT_EQ(r.groups[2].used, 500u);
  for (const TransformGroup& g : r.groups) {
    EXPECT_EQ((g.end - g.begin) % kWarpSize, 0u);
    // Every warp runs one kind of transform, and the padding weighs nothing.
    for (std::uint32_t i = g.begin + g.used; i < g.end; ++i) {
      EXPECT_EQ(r.transforms[i].type, TransformType::kDummy);
      EXPECT_EQ(r.layers[0].weights[i], 0.0f);
    }
  }
  EXPECT_EQ(r.padded_inputs(), 32u + 32u + 512u);
  EXPECT_EQ(r.model_inputs, 515u);
}

TEST(RankerCompile, ScoresEqualTheInputsInFileOrder) {
  std::mt19937_64 rng(5);
  for (const RankerShape& shape : reference_shapes()) {
    const RankerSpec spec = generate_ranker(shape, 3);
    auto compiled =
        std::make_shared<const CompiledRanker>(compile(spec, ColumnSpace::kCatalog, shape.name));
    const CpuRanker cpu(compiled);
    CpuRanker::Scratch scratch;
    for (int i = 0; i < 50; ++i) {
      const auto row = random_catalog_row(rng);
      std::vector<float> own(spec.features.size());
      for (std::size_t j = 0; j < spec.features.size(); ++j)
        own[j] = row[*find_feature(spec.features[j])];
      const double want = naive_score(spec, own);
      const float got = cpu.score_row(row.data(), scratch);
      EXPECT_NEAR(got, want, 1e-4 * std::max(1.0, std::fabs(want))) << shape.name << " row " << i;
    }
  }
}

TEST(RankerFile, RoundTripsThroughFiles) {
  TempDir dir;
  const RankerSpec spec = small_spec();
  const fs::path file = write_ranker_file(dir.path(), spec);
  EXPECT_TRUE(fs::exists(dir / "small.trees.json"));
  EXPECT_TRUE(fs::exists(dir / "small.net.bin"));
  const RankerSpec back = read_ranker_file(file);
  EXPECT_EQ(back.features, spec.features);
  ASSERT_EQ(back.inputs.size(), spec.inputs.size());
  EXPECT_EQ(back.files.size(), 3u);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 100; ++i) {
    std::vector<float> row{float(rng() % 10), float(rng() % 200),
                           i % 7 == 0 ? kNaN : float(rng() % 10)};
    EXPECT_DOUBLE_EQ(naive_score(back, row), naive_score(spec, row));
    const CompiledRanker c = compile(back, ColumnSpace::kOwnColumns, "small");
    const CpuRanker cpu(std::make_shared<const CompiledRanker>(c));
    CpuRanker::Scratch s;
    EXPECT_NEAR(cpu.score_row(row.data(), s), naive_score(spec, row), 1e-5);
  }
}

TEST(RankerFile, BadFilesNameTheFile) {
  TempDir dir;
  const RankerSpec spec = small_spec();
  const fs::path file = write_ranker_file(dir.path(), spec);
  const std::string good = read_text(file);
  const auto expect_error = [&](const std::string& text, const fs::path& blamed,
                                const std::string& what) {
    write_text(file, text);
    try {
      read_ranker_file(file);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const RankerError& e) {
      EXPECT_EQ(fs::path(e.file()).filename(), blamed.filename()) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const auto replace = [&](std::string s, const std::string& a, const std::string& b) {
    const auto at = s.find(a);
    EXPECT_NE(at, std::string::npos) << a;
    return s.replace(at, a.size(), b);
  };
  expect_error("{not json", file, "not JSON");
  expect_error(replace(good, "gpusearch-ranker", "other"), file, "not a ranker file");
  expect_error(replace(good, "\"version\": 1", "\"version\": 7"), file, "version 7");
  expect_error(replace(good, "\"bm25\"", "\"bm26\""), file, "unknown feature 'bm26'");
  expect_error(replace(good, "\"bucket\"", "\"spline\""), file, "unknown type 'spline'");
  expect_error(replace(good, "small.trees.json", "missing.json"), dir / "missing.json",
               "cannot open");
  expect_error(replace(good, "small.trees.json", "../x.json"), file, "must name a file");
  expect_error(replace(good, "\"name\": \"small\"", "\"name\": \"other\""), file,
               "is not other.ranker.json");
  write_text(file, good);
  // A corrupt net file and a corrupt tree model are blamed on themselves.
  std::string net = read_text(dir / "small.net.bin");
  net[20] ^= 1;
  write_text(dir / "small.net.bin", net);
  expect_error(good, dir / "small.net.bin", "checksum");
  write_ranker_file(dir.path(), spec);
  std::string trees = read_text(dir / "small.trees.json");
  trees = replace(trees, "\"left_children\":[1,3", "\"left_children\":[1,9");
  write_text(dir / "small.trees.json", trees);
  expect_error(good, dir / "small.trees.json", "outside the");
}

TEST(RankerFile, XgboostTreesMustMatchTheFeatureMap) {
  TempDir dir;
  RankerSpec spec = small_spec();
  write_ranker_file(dir.path(), spec);
  // The trees' model names its features; the ranker lists them in another order.
  std::string text = read_text(dir / "small.ranker.json");
  const auto at = text.find("\"features\"");
  const auto end = text.find(']', at);
  text.replace(at, end - at + 1, "\"features\": [\"doc_length\", \"bm25\", \"min_window\"]");
  write_text(dir / "small.ranker.json", text);
  try {
    read_ranker_file(dir / "small.ranker.json");
    FAIL() << "accepted a feature map that differs from the model's";
  } catch (const RankerError& e) {
    EXPECT_NE(std::string(e.what()).find("feature 0 is 'bm25'"), std::string::npos) << e.what();
  }
}

TEST(ReferenceRankers, ShapesOfTable42AndDeterministic) {
  TempDir a, b;
  write_reference_rankers(a.path(), 4);
  write_reference_rankers(b.path(), 4);
  for (const char* f : {"R-S-BLG.ranker.json", "R-M-BGD.trees.json", "R-L-D.net.bin", "store.json"})
    EXPECT_EQ(read_text(a / f), read_text(b / f)) << f;
  const RankerStore store = RankerStore::open(a.path());
  ASSERT_EQ(store.index().rankers.size(), 3u);
  struct Want {
    const char* name;
    std::uint32_t inputs, trees, layers, bucket, linear, log_linear;
  };
  for (const Want w :
       {Want{"R-S-BLG", 125, 0, 1, 54, 2, 69}, Want{"R-M-BGD", 515, 500, 1, 10, 0, 5},
        Want{"R-L-D", 1250, 1250, 2, 0, 0, 0}}) {
    const auto r = store.load(w.name);
    EXPECT_EQ(r->model_inputs, w.inputs) << w.name;
    EXPECT_EQ(r->trees, w.trees) << w.name;
    EXPECT_EQ(r->layers.size(), w.layers) << w.name;
    std::uint32_t counts[kNumTransformTypes] = {};
    for (const auto& t : r->transforms) ++counts[std::uint32_t(t.type)];
    EXPECT_EQ(counts[std::uint32_t(TransformType::kBucket)], w.bucket) << w.name;
    EXPECT_EQ(counts[std::uint32_t(TransformType::kLinear)], w.linear) << w.name;
    EXPECT_EQ(counts[std::uint32_t(TransformType::kLogLinear)], w.log_linear) << w.name;
    EXPECT_EQ(store.index().find(w.name)->bytes, r->bytes());
  }
}

TEST(RankerStore, UnknownChangedAndMalformedRankers) {
  TempDir dir;
  write_ranker_file(dir.path(), small_spec());
  index_ranker_store(dir.path());
  const RankerStore store = RankerStore::open(dir.path());
  EXPECT_NE(store.load("small"), nullptr);
  try {
    store.load("nope");
    FAIL();
  } catch (const RankerError& e) {
    EXPECT_EQ(fs::path(e.file()).filename(), "store.json");
    EXPECT_NE(std::string(e.what()).find("no ranker named 'nope'"), std::string::npos);
  }
  // Changed after indexing (still valid): the store's checksum catches it.
  write_text(dir / "small.ranker.json", read_text(dir / "small.ranker.json") + "\n");
  try {
    store.load("small");
    FAIL();
  } catch (const RankerError& e) {
    EXPECT_NE(std::string(e.what()).find("changed since the store was indexed"), std::string::npos)
        << e.what();
  }
  // Indexing refuses a malformed ranker, naming it.
  write_text(dir / "bad.ranker.json", "{\"format\": \"gpusearch-ranker\"}");
  EXPECT_THROW(index_ranker_store(dir.path()), RankerError);
  EXPECT_THROW(RankerStore::open(dir / "no-such-dir"), InputError);
}

TEST(XgboostModel, RefusesWhatItCannotEvaluate) {
  const RankerSpec spec = small_spec();
  XgboostModel m;
  m.trees = spec.trees;
  m.num_features = 3;
  m.objective = "reg:squarederror";
  nlohmann::json j = to_xgboost_json(m);
  EXPECT_NO_THROW(parse_xgboost_json(j, "m.json"));
  auto bad = j;
  bad["learner"]["gradient_booster"]["name"] = "dart";
  EXPECT_THROW(parse_xgboost_json(bad, "m.json"), Error);
  bad = j;
  bad["learner"]["objective"]["name"] = "multi:softprob";
  EXPECT_THROW(parse_xgboost_json(bad, "m.json"), Error);
  bad = j;
  bad["learner"]["gradient_booster"]["model"]["trees"][0]["split_type"][0] = 1;
  EXPECT_THROW(parse_xgboost_json(bad, "m.json"), Error);
  bad = j;
  bad["learner"]["gradient_booster"]["model"]["trees"][0]["split_indices"][0] = 7;  // of 3
  EXPECT_THROW(parse_xgboost_json(bad, "m.json"), Error);
  bad = j;
  bad["learner"]["gradient_booster"]["model"]["trees"][0]["left_children"][1] = 0;  // a cycle
  EXPECT_THROW(parse_xgboost_json(bad, "m.json"), Error);
  // Logistic base_score goes through the logit.
  auto logistic = j;
  logistic["learner"]["objective"]["name"] = "binary:logistic";
  logistic["learner"]["learner_model_param"]["base_score"] = "7.5E-1";
  EXPECT_FLOAT_EQ(parse_xgboost_json(logistic, "m.json").base_margin, std::log(3.0f));
}
