#include "isn/ranker/ranker_file.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/ranker/feature_catalog.hpp"
#include "isn/ranker/xgboost_model.hpp"

namespace gpusearch::ranker {

namespace fs = std::filesystem;

namespace {

constexpr char kNetMagic[8] = {'G', 'S', 'R', 'N', 'E', 'T', '0', '1'};

float finite_param(const nlohmann::json& input, const char* key, const std::string& where) {
  const auto it = input.find(key);
  if (it == input.end() || !it->is_number())
    throw Error(fmt::format("{}: '{}' is missing or not a number", where, key));
  const double v = it->get<double>();
  if (!std::isfinite(v) || std::fabs(v) > 3e38)
    throw Error(fmt::format("{}: '{}' is not a finite float", where, key));
  return float(v);
}

// A reference to a file beside the ranker: a plain relative path inside the ranker's folder.
fs::path referenced_file(const fs::path& ranker_file, const nlohmann::json& v, const char* what) {
  if (!v.is_string() || v.get<std::string>().empty())
    throw RankerError(ranker_file.string(), fmt::format("'{}' is not a file name", what));
  const fs::path rel = v.get<std::string>();
  if (rel.is_absolute() || rel.filename() != rel)
    throw RankerError(
        ranker_file.string(),
        fmt::format("'{}' must name a file in the ranker's folder, not '{}'", what, rel.string()));
  return ranker_file.parent_path() / rel;
}

}  // namespace

std::vector<NetLayer> read_net_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw RankerError(file.string(), "cannot open the net file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto fail = [&](const std::string& what) { throw RankerError(file.string(), what); };
  if (bytes.size() < sizeof kNetMagic + 4 + 8 || std::memcmp(bytes.data(), kNetMagic, 8) != 0)
    fail("not a net file (no GSRNET01 header)");
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  if (XXH3_64bits(bytes.data(), bytes.size() - 8) != stored) fail("checksum mismatch (corrupt)");
  std::size_t at = 8;
  const std::size_t body_end = bytes.size() - 8;
  const auto read_u32 = [&]() {
    if (at + 4 > body_end) fail("truncated");
    std::uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    at += 4;
    return v;
  };
  const std::uint32_t n = read_u32();
  if (n < 1 || n > 3) fail(fmt::format("{} layers (1 to 3 supported)", n));
  std::vector<NetLayer> layers(n);
  for (NetLayer& l : layers) {
    l.inputs = read_u32();
    l.outputs = read_u32();
    const std::uint32_t a = read_u32();
    if (a > std::uint32_t(Activation::kSigmoid)) fail(fmt::format("unknown activation {}", a));
    l.activation = Activation(a);
    if (l.inputs == 0 || l.outputs == 0 || l.inputs > (1u << 20) || l.outputs > (1u << 20))
      fail(fmt::format("a layer of {} x {}", l.outputs, l.inputs));
  }
  for (NetLayer& l : layers) {
    const std::size_t w = std::size_t(l.inputs) * l.outputs;
    if (at + (w + l.outputs) * 4 > body_end) fail("truncated");
    l.weights.resize(w);
    l.bias.resize(l.outputs);
    std::memcpy(l.weights.data(), bytes.data() + at, w * 4);
    at += w * 4;
    std::memcpy(l.bias.data(), bytes.data() + at, l.outputs * 4);
    at += l.outputs * 4;
  }
  if (at != body_end) fail(fmt::format("{} bytes after the last layer", body_end - at));
  return layers;
}

void write_net_file(const fs::path& file, const std::vector<NetLayer>& layers) {
  std::string bytes(kNetMagic, 8);
  const auto put = [&](const void* p, std::size_t n) {
    bytes.append(static_cast<const char*>(p), n);
  };
  const std::uint32_t n = std::uint32_t(layers.size());
  put(&n, 4);
  for (const NetLayer& l : layers) {
    const std::uint32_t a = std::uint32_t(l.activation);
    put(&l.inputs, 4), put(&l.outputs, 4), put(&a, 4);
  }
  for (const NetLayer& l : layers) {
    put(l.weights.data(), l.weights.size() * 4);
    put(l.bias.data(), l.bias.size() * 4);
  }
  const std::uint64_t sum = XXH3_64bits(bytes.data(), bytes.size());
  put(&sum, 8);
  std::ofstream out(file, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw Error("cannot write " + file.string());
}

RankerSpec read_ranker_file(const fs::path& file) {
  const std::string src = file.string();
  std::ifstream in(file);
  if (!in) throw RankerError(src, "cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw RankerError(src, fmt::format("not JSON: {}", e.what()));
  }
  RankerSpec spec;
  spec.files.push_back(file);
  try {
    if (!j.is_object() || j.value("format", "") != "gpusearch-ranker")
      throw RankerError(src, "not a ranker file (\"format\": \"gpusearch-ranker\" missing)");
    if (j.value("version", 0) != kRankerFormatVersion)
      throw RankerError(src, fmt::format("format version {} (this build reads {})",
                                         j.value("version", 0), kRankerFormatVersion));
    spec.name = j.at("name").get<std::string>();
    if (!valid_ranker_name(spec.name))
      throw RankerError(src, fmt::format("'{}' is not a valid ranker name", spec.name));
    if (file.filename().string() != spec.name + kRankerFileSuffix)
      throw RankerError(src, fmt::format("names ranker '{}' but is not {}{}", spec.name, spec.name,
                                         kRankerFileSuffix));
    for (const auto& f : j.at("features")) {
      const std::string name = f.get<std::string>();
      if (!find_feature(name)) throw RankerError(src, fmt::format("unknown feature '{}'", name));
      if (std::find(spec.features.begin(), spec.features.end(), name) != spec.features.end())
        throw RankerError(src, fmt::format("feature '{}' listed twice", name));
      spec.features.push_back(name);
    }
    if (spec.features.empty()) throw RankerError(src, "no features");
    const auto column = [&](const nlohmann::json& input, const std::string& where) {
      const std::string name = input.at("feature").get<std::string>();
      const auto it = std::find(spec.features.begin(), spec.features.end(), name);
      if (it == spec.features.end())
        throw RankerError(src,
                          fmt::format("{} reads '{}', which is not in \"features\"", where, name));
      return std::uint32_t(it - spec.features.begin());
    };
    const auto& inputs = j.at("inputs");
    if (!inputs.is_array() || inputs.empty()) throw RankerError(src, "no inputs");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto& in_j = inputs[i];
      const std::string where = fmt::format("input {}", i);
      const std::string type = in_j.at("type").get<std::string>();
      try {
        if (type == "linear" || type == "log_linear") {
          spec.inputs.push_back(
              {type == "linear" ? TransformType::kLinear : TransformType::kLogLinear,
               column(in_j, where), finite_param(in_j, "slope", where),
               finite_param(in_j, "intercept", where)});
        } else if (type == "bucket") {
          spec.inputs.push_back({TransformType::kBucket, column(in_j, where),
                                 finite_param(in_j, "lower", where),
                                 finite_param(in_j, "upper", where)});
        } else if (type == "trees") {
          const fs::path model_file = referenced_file(file, in_j.at("xgboost"), "xgboost");
          XgboostModel m;
          try {
            m = read_xgboost_json(model_file);
          } catch (const Error& e) {
            // Blame the model file; its messages start with its name already.
            std::string what = e.what();
            const std::string prefix = model_file.string() + ": ";
            if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
            throw RankerError(model_file.string(), what);
          }
          if (m.num_features > spec.features.size())
            throw RankerError(model_file.string(),
                              fmt::format("splits on {} features but {} lists {}", m.num_features,
                                          src, spec.features.size()));
          for (std::size_t f = 0; f < m.feature_names.size(); ++f)
            if (m.feature_names[f] != spec.features[f])
              throw RankerError(model_file.string(),
                                fmt::format("feature {} is '{}' but the ranker's column {} is '{}'",
                                            f, m.feature_names[f], f, spec.features[f]));
          for (const auto& tree : m.trees) {
            spec.inputs.push_back(
                {TransformType::kDecisionTree, std::uint32_t(spec.trees.size()), 0, 0});
            spec.trees.push_back(tree);
          }
          spec.sum_bias += m.base_margin;
          spec.files.push_back(model_file);
        } else {
          throw RankerError(src, fmt::format("{} has unknown type '{}' (linear, log_linear, "
                                             "bucket, trees)",
                                             where, type));
        }
      } catch (const RankerError&) {
        throw;
      } catch (const Error& e) {
        // An XGBoost model's own error already names its file.
        throw RankerError(src, e.what());
      }
    }
    if (j.contains("net")) {
      const fs::path net_file = referenced_file(file, j.at("net").at("file"), "net.file");
      spec.net = read_net_file(net_file);
      spec.files.push_back(net_file);
      if (spec.net.front().inputs != spec.inputs.size())
        throw RankerError(net_file.string(),
                          fmt::format("layer 0 takes {} inputs but {} has {}",
                                      spec.net.front().inputs, src, spec.inputs.size()));
    }
  } catch (const nlohmann::json::exception& e) {
    throw RankerError(src, fmt::format("malformed: {}", e.what()));
  }
  return spec;
}

fs::path write_ranker_file(const fs::path& dir, const RankerSpec& spec) {
  if (!valid_ranker_name(spec.name))
    throw Error(fmt::format("invalid ranker name '{}'", spec.name));
  fs::create_directories(dir);
  // The trees go out as one XGBoost model read back as consecutive inputs: they must already
  // be consecutive and in tree order, or the net's columns would not match on reading.
  {
    std::size_t expect = 0, first = spec.inputs.size();
    for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
      if (spec.inputs[i].type != TransformType::kDecisionTree) continue;
      if (first == spec.inputs.size()) first = i;
      if (spec.inputs[i].index != expect || i != first + expect)
        throw Error(
            fmt::format("write_ranker_file {}: tree inputs must be consecutive and in "
                        "tree order",
                        spec.name));
      ++expect;
    }
    if (expect != spec.trees.size())
      throw Error(fmt::format("write_ranker_file {}: {} tree inputs for {} trees", spec.name,
                              expect, spec.trees.size()));
  }
  nlohmann::json inputs = nlohmann::json::array();
  bool trees_written = false;
  for (const InputSpec& in : spec.inputs) {
    switch (in.type) {
      case TransformType::kLinear:
      case TransformType::kLogLinear:
        inputs.push_back({{"type", in.type == TransformType::kLinear ? "linear" : "log_linear"},
                          {"feature", spec.features.at(in.index)},
                          {"slope", in.param1},
                          {"intercept", in.param2}});
        break;
      case TransformType::kBucket:
        inputs.push_back({{"type", "bucket"},
                          {"feature", spec.features.at(in.index)},
                          {"lower", in.param1},
                          {"upper", in.param2}});
        break;
      case TransformType::kDecisionTree:
        // The trees go out as one XGBoost model, one input per tree, at the first tree's place:
        // a spec written here keeps its trees contiguous.
        if (!trees_written) {
          inputs.push_back({{"type", "trees"}, {"xgboost", spec.name + ".trees.json"}});
          trees_written = true;
        }
        break;
      default:
        throw Error("write_ranker_file: dummy inputs are not written");
    }
  }
  if (!spec.trees.empty()) {
    XgboostModel m;
    m.trees = spec.trees;
    m.num_features = std::uint32_t(spec.features.size());
    m.feature_names = spec.features;
    m.objective = "reg:squarederror";
    m.base_margin = spec.net.empty() ? spec.sum_bias : 0.0f;
    std::ofstream t(dir / (spec.name + ".trees.json"));
    t << to_xgboost_json(m).dump() << '\n';
    if (!t) throw Error("cannot write " + (dir / (spec.name + ".trees.json")).string());
  }
  nlohmann::json j = {{"format", "gpusearch-ranker"},
                      {"version", kRankerFormatVersion},
                      {"name", spec.name},
                      {"features", spec.features},
                      {"inputs", inputs}};
  if (!spec.net.empty()) {
    write_net_file(dir / (spec.name + ".net.bin"), spec.net);
    j["net"] = {{"file", spec.name + ".net.bin"}};
  }
  const fs::path file = dir / (spec.name + kRankerFileSuffix);
  std::ofstream out(file);
  out << j.dump(1) << '\n';
  if (!out) throw Error("cannot write " + file.string());
  return file;
}

