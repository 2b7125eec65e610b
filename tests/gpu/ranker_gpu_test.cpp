// The GPU ranker against its CPU twin (gpu/ranker_engine.hpp, isn/ranker/cpu_ranker.hpp): feature
// extraction, every transform type, the trees, the net (cuBLAS), and whole rankers (the three
// reference shapes) on random and adversarial requests; XGBoost parity on the GPU. Skips loudly
// without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "common/forward_index.hpp"
#include "gpu/ranker_engine.hpp"
#include "isn/ranker/cpu_ranker.hpp"
#include "isn/ranker/ranker_file.hpp"
#include "isn/ranker/reference_rankers.hpp"
#include "isn/ranker/xgboost_model.hpp"
#include "test_support.hpp"
#include "xgboost_runner.hpp"

using namespace gpusearch;
using namespace gpusearch::ranker;
using namespace gpusearch::testing;
namespace fs = std::filesystem;

namespace {

#define REQUIRE_GPU()                                                                            \
  do {                                                                                           \
    if (gpu::ranker_device_count() == 0)                                                         \
      GTEST_SKIP() << "NO CUDA DEVICE: GPU test skipped (run launch/gpu-host.sh on a GPU host)"; \
  } while (0)

// A request of `queries` queries with candidates of random streams; `max_len` 0 gives empty
// documents.
// Tokens are drawn from `vocabulary` term IDs, of which the queries use the first 64: 80 makes
// query terms dense, thousands rare.
FeatureBatch random_batch(std::mt19937_64& rng, std::uint32_t queries, std::uint32_t docs_per_query,
                          std::uint32_t max_len, std::uint32_t vocabulary = 80) {
  FeatureBatch b;
  b.params = {1.2f, 0.75f, float(max_len) / 2 + 1};
  for (std::uint32_t q = 0; q < queries; ++q) {
    FeatureQuery fq;
    fq.first_term = std::uint32_t(b.terms.size());
    fq.num_terms = 1 + std::uint32_t(rng() % 40);  // more than 32 sometimes
    fq.alpha = 0.3f;
    for (std::uint32_t i = 0; i < fq.num_terms; ++i) {
      b.terms.push_back(std::uint32_t(rng() % 64) * 4099);
      b.idf.push_back(0.5f + float(rng() % 900) / 100.0f);
      if (i < kMaxRankerTerms) fq.idf_sum += b.idf.back();
    }
    b.queries.push_back(fq);
    for (std::uint32_t d = 0; d < docs_per_query; ++d) {
      FeatureDoc doc;
      doc.query = q;
      doc.stream_offset = b.streams.size();
      const std::uint32_t len = max_len ? std::uint32_t(rng() % max_len) : 0;
      for (std::uint32_t i = 0; i < len; ++i)
        vbyte::append(std::uint32_t(rng() % vocabulary) * 4099, b.streams);
      doc.stream_bytes = std::uint32_t(b.streams.size() - doc.stream_offset);
      doc.doc_length = len;
      doc.pagerank = float(rng() % 1000) / 1000.0f;
      doc.gs = float(rng() % 1000) / 1000.0f;
      b.docs.push_back(doc);
    }
  }
  return b;
}

void expect_near_rel(float got, float want, double rel, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
    return;
  }
  EXPECT_NEAR(got, want, rel * std::max(1.0, double(std::fabs(want)))) << what;
}

std::shared_ptr<const CompiledRanker> compiled(const RankerSpec& spec, ColumnSpace space) {
  return std::make_shared<const CompiledRanker>(compile(spec, space, spec.name));
}

}  // namespace

