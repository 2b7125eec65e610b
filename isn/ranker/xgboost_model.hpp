// Tree ensembles in XGBoost's JSON model format (XGBoost 1.7, `Booster.save_model("m.json")`;
// Debian's python3-xgboost / libxgboost-dev): read into the tree nodes of paper 004, Figure 3.7,
// and written back (the reference-ranker generator writes its trees in the same format, so any
// XGBoost can load them).
//
// What is read: learner.gradient_booster (gbtree only) .model.trees[*] with left_children,
// right_children, split_indices, split_conditions, default_left and split_type (numerical splits
// only); learner.learner_model_param.base_score and num_feature; learner.objective.name (for the
// link that puts base_score into margin space); learner.feature_names when present. A model
// evaluates to base_margin + sum over trees of the leaf reached, XGBoost's output_margin=True
// prediction; a split sends x < threshold left, NaN to its default side.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/ranker/model_layout.hpp"

namespace gpusearch::ranker {

struct XgboostModel {
  // Each tree breadth first from its root (node 0): the children of a node are adjacent, its
  // `left` an offset from the root (the layout the evaluators walk).
  std::vector<std::vector<TreeNode>> trees;
  float base_margin = 0;  // base_score through the objective's link
  std::string objective;
  std::uint32_t num_features = 0;
  std::vector<std::string> feature_names;  // empty when the model has none
};

// Throws gpusearch::Error naming `source` (and the tree and node) for anything it cannot
// evaluate exactly: another booster (dart, gblinear), categorical splits, several classes or
// targets, an unknown objective, inconsistent arrays, a node reached twice, a split on a
// feature outside num_feature, a tree deeper than kMaxTreeDepth.
XgboostModel parse_xgboost_json(const nlohmann::json& j, const std::string& source);
XgboostModel read_xgboost_json(const std::filesystem::path& file);

// A JSON model XGBoost 1.7 loads (gbtree, the given objective, base_score in probability space
// for logistic objectives). Trees in the layout above.
nlohmann::json to_xgboost_json(const XgboostModel& m);

}  // namespace gpusearch::ranker