CompiledRanker compile(const RankerSpec& spec, ColumnSpace space, const std::string& source) {
  CompiledRanker r;
  r.name = spec.name;
  std::vector<std::uint32_t> column(spec.features.size());
  for (std::size_t j = 0; j < spec.features.size(); ++j) {
    if (space == ColumnSpace::kOwnColumns) {
      column[j] = std::uint32_t(j);
    } else {
      const auto f = find_feature(spec.features[j]);
      if (!f) throw RankerError(source, fmt::format("unknown feature '{}'", spec.features[j]));
      column[j] = *f;
    }
  }
  r.feature_stride =
      space == ColumnSpace::kOwnColumns ? std::uint32_t(spec.features.size()) : kFeatureStride;
  r.model_inputs = std::uint32_t(spec.inputs.size());
  r.trees = std::uint32_t(spec.trees.size());
  // Tree nodes, concatenated; each tree's features mapped to columns.
  std::vector<std::uint32_t> tree_root(spec.trees.size());
  for (std::size_t t = 0; t < spec.trees.size(); ++t) {
    tree_root[t] = std::uint32_t(r.nodes.size());
    for (TreeNode n : spec.trees[t]) {
      if (n.feature >= 0) {
        if (std::size_t(n.feature) >= column.size())
          throw RankerError(source, fmt::format("tree {} splits on column {} of {}", t, n.feature,
                                                column.size()));
        n.feature = std::int32_t(column[std::size_t(n.feature)]);
      }
      r.nodes.push_back(n);
    }
  }
  // Group by type (3.4): linear, log-linear, bucket, then trees; each group to whole warps.
  std::vector<std::uint32_t> position(spec.inputs.size());
  for (TransformType type : {TransformType::kLinear, TransformType::kLogLinear,
                             TransformType::kBucket, TransformType::kDecisionTree}) {
    TransformGroup g;
    g.type = type;
    g.begin = std::uint32_t(r.transforms.size());
    for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
      const InputSpec& in = spec.inputs[i];
      if (in.type != type) continue;
      ModelInputTransform t{type, 0, in.param1, in.param2};
      if (type == TransformType::kDecisionTree) {
        if (in.index >= spec.trees.size())
          throw RankerError(
              source, fmt::format("input {} names tree {} of {}", i, in.index, spec.trees.size()));
        t.index = tree_root[in.index];
      } else {
        if (in.index >= column.size())
          throw RankerError(
              source, fmt::format("input {} reads column {} of {}", i, in.index, column.size()));
        t.index = column[in.index];
      }
      position[i] = std::uint32_t(r.transforms.size());
      r.transforms.push_back(t);
    }
    g.used = std::uint32_t(r.transforms.size()) - g.begin;
    if (g.used == 0) continue;
    while (r.transforms.size() % kWarpSize != 0) r.transforms.push_back({});
    g.end = std::uint32_t(r.transforms.size());
    r.groups.push_back(g);
  }
  // The net, its first layer's columns in the grouped order (dummies weigh 0).
  const std::uint32_t padded = r.padded_inputs();
  std::vector<NetLayer> layers = spec.net;
  if (layers.empty()) {
    NetLayer sum;
    sum.inputs = std::uint32_t(spec.inputs.size());
    sum.outputs = 1;
    sum.weights.assign(spec.inputs.size(), 1.0f);
    sum.bias = {spec.sum_bias};
    layers.push_back(std::move(sum));
  }
  if (layers.front().inputs != spec.inputs.size())
    throw RankerError(source, fmt::format("the net's first layer takes {} inputs but there are {}",
                                          layers.front().inputs, spec.inputs.size()));
  NetLayer& first = layers.front();
  if (first.weights.size() != std::size_t(first.inputs) * first.outputs)
    throw RankerError(source, "the net's first layer has the wrong number of weights");
  std::vector<float> w(std::size_t(first.outputs) * padded, 0.0f);
  for (std::uint32_t o = 0; o < first.outputs; ++o)
    for (std::uint32_t i = 0; i < first.inputs; ++i)
      w[std::size_t(o) * padded + position[i]] = first.weights[std::size_t(o) * first.inputs + i];
  first.weights = std::move(w);
  first.inputs = padded;
  r.layers = std::move(layers);
  try {
    validate(r, "compiled layout");
  } catch (const Error& e) {
    throw RankerError(source, e.what());
  }
  return r;
}

}  // namespace gpusearch::ranker
