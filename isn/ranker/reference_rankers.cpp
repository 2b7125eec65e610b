#include "isn/ranker/reference_rankers.hpp"

#include <cmath>

#include <fmt/format.h>

#include "common/ranker/feature_catalog.hpp"
#include "isn/ranker/ranker_store.hpp"

namespace gpusearch::ranker {

namespace {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  std::uint32_t below(std::uint32_t n) { return std::uint32_t(uniform() * n); }

 private:
  std::uint64_t state_;
};

std::uint64_t name_hash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Plausible value ranges of each catalog feature, for thresholds and bucket limits.
struct Range {
  float lo, hi;
};
Range feature_range(std::uint32_t f) {
  switch (Feature(f)) {
    case Feature::kDocLength:
      return {0, 400};
    case Feature::kQueryTerms:
      return {1, 12};
    case Feature::kQueryIdfSum:
      return {0, 60};
    case Feature::kBm25:
      return {0, 40};
    case Feature::kMatchedTerms:
      return {0, 8};
    case Feature::kTfSum:
      return {0, 20};
    case Feature::kTfMax:
      return {0, 10};
    case Feature::kTfMin:
      return {0, 3};
    case Feature::kTfMean:
      return {0, 5};
    case Feature::kTfNormSum:
      return {0, 0.2f};
    case Feature::kIdfMatchedSum:
      return {0, 40};
    case Feature::kIdfMatchedMax:
      return {0, 10};
    case Feature::kIdfMatchedMin:
      return {0, 8};
    case Feature::kTfIdfSum:
      return {0, 60};
    case Feature::kTfIdfMax:
      return {0, 30};
    case Feature::kBm25TermMax:
      return {0, 15};
    case Feature::kBm25TermMin:
      return {0, 10};
    case Feature::kFirstOccurrence:
      return {0, 200};
    case Feature::kFirstOccurrenceMean:
      return {0, 200};
    case Feature::kMinWindow:
      return {1, 200};
    case Feature::kPairDistanceMin:
      return {1, 50};
    case Feature::kPairDistanceMean:
      return {1, 100};
    case Feature::kOrderedBigrams:
      return {0, 5};
    case Feature::kHeadTfSum:
      return {0, 5};
    default:
      return {0, 1};  // pagerank, gs, bm25_pr, fractions, density
  }
}

// Breadth first, children adjacent (the layout of model_layout.hpp): a node at depth >= 2 is a
// leaf with probability 1/4, every node at max_depth is.
std::vector<TreeNode> generate_tree(SplitMix64& rng, std::uint32_t max_depth) {
  std::vector<TreeNode> nodes(1);
  std::vector<std::uint32_t> depth{0};
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const bool leaf = depth[i] >= max_depth || (depth[i] >= 2 && rng.uniform() < 0.25);
    if (leaf) {
      nodes[i].feature = -1;
      nodes[i].value = float(rng.uniform(-0.1, 0.1));
      continue;
    }
    const std::uint32_t f = rng.below(kNumFeatures);
    const Range r = feature_range(f);
    nodes[i].feature = std::int32_t(f);
    nodes[i].value = float(rng.uniform(r.lo, r.hi));
    nodes[i].default_left = rng.uniform() < 0.5;
    nodes[i].left = std::uint32_t(nodes.size());
    nodes.resize(nodes.size() + 2);
    depth.push_back(depth[i] + 1);
    depth.push_back(depth[i] + 1);
  }
  return nodes;
}

NetLayer random_layer(SplitMix64& rng, std::uint32_t inputs, std::uint32_t outputs,
                      Activation activation) {
  NetLayer l;
  l.inputs = inputs;
  l.outputs = outputs;
  l.activation = activation;
  const double scale = std::sqrt(6.0 / double(inputs + outputs));
  l.weights.resize(std::size_t(inputs) * outputs);
  for (float& w : l.weights) w = float(rng.uniform(-scale, scale));
  l.bias.resize(outputs);
  for (float& b : l.bias) b = float(rng.uniform(-0.1, 0.1));
  return l;
}

}  // namespace

std::vector<RankerShape> reference_shapes() {
  return {{"R-S-BLG", 54, 2, 69, 0, 6, {}},
          {"R-M-BGD", 10, 0, 5, 500, 6, {}},
          {"R-L-D", 0, 0, 0, 1250, 8, {kReferenceHiddenUnits}}};
}

RankerSpec generate_ranker(const RankerShape& shape, std::uint64_t seed) {
  SplitMix64 rng(seed ^ name_hash(shape.name));
  RankerSpec spec;
  spec.name = shape.name;
  for (std::uint32_t f = 0; f < kNumFeatures; ++f) spec.features.emplace_back(feature_name(f));
  const auto single = [&](TransformType type) {
    const std::uint32_t f = rng.below(kNumFeatures);
    const Range r = feature_range(f);
    InputSpec in{type, f, 0, 0};
    if (type == TransformType::kBucket) {
      in.param1 = float(rng.uniform(r.lo, r.lo + 0.8 * (r.hi - r.lo)));
      in.param2 = in.param1 + float(rng.uniform(0.05, 0.3) * (r.hi - r.lo));
    } else if (type == TransformType::kLinear) {
      in.param1 = float(rng.uniform(-1, 1) / (r.hi - r.lo));
      in.param2 = float(rng.uniform(-0.1, 0.1));
    } else {
      in.param1 = float(rng.uniform(-1, 1) / std::log(double(r.hi) + 2.0));
      in.param2 = float(rng.uniform(-0.1, 0.1));
    }
    spec.inputs.push_back(in);
  };
  for (std::uint32_t i = 0; i < shape.buckets; ++i) single(TransformType::kBucket);
  for (std::uint32_t i = 0; i < shape.linears; ++i) single(TransformType::kLinear);
  for (std::uint32_t i = 0; i < shape.log_linears; ++i) single(TransformType::kLogLinear);
  for (std::uint32_t t = 0; t < shape.trees; ++t) {
    spec.inputs.push_back({TransformType::kDecisionTree, t, 0, 0});
    spec.trees.push_back(generate_tree(rng, shape.max_tree_depth));
  }
  std::uint32_t width = std::uint32_t(spec.inputs.size());
  for (std::uint32_t h : shape.hidden) {
    spec.net.push_back(random_layer(rng, width, h, Activation::kRelu));
    width = h;
  }
  spec.net.push_back(random_layer(rng, width, 1, Activation::kIdentity));
  return spec;
}

void write_reference_rankers(const std::filesystem::path& dir, std::uint64_t seed) {
  for (const RankerShape& s : reference_shapes()) write_ranker_file(dir, generate_ranker(s, seed));
  index_ranker_store(dir);
}

void write_ranker_mix(const std::filesystem::path& dir, std::uint32_t count,
                      const RankerShape& shape, const std::string& prefix, std::uint64_t seed) {
  for (std::uint32_t i = 0; i < count; ++i) {
    RankerShape s = shape;
    s.name = fmt::format("{}-{:03d}", prefix, i);
    write_ranker_file(dir, generate_ranker(s, seed));
  }
  index_ranker_store(dir);
}

}  // namespace gpusearch::ranker
