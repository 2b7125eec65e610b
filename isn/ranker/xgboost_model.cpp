#include "isn/ranker/xgboost_model.hpp"

#include <cmath>
#include <deque>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace gpusearch::ranker {

namespace {

enum class Link { kIdentity, kLogit, kLog };

// The objectives whose base_score maps to the margin the trees add to (XGBoost's ProbToMargin).
Link objective_link(const std::string& name, const std::string& source) {
  for (const char* n :
       {"reg:squarederror", "reg:linear", "reg:squaredlogerror", "reg:pseudohubererror",
        "reg:absoluteerror", "rank:pairwise", "rank:ndcg", "rank:map", "binary:hinge"})
    if (name == n) return Link::kIdentity;
  for (const char* n : {"binary:logistic", "reg:logistic", "binary:logitraw"})
    if (name == n) return Link::kLogit;
  for (const char* n : {"count:poisson", "reg:gamma", "reg:tweedie"})
    if (name == n) return Link::kLog;
  throw Error(
      fmt::format("{}: objective '{}' is not supported (regression, ranking and binary "
                  "objectives with one output are)",
                  source, name));
}

// XGBoost writes most model parameters as strings ("5E-1", "10").
float number_field(const nlohmann::json& obj, const char* key, const std::string& source) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw Error(fmt::format("{}: '{}' is missing", source, key));
  try {
    if (it->is_string()) return std::stof(it->get<std::string>());
    if (it->is_number()) return it->get<float>();
  } catch (const std::exception&) {
  }
  throw Error(fmt::format("{}: '{}' is not a number", source, key));
}

template <typename T>
std::vector<T> array_field(const nlohmann::json& tree, const char* key, std::size_t n,
                           const std::string& where) {
  const auto it = tree.find(key);
  if (it == tree.end() || !it->is_array())
    throw Error(fmt::format("{}: '{}' is missing or not an array", where, key));
  if (it->size() != n)
    throw Error(fmt::format("{}: '{}' has {} entries for {} nodes", where, key, it->size(), n));
  std::vector<T> out;
  out.reserve(n);
  for (const auto& v : *it) {
    if (v.is_boolean())
      out.push_back(T(v.get<bool>()));
    else if (v.is_number())
      out.push_back(v.get<T>());
    else
      throw Error(fmt::format("{}: '{}' holds a non-number", where, key));
  }
  return out;
}

std::vector<TreeNode> parse_tree(const nlohmann::json& tree, std::uint32_t num_features,
                                 const std::string& where) {
  const auto left = tree.find("left_children");
  if (left == tree.end() || !left->is_array() || left->empty())
    throw Error(fmt::format("{}: 'left_children' is missing or empty", where));
  const std::size_t n = left->size();
  const auto lc = array_field<std::int64_t>(tree, "left_children", n, where);
  const auto rc = array_field<std::int64_t>(tree, "right_children", n, where);
  const auto feat = array_field<std::int64_t>(tree, "split_indices", n, where);
  const auto cond = array_field<double>(tree, "split_conditions", n, where);
  const auto dflt = array_field<std::int64_t>(tree, "default_left", n, where);
  if (tree.contains("split_type")) {
    const auto st = array_field<std::int64_t>(tree, "split_type", n, where);
    for (std::size_t i = 0; i < n; ++i)
      if (st[i] != 0)
        throw Error(
            fmt::format("{}: node {} is a categorical split (only numerical splits are "
                        "supported)",
                        where, i));
  }
  // Breadth first from node 0; children get adjacent slots.
  std::vector<TreeNode> out(1);
  std::vector<bool> seen(n, false);
  struct Item {
    std::size_t old_id, new_id;
    unsigned depth;
  };
  std::deque<Item> queue{{0, 0, 0}};
  seen[0] = true;
  while (!queue.empty()) {
    const Item it = queue.front();
    queue.pop_front();
    const std::size_t i = it.old_id;
    TreeNode& node = out[it.new_id];
    node.value = float(cond[i]);
    if (!std::isfinite(node.value))
      throw Error(fmt::format("{}: node {} has a non-finite value", where, i));
    if (lc[i] == -1 && rc[i] == -1) {
      node.feature = -1;
      continue;
    }
    if (lc[i] < 0 || rc[i] < 0 || std::size_t(lc[i]) >= n || std::size_t(rc[i]) >= n)
      throw Error(fmt::format("{}: node {} has children {} and {}, outside the {} nodes", where, i,
                              lc[i], rc[i], n));
    if (seen[std::size_t(lc[i])] || seen[std::size_t(rc[i])])
      throw Error(fmt::format("{}: node {} reaches a node twice (not a tree)", where, i));
    if (feat[i] < 0 || std::uint64_t(feat[i]) >= num_features)
      throw Error(
          fmt::format("{}: node {} splits on feature {} of {}", where, i, feat[i], num_features));
    if (it.depth + 1 >= kMaxTreeDepth)
      throw Error(fmt::format("{}: deeper than {} levels", where, kMaxTreeDepth));
    const std::size_t l = out.size();
    node.feature = std::int32_t(feat[i]);
    node.left = std::uint32_t(l);
    node.default_left = dflt[i] != 0;
    seen[std::size_t(lc[i])] = seen[std::size_t(rc[i])] = true;
    out.resize(l + 2);  // invalidates `node`
    queue.push_back({std::size_t(lc[i]), l, it.depth + 1});
    queue.push_back({std::size_t(rc[i]), l + 1, it.depth + 1});
  }
  return out;
}

}  // namespace