TEST(GpuRanker, FeatureExtractionEqualsTheCpuTwin) {
  REQUIRE_GPU();
  gpu::GpuRankerEngine engine;
  std::mt19937_64 rng(21);
  for (const auto [queries, docs, len] :
       {std::array<std::uint32_t, 3>{1, 1, 50}, {3, 700, 300}, {2, 5, 0}, {1, 10000, 200}}) {
    const FeatureBatch b = random_batch(rng, queries, docs, len);
    std::vector<float> cpu(b.num_docs() * kFeatureStride), gpu(cpu.size());
    extract_features(b, cpu);
    engine.extract_features(b, gpu);
    for (std::size_t i = 0; i < cpu.size(); ++i)
      expect_near_rel(gpu[i], cpu[i], 1e-6,
                      "doc " + std::to_string(i / kFeatureStride) + " feature " +
                          std::string(feature_name(std::uint32_t(i % kFeatureStride))));
  }
  // No candidates at all.
  FeatureBatch empty;
  std::vector<float> none;
  EXPECT_NO_THROW(engine.extract_features(empty, none));
}

// Long streams walked a warp per segment (two launches, the states merged) give the CPU twin's
// features: dense and rare query terms (walk 2 from kept occurrences or from the stream again),
// segments from the smallest allowed to the default, both token decoders.
TEST(GpuRanker, SegmentedStreamsEqualTheCpuTwin) {
  REQUIRE_GPU();
  gpu::GpuRankerEngine engine;
  EXPECT_THROW(engine.set_feature_options({64, true}), Error);
  std::mt19937_64 rng(33);
  std::vector<FeatureBatch> batches;
  batches.push_back(random_batch(rng, 3, 40, 6000));        // dense
  batches.push_back(random_batch(rng, 2, 60, 9000, 3000));  // rare
  batches.push_back(random_batch(rng, 4, 200, 400, 200));   // short and long mixed below
  for (const bool shuffle : {true, false}) {
    for (const std::uint32_t segment : {128u, 300u, 4096u}) {
      engine.set_feature_options({segment, shuffle});
      for (const FeatureBatch& b : batches) {
        std::vector<float> cpu(b.num_docs() * kFeatureStride), gpu(cpu.size());
        extract_features(b, cpu);
        const gpu::RankerTimings t = engine.extract_features(b, gpu);
        std::uint64_t longer = 0;
        for (const FeatureDoc& d : b.docs) longer += d.stream_bytes > segment;
        EXPECT_EQ(t.segmented_streams, longer);
        EXPECT_GE(t.feature_units, b.num_docs() + longer);
        for (std::size_t i = 0; i < cpu.size(); ++i)
          expect_near_rel(gpu[i], cpu[i], 1e-6,
                          "segment " + std::to_string(segment) + (shuffle ? " shuffle" : " reread") +
                              " doc " + std::to_string(i / kFeatureStride) + " feature " +
                              std::string(feature_name(std::uint32_t(i % kFeatureStride))));
      }
    }
  }
}

// Streams referenced in a forward index (not copied into the request): resident on the device
// after attach_streams, or gathered into the request's copy; both as the CPU twin.
TEST(GpuRanker, ReferencedStreamsResidentOrGathered) {
  REQUIRE_GPU();
  std::mt19937_64 rng(31);
  FeatureBatch gathered = random_batch(rng, 3, 900, 300);
  const std::vector<std::uint8_t> forward = gathered.streams;  // plays a mapped forward index
  FeatureBatch referenced = gathered;
  referenced.streams.clear();
  referenced.external_streams = forward.data();
  referenced.external_bytes = forward.size();
  std::vector<float> cpu(gathered.num_docs() * kFeatureStride);
  extract_features(referenced, cpu);
  gpu::GpuRankerEngine copying, resident;
  resident.attach_streams(forward.data(), forward.size());
  EXPECT_TRUE(resident.streams_attached(forward.data(), forward.size()));
  for (gpu::GpuRankerEngine* engine : {&copying, &resident}) {
    std::vector<float> gpu(cpu.size());
    const gpu::RankerTimings t = engine->extract_features(referenced, gpu);
    EXPECT_EQ(t.streams_resident, engine == &resident);
    if (engine == &resident) {
      EXPECT_LT(t.bytes_in, referenced.stream_bytes());
    }
    for (std::size_t i = 0; i < cpu.size(); ++i)
      expect_near_rel(gpu[i], cpu[i], 1e-6, "resident " + std::to_string(engine == &resident) +
                                                " value " + std::to_string(i));
  }
}

