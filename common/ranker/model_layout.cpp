#include "common/ranker/model_layout.hpp"

#include <cmath>

#include <fmt/format.h>

#include "common/error.hpp"

namespace gpusearch::ranker {

std::string_view to_string(TransformType t) {
  switch (t) {
    case TransformType::kDummy:
      return "dummy";
    case TransformType::kLinear:
      return "linear";
    case TransformType::kLogLinear:
      return "log_linear";
    case TransformType::kBucket:
      return "bucket";
    case TransformType::kDecisionTree:
      return "tree";
  }
  return "?";
}

std::string_view to_string(Activation a) {
  switch (a) {
    case Activation::kIdentity:
      return "identity";
    case Activation::kRelu:
      return "relu";
    case Activation::kTanh:
      return "tanh";
    case Activation::kSigmoid:
      return "sigmoid";
  }
  return "?";
}

std::uint64_t CompiledRanker::bytes() const {
  std::uint64_t b =
      transforms.size() * sizeof(ModelInputTransform) + nodes.size() * sizeof(TreeNode);
  // The net's weights as the GPU holds them: double (its products sum in double).
  for (const NetLayer& l : layers)
    b += l.weights.size() * sizeof(double) + l.bias.size() * sizeof(float);
  return b;
}

namespace {

// Walks every tree from its root: children inside the array, no node reached twice (no cycles,
// no shared subtrees), at most kMaxTreeDepth deep, features inside the row.
void validate_tree(const CompiledRanker& r, std::uint32_t root, std::string_view source) {
  struct Item {
    std::uint32_t node, depth;
  };
  std::vector<Item> stack{{root, 0}};
  std::vector<bool> seen;
  while (!stack.empty()) {
    const Item it = stack.back();
    stack.pop_back();
    if (it.node >= r.nodes.size())
      throw Error(fmt::format("{}: tree at node {} reaches node {}, past the {} nodes", source,
                              root, it.node, r.nodes.size()));
    const std::uint32_t local = it.node - root;
    if (local >= seen.size()) seen.resize(local + 1, false);
    if (seen[local])
      throw Error(fmt::format("{}: tree at node {} reaches node {} twice", source, root, it.node));
    seen[local] = true;
    const TreeNode& n = r.nodes[it.node];
    if (!std::isfinite(n.value))
      throw Error(fmt::format("{}: tree node {} has a non-finite value", source, it.node));
    if (n.feature < 0) continue;
    if (std::uint32_t(n.feature) >= r.feature_stride)
      throw Error(fmt::format("{}: tree node {} reads feature column {}, outside the {} columns",
                              source, it.node, n.feature, r.feature_stride));
    if (it.depth + 1 >= kMaxTreeDepth)
      throw Error(
          fmt::format("{}: tree at node {} is deeper than {}", source, root, kMaxTreeDepth));
    if (n.left == 0 || std::uint64_t(root) + n.left + 1 >= r.nodes.size())
      throw Error(
          fmt::format("{}: tree node {} has children outside the node array", source, it.node));
    stack.push_back({root + n.left, it.depth + 1});
    stack.push_back({root + n.left + 1, it.depth + 1});
  }
}

}  // namespace

void validate(const CompiledRanker& r, std::string_view source) {
  if (r.feature_stride == 0) throw Error(fmt::format("{}: no feature columns", source));
  if (r.transforms.empty()) throw Error(fmt::format("{}: no model inputs", source));
  std::uint32_t expect_begin = 0;
  for (const TransformGroup& g : r.groups) {
    if (g.begin != expect_begin || g.end < g.begin || (g.end - g.begin) % kWarpSize != 0 ||
        g.end > r.transforms.size() || g.used > g.end - g.begin)
      throw Error(fmt::format("{}: malformed transform group layout", source));
    for (std::uint32_t i = g.begin; i < g.end; ++i) {
      const TransformType t = r.transforms[i].type;
      if (i < g.begin + g.used ? t != g.type : t != TransformType::kDummy)
        throw Error(fmt::format("{}: transform {} is not of its group's type", source, i));
    }
    expect_begin = g.end;
  }
  if (expect_begin != r.transforms.size())
    throw Error(fmt::format("{}: transform groups do not cover the transforms", source));
  for (std::size_t i = 0; i < r.transforms.size(); ++i) {
    const ModelInputTransform& t = r.transforms[i];
    if (std::uint32_t(t.type) >= kNumTransformTypes)
      throw Error(fmt::format("{}: transform {} has unknown type {}", source, i, unsigned(t.type)));
    if (!std::isfinite(t.param1) || !std::isfinite(t.param2))
      throw Error(fmt::format("{}: transform {} has a non-finite parameter", source, i));
    if (t.type == TransformType::kDecisionTree) {
      if (t.index >= r.nodes.size())
        throw Error(fmt::format("{}: tree input {} starts at node {}, past the {} nodes", source, i,
                                t.index, r.nodes.size()));
      validate_tree(r, t.index, source);
    } else if (t.type != TransformType::kDummy && t.index >= r.feature_stride) {
      throw Error(fmt::format("{}: input {} reads feature column {}, outside the {} columns",
                              source, i, t.index, r.feature_stride));
    }
  }
  if (r.layers.empty() || r.layers.size() > 3)
    throw Error(
        fmt::format("{}: the net has {} layers (1 to 3 supported)", source, r.layers.size()));
  std::uint32_t inputs = std::uint32_t(r.transforms.size());
  for (std::size_t l = 0; l < r.layers.size(); ++l) {
    const NetLayer& layer = r.layers[l];
    if (layer.inputs != inputs)
      throw Error(fmt::format("{}: net layer {} takes {} inputs but receives {}", source, l,
                              layer.inputs, inputs));
    if (layer.outputs == 0 || layer.weights.size() != std::size_t(layer.inputs) * layer.outputs ||
        layer.bias.size() != layer.outputs)
      throw Error(fmt::format("{}: net layer {} has {} weights and {} biases for {} x {}", source,
                              l, layer.weights.size(), layer.bias.size(), layer.outputs,
                              layer.inputs));
    if (std::uint32_t(layer.activation) > std::uint32_t(Activation::kSigmoid))
      throw Error(fmt::format("{}: net layer {} has an unknown activation", source, l));
    for (float w : layer.weights)
      if (!std::isfinite(w))
        throw Error(fmt::format("{}: net layer {} has a non-finite weight", source, l));
    for (float w : layer.bias)
      if (!std::isfinite(w))
        throw Error(fmt::format("{}: net layer {} has a non-finite bias", source, l));
    inputs = layer.outputs;
  }
  if (inputs != 1)
    throw Error(
        fmt::format("{}: the net's last layer has {} outputs (the score needs 1)", source, inputs));
}

}  // namespace gpusearch::ranker