XgboostModel parse_xgboost_json(const nlohmann::json& j, const std::string& source) {
  XgboostModel m;
  try {
    if (!j.is_object() || !j.contains("learner"))
      throw Error(fmt::format("{}: not an XGBoost JSON model (no 'learner')", source));
    const auto& learner = j.at("learner");
    const auto& booster = learner.at("gradient_booster");
    const std::string booster_name = booster.value("name", "");
    if (booster_name != "gbtree")
      throw Error(
          fmt::format("{}: booster '{}' is not supported (gbtree is)", source, booster_name));
    const auto& lmp = learner.at("learner_model_param");
    if (lmp.contains("num_class") && number_field(lmp, "num_class", source) > 1)
      throw Error(fmt::format("{}: multi-class models are not supported", source));
    if (lmp.contains("num_target") && number_field(lmp, "num_target", source) > 1)
      throw Error(fmt::format("{}: multi-target models are not supported", source));
    const float nf = number_field(lmp, "num_feature", source);
    if (!(nf >= 1 && nf < 1e6))
      throw Error(fmt::format("{}: num_feature {} is out of range", source, nf));
    m.num_features = std::uint32_t(nf);
    m.objective = learner.at("objective").at("name").get<std::string>();
    const float base_score = number_field(lmp, "base_score", source);
    switch (objective_link(m.objective, source)) {
      case Link::kIdentity:
        m.base_margin = base_score;
        break;
      case Link::kLogit:
        if (!(base_score > 0 && base_score < 1))
          throw Error(fmt::format("{}: base_score {} is not a probability", source, base_score));
        m.base_margin = -std::log(1.0f / base_score - 1.0f);
        break;
      case Link::kLog:
        if (!(base_score > 0))
          throw Error(fmt::format("{}: base_score {} is not positive", source, base_score));
        m.base_margin = std::log(base_score);
        break;
    }
    if (learner.contains("feature_names"))
      for (const auto& f : learner.at("feature_names"))
        m.feature_names.push_back(f.get<std::string>());
    if (!m.feature_names.empty() && m.feature_names.size() != m.num_features)
      throw Error(fmt::format("{}: {} feature names for {} features", source,
                              m.feature_names.size(), m.num_features));
    const auto& model = booster.at("model");
    const auto& trees = model.at("trees");
    if (!trees.is_array()) throw Error(fmt::format("{}: 'trees' is not an array", source));
    if (model.contains("tree_info"))
      for (const auto& t : model.at("tree_info"))
        if (t.get<int>() != 0)
          throw Error(fmt::format("{}: trees of several output groups are not supported", source));
    for (std::size_t t = 0; t < trees.size(); ++t)
      m.trees.push_back(
          parse_tree(trees[t], m.num_features, fmt::format("{}: tree {}", source, t)));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed XGBoost model: {}", source, e.what()));
  }
  return m;
}