TEST(GpuRanker, EveryTransformTypeEqualsTheCpuTwin) {
  REQUIRE_GPU();
  gpu::GpuRankerEngine engine;
  std::mt19937_64 rng(4);
  // One ranker per transform type, and the three reference shapes (mixed groups).
  std::vector<RankerShape> shapes = {{"only-bucket", 40, 0, 0, 0, 6, {}},
                                     {"only-linear", 0, 33, 0, 0, 6, {}},
                                     {"only-log-linear", 0, 0, 70, 0, 6, {}},
                                     {"only-trees", 0, 0, 0, 100, 10, {}}};
  for (const RankerShape& s : reference_shapes()) shapes.push_back(s);
  const FeatureBatch b = random_batch(rng, 2, 400, 200);
  std::vector<float> rows(b.num_docs() * kFeatureStride);
  extract_features(b, rows);
  for (const RankerShape& shape : shapes) {
    const auto c = compiled(generate_ranker(shape, 8), ColumnSpace::kCatalog);
    const auto d = engine.upload(c);
    EXPECT_EQ(d->device_bytes(), c->bytes());
    std::vector<float> gpu(b.num_docs() * c->padded_inputs());
    engine.transform_rows(*d, rows, kFeatureStride, gpu);
    for (std::size_t r = 0; r < b.num_docs(); ++r)
      for (std::uint32_t i = 0; i < c->padded_inputs(); ++i) {
        const float want =
            apply_transform(c->transforms[i], c->nodes.data(), rows.data() + r * kFeatureStride);
        // log-linear calls logf, which may differ by an ulp between host and device libraries.
        expect_near_rel(gpu[r * c->padded_inputs() + i], want, 1e-6,
                        shape.name + " row " + std::to_string(r) + " input " + std::to_string(i));
      }
  }
}

TEST(GpuRanker, WholeRankersEqualTheCpuTwin) {
  REQUIRE_GPU();
  gpu::GpuRankerEngine engine;
  std::mt19937_64 rng(9);
  for (const RankerShape& shape : reference_shapes()) {
    const auto c = compiled(generate_ranker(shape, 4), ColumnSpace::kCatalog);
    const auto d = engine.upload(c);
    const CpuRanker cpu(c);
    for (const auto [queries, docs] : {std::array<std::uint32_t, 2>{1, 1}, {1, 100}, {4, 2500}}) {
      const FeatureBatch b = random_batch(rng, queries, docs, 250);
      std::vector<float> want(b.num_docs()), got(b.num_docs());
      cpu.rank(b, want);
      const gpu::RankerTimings t = engine.rank(*d, b, got);
      EXPECT_GT(t.gpu_ms(), 0.0);
      // cuBLAS sums in its own order: float rounding of a sum over the layer's inputs.
      for (std::size_t i = 0; i < want.size(); ++i)
        expect_near_rel(got[i], want[i], 2e-4, shape.name + " doc " + std::to_string(i));
    }
  }
}

TEST(GpuRanker, NetsOfOneToThreeLayers) {
  REQUIRE_GPU();
  gpu::GpuRankerEngine engine;
  std::mt19937_64 rng(2);
  const FeatureBatch b = random_batch(rng, 1, 3000, 150);
  for (const std::vector<std::uint32_t>& hidden : {std::vector<std::uint32_t>{}, {64}, {96, 33}}) {
    RankerShape shape{"net", 20, 4, 8, 40, 6, hidden};
    const auto c = compiled(generate_ranker(shape, 1), ColumnSpace::kCatalog);
    ASSERT_EQ(c->layers.size(), hidden.size() + 1);
    const auto d = engine.upload(c);
    std::vector<float> want(b.num_docs()), got(b.num_docs());
    CpuRanker(c).rank(b, want);
    engine.rank(*d, b, got);
    for (std::size_t i = 0; i < want.size(); ++i)
      expect_near_rel(got[i], want[i], 2e-4,
                      std::to_string(c->layers.size()) + " layers, doc " + std::to_string(i));
  }
}

