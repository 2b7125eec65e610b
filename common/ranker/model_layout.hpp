// A compiled ranker as both evaluators see it (paper 004, 3.4 and 3.5): model-input transforms
// (Figure 3.6, Table 3.1) that turn a document's feature row V into the model inputs V', the
// decision-tree nodes the tree transforms walk (Figure 3.7), and a feed-forward net of 1 to 3
// layers over V' (3.5.1). The transform and tree functions are written once for host and device
// (GPUSEARCH_HOST_DEVICE): the CPU twin and the GPU kernels run the same code.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/host_device.hpp"

namespace gpusearch::ranker {

// Table 3.1. kDummy pads a group of transforms to whole warps (3.4) and yields 0.
enum class TransformType : std::uint32_t {
  kDummy = 0,
  kLinear = 1,        // x * param1 + param2                      (slope, intercept)
  kLogLinear = 2,     // log(max(x, 0) + 1) * param1 + param2      (slope, intercept)
  kBucket = 3,        // 1 if param1 <= x < param2, else 0          (lower, upper)
  kDecisionTree = 4,  // the leaf reached from node `index` of the ranker's node array
};
inline constexpr unsigned kNumTransformTypes = 5;
std::string_view to_string(TransformType t);

// Figure 3.6. `index`: the input feature's column in V (a row of the feature matrix), or for a
// tree the offset of its root in the node array.
struct ModelInputTransform {
  TransformType type = TransformType::kDummy;
  std::uint32_t index = 0;
  float param1 = 0;
  float param2 = 0;
};
static_assert(sizeof(ModelInputTransform) == 16);

// Figure 3.7, plus the default direction XGBoost gives a missing (NaN) value. An internal node
// sends x < threshold to node root + left, else to root + left + 1 (children adjacent, offsets
// relative to the tree's root); a leaf has feature -1 and its output in `value`.
struct TreeNode {
  std::int32_t feature = -1;
  std::uint32_t left = 0;
  float value = 0;  // threshold (internal) or output (leaf)
  std::uint32_t default_left = 0;
};
static_assert(sizeof(TreeNode) == 16);

// Every tree the compiler accepts is at most this deep, so a walk always ends.
inline constexpr unsigned kMaxTreeDepth = 64;

GPUSEARCH_HOST_DEVICE inline float walk_tree(const TreeNode* root, const float* row) {
  const TreeNode* n = root;
  for (unsigned depth = 0; n->feature >= 0 && depth < kMaxTreeDepth; ++depth) {
    const float x = row[n->feature];
    const bool go_left = x != x ? n->default_left != 0 : x < n->value;
    n = root + n->left + (go_left ? 0u : 1u);
  }
  return n->value;
}

// A missing (NaN) feature enters a single-feature transform as 0 contribution.
GPUSEARCH_HOST_DEVICE inline float apply_transform(const ModelInputTransform& t,
                                                   const TreeNode* nodes, const float* row) {
  switch (t.type) {
    case TransformType::kLinear: {
      const float x = row[t.index];
      return x != x ? 0.0f : x * t.param1 + t.param2;
    }
    case TransformType::kLogLinear: {
      const float x = row[t.index];
      // The logarithm in double, rounded: the host's and the device's float logf may differ in
      // the last bit; their double log rounded to float agree (but for a rounding tie).
      return x != x ? 0.0f
                    : float(log(double((x > 0.0f ? x : 0.0f) + 1.0f))) * t.param1 + t.param2;
    }
    case TransformType::kBucket: {
      const float x = row[t.index];
      return t.param1 <= x && x < t.param2 ? 1.0f : 0.0f;
    }
    case TransformType::kDecisionTree:
      return walk_tree(nodes + t.index, row);
    default:
      return 0.0f;
  }
}

enum class Activation : std::uint32_t { kIdentity = 0, kRelu = 1, kTanh = 2, kSigmoid = 3 };
std::string_view to_string(Activation a);

GPUSEARCH_HOST_DEVICE inline float activate(Activation a, float x) {
  switch (a) {
    case Activation::kRelu:
      return x > 0.0f ? x : 0.0f;
    // In double, rounded (as the logarithm above): the same float on the host and the device.
    case Activation::kTanh:
      return float(tanh(double(x)));
    case Activation::kSigmoid:
      return float(1.0 / (1.0 + exp(-double(x))));
    default:
      return x;
  }
}

// One layer: out = activation(W in + bias), W row-major [outputs][inputs].
struct NetLayer {
  std::uint32_t inputs = 0, outputs = 0;
  Activation activation = Activation::kIdentity;
  std::vector<float> weights;
  std::vector<float> bias;
};

// A ranker ready to evaluate. Transforms are grouped by type and each group padded with dummies
// to a multiple of kWarpSize (paper 004, 3.4: a warp runs one kind of transform); the first
// layer's weight columns follow that order, with zero weight on the dummies.
inline constexpr std::uint32_t kWarpSize = 32;
struct TransformGroup {
  TransformType type = TransformType::kDummy;
  std::uint32_t begin = 0, end = 0;  // [begin, end) of `transforms`, end - begin % 32 == 0
  std::uint32_t used = 0;            // the group's real transforms (the rest are dummies)
};

struct CompiledRanker {
  std::string name;
  std::uint32_t feature_stride = 0;  // floats per feature row the transforms and trees read
  std::vector<ModelInputTransform> transforms;
  std::vector<TransformGroup> groups;
  std::vector<TreeNode> nodes;
  std::vector<NetLayer> layers;    // layers.front().inputs == transforms.size()
  std::uint32_t model_inputs = 0;  // before padding (the ranker file's inputs)
  std::uint32_t trees = 0;

  // What the ranker occupies in a ranker cache: transforms, nodes and the net's weights (as
  // double, the GPU's copy) and biases.
  std::uint64_t bytes() const;
  std::uint32_t padded_inputs() const { return std::uint32_t(transforms.size()); }
};

// Checks the invariants every evaluator relies on (indices in range, group layout, layer
// shapes, finite parameters); throws gpusearch::Error naming `source` and what is wrong.
void validate(const CompiledRanker& r, std::string_view source);

}  // namespace gpusearch::ranker