XgboostModel read_xgboost_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(fmt::format("{}: cannot open the XGBoost model", file.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not JSON: {}", file.string(), e.what()));
  }
  return parse_xgboost_json(j, file.string());
}

nlohmann::json to_xgboost_json(const XgboostModel& m) {
  nlohmann::json trees = nlohmann::json::array();
  for (std::size_t t = 0; t < m.trees.size(); ++t) {
    const auto& nodes = m.trees[t];
    const std::size_t n = nodes.size();
    std::vector<int> lc(n, -1), rc(n, -1), parents(n, 2147483647), feat(n, 0), dflt(n, 0),
        zeros_i(n, 0);
    std::vector<float> cond(n), zeros_f(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) {
      cond[i] = nodes[i].value;
      if (nodes[i].feature < 0) continue;
      lc[i] = int(nodes[i].left);
      rc[i] = int(nodes[i].left + 1);
      parents[lc[i]] = parents[rc[i]] = int(i);
      feat[i] = nodes[i].feature;
      dflt[i] = int(nodes[i].default_left);
    }
    trees.push_back({{"base_weights", cond},
                     {"categories", nlohmann::json::array()},
                     {"categories_nodes", nlohmann::json::array()},
                     {"categories_segments", nlohmann::json::array()},
                     {"categories_sizes", nlohmann::json::array()},
                     {"default_left", dflt},
                     {"id", int(t)},
                     {"left_children", lc},
                     {"loss_changes", zeros_f},
                     {"parents", parents},
                     {"right_children", rc},
                     {"split_conditions", cond},
                     {"split_indices", feat},
                     {"split_type", zeros_i},
                     {"sum_hessian", zeros_f},
                     {"tree_param",
                      {{"num_deleted", "0"},
                       {"num_feature", std::to_string(m.num_features)},
                       {"num_nodes", std::to_string(n)},
                       {"size_leaf_vector", "0"}}}});
  }
  // base_score in the objective's own space (what XGBoost stores).
  float base_score = m.base_margin;
  switch (objective_link(m.objective, "to_xgboost_json")) {
    case Link::kIdentity:
      break;
    case Link::kLogit:
      base_score = 1.0f / (1.0f + std::exp(-m.base_margin));
      break;
    case Link::kLog:
      base_score = std::exp(m.base_margin);
      break;
  }
  std::ostringstream bs;
  bs.precision(9);
  bs << base_score;
  nlohmann::json learner = {
      {"attributes", nlohmann::json::object()},
      {"feature_names", m.feature_names},
      {"feature_types", std::vector<std::string>(m.feature_names.size(), "float")},
      {"gradient_booster",
       {{"model",
         {{"gbtree_model_param",
           {{"num_parallel_tree", "1"}, {"num_trees", std::to_string(m.trees.size())}}},
          {"tree_info", std::vector<int>(m.trees.size(), 0)},
          {"trees", trees}}},
        {"name", "gbtree"}}},
      {"learner_model_param",
       {{"base_score", bs.str()},
        {"boost_from_average", "1"},
        {"num_class", "0"},
        {"num_feature", std::to_string(m.num_features)},
        {"num_target", "1"}}},
      {"objective", {{"name", m.objective}, {"reg_loss_param", {{"scale_pos_weight", "1"}}}}}};
  if (m.feature_names.empty()) learner.erase("feature_names"), learner.erase("feature_types");
  return {{"learner", learner}, {"version", {1, 7, 4}}};
}

}  // namespace gpusearch::ranker