TEST(GpuRanker, XgboostParity) {
  REQUIRE_GPU();
  // XGBoost's predictions: made now when this host has python3-xgboost, else those that
  // `launch/gpu-host.sh fetch` made with XGBoost on the build machine (shared data).
  TempDir tmp;
  fs::path dir = tmp.path();
  if (const auto py = python_with_xgboost()) {
    ASSERT_EQ(std::system((*py + " " + xgboost_script() + " train " + dir.string() + " 7").c_str()),
              0);
  } else if (fs::exists(shared_data("xgboost-parity/manifest.json"))) {
    dir = shared_data("xgboost-parity");
  } else {
    GTEST_SKIP() << "no Python with xgboost here and no " << shared_data("xgboost-parity")
                 << " (launch/gpu-host.sh fetch makes it): parity not checked";
  }
  const auto manifest = nlohmann::json::parse(read_text(dir / "manifest.json"));
  const std::uint32_t rows = manifest.at("rows"), cols = manifest.at("cols");
  const std::vector<float> x = read_f32(dir / "test.f32");
  gpu::GpuRankerEngine engine;
  for (const auto& m : manifest.at("models")) {
    const std::string name = m.at("name");
    const XgboostModel model = read_xgboost_json(dir / (name + ".json"));
    RankerSpec spec;
    spec.name = name;
    for (std::uint32_t c = 0; c < cols; ++c) spec.features.push_back("f" + std::to_string(c));
    for (std::uint32_t t = 0; t < model.trees.size(); ++t)
      spec.inputs.push_back({TransformType::kDecisionTree, t, 0, 0});
    spec.trees = model.trees;
    spec.sum_bias = model.base_margin;
    const auto d = engine.upload(compiled(spec, ColumnSpace::kOwnColumns));
    const std::vector<float> want = read_f32(dir / (name + ".pred.f32"));
    std::vector<float> got(rows);
    engine.score_rows(*d, x, cols, got);
    for (std::uint32_t i = 0; i < rows; ++i)
      EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i])))
          << name << " row " << i;
  }
}

TEST(GpuRanker, SecondStageOnTheGpuEqualsTheCpu) {
  REQUIRE_GPU();
  TempDir dir;
  ASSERT_EQ(run_gpusearch("index --synthetic docs=4000,seed=3 --out " + (dir / "idx").string() +
                          " --forward-index")
                .exit_code,
            0);
  write_reference_rankers(dir / "store", 4);
  for (const char* name : {"R-S-BLG", "R-M-BGD", "R-L-D"}) {
    std::string runs[3];
    int i = 0;
    for (const char* backend : {"cpu", "gpu", "gpu --ranker-copy-streams"}) {
      const fs::path run = dir / (std::string(name) + std::to_string(i) + ".run");
      const auto r =
          run_gpusearch("search --index " + (dir / "idx").string() + " --queries " +
                        (dir / "idx" / "queries.test.tsv").string() + " --k 10 --run " +
                        run.string() + " --ranker-store " + (dir / "store").string() +
                        " --ranker " + name + " --candidates 200 --ranker-backend " + backend);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      runs[i++] = run.string();
    }
    for (int j = 1; j < 3; ++j) {
      const auto cmp = run_gpusearch("compare-runs " + runs[0] + " " + runs[j] + " --tolerance 1e-5");
      EXPECT_EQ(cmp.exit_code, 0) << name << " run " << j << ": " << cmp.output;
    }
  }
}
