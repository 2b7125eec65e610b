// XGBoost parity of the CPU tree evaluation (issue 12): models that XGBoost trains at test time
// (depths 2 to 8; squared error, logistic with a non-default base_score, pairwise and NDCG
// ranking; 15% missing values) score XGBoost's own output_margin predictions within 1e-5. And the
// trees our generator writes load in XGBoost and predict what we predict. Skips, saying so, when
// no Python with XGBoost (Debian: python3-xgboost) is installed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

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

// A plain XGBoost ensemble as a ranker over the data's own columns: the trees summed plus the
// base margin.
CompiledRanker ensemble(const XgboostModel& m, std::uint32_t cols, const std::string& name) {
  RankerSpec spec;
  spec.name = name;
  for (std::uint32_t c = 0; c < cols; ++c) spec.features.push_back("f" + std::to_string(c));
  for (std::uint32_t t = 0; t < m.trees.size(); ++t)
    spec.inputs.push_back({TransformType::kDecisionTree, t, 0, 0});
  spec.trees = m.trees;
  spec.sum_bias = m.base_margin;
  return compile(spec, ColumnSpace::kOwnColumns, name);
}

}  // namespace

TEST(XgboostParity, CpuTreesEqualXgboostPredictions) {
  const auto py = python_with_xgboost();
  if (!py)
    GTEST_SKIP() << "no Python with xgboost (apt-get install python3-xgboost): parity not checked";
  TempDir dir;
  ASSERT_EQ(
      std::system((*py + " " + xgboost_script() + " train " + dir.path().string() + " 7").c_str()),
      0);
  const auto manifest = nlohmann::json::parse(read_text(dir / "manifest.json"));
  const std::uint32_t rows = manifest.at("rows"), cols = manifest.at("cols");
  const std::vector<float> x = read_f32(dir / "test.f32");
  ASSERT_EQ(x.size(), std::size_t(rows) * cols);
  std::size_t models = 0;
  for (const auto& m : manifest.at("models")) {
    const std::string name = m.at("name");
    const XgboostModel model = read_xgboost_json(dir / (name + ".json"));
    const auto compiled = std::make_shared<const CompiledRanker>(ensemble(model, cols, "p" + name));
    const std::vector<float> want = read_f32(dir / (name + ".pred.f32"));
    ASSERT_EQ(want.size(), rows);
    std::vector<float> got(rows);
    CpuRanker(compiled).score_rows(x, cols, got);
    double worst = 0;
    for (std::uint32_t i = 0; i < rows; ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i])))
          << name << " row " << i;
      worst = std::max(worst, double(std::fabs(got[i] - want[i])));
    }
    std::cout << "  " << name << " (" << model.objective << ", " << model.trees.size()
              << " trees): largest difference " << worst << "\n";
    ++models;
  }
  EXPECT_EQ(models, 6u);
}

TEST(XgboostParity, XgboostLoadsOurTreesAndAgrees) {
  const auto py = python_with_xgboost();
  if (!py)
    GTEST_SKIP() << "no Python with xgboost (apt-get install python3-xgboost): parity not checked";
  TempDir dir;
  RankerShape shape{"gen", 0, 0, 0, 60, 7, {}};
  RankerSpec spec = generate_ranker(shape, 11);
  spec.net.clear();  // the trees' plain sum, as XGBoost adds them
  spec.sum_bias = 0.25f;
  write_ranker_file(dir.path(), spec);
  const std::uint32_t cols = std::uint32_t(spec.features.size());
  std::mt19937_64 rng(3);
  std::vector<float> x(400 * cols);
  for (float& v : x) v = rng() % 10 == 0 ? std::nanf("") : float(rng() % 4000) / 10.0f;
  write_f32(dir / "x.f32", x);
  ASSERT_EQ(std::system((*py + " " + xgboost_script() + " predict " +
                         (dir / "gen.trees.json").string() + " " + (dir / "x.f32").string() + " " +
                         std::to_string(cols) + " " + (dir / "p.f32").string())
                            .c_str()),
            0);
  const std::vector<float> want = read_f32(dir / "p.f32");
  const auto back = read_ranker_file(dir / "gen.ranker.json");
  const auto compiled =
      std::make_shared<const CompiledRanker>(compile(back, ColumnSpace::kOwnColumns, "gen"));
  std::vector<float> got(400);
  CpuRanker(compiled).score_rows(x, cols, got);
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << "row " << i;
}
