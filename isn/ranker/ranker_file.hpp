// A ranker file and its compilation into the layout both evaluators run (paper 004, 3.4-3.5).
//
// NAME.ranker.json:
//   {"format": "gpusearch-ranker", "version": 1, "name": "NAME",
//    "features": ["bm25", "doc_length", ...],     // the feature map: V's columns, catalog names
//    "inputs": [                                  // the model inputs V', in order (Table 3.1)
//      {"type": "linear",     "feature": "bm25",       "slope": 0.1, "intercept": 0},
//      {"type": "log_linear", "feature": "doc_length", "slope": 1,   "intercept": 0},
//      {"type": "bucket",     "feature": "tf_max",     "lower": 1,   "upper": 3},
//      {"type": "trees", "xgboost": "NAME.trees.json"}  // one input per tree of an XGBoost JSON
//    ],                                                 // model over the "features" columns
//    "net": {"file": "NAME.net.bin"}}             // optional (below); absent: the inputs' sum
// Paths are relative to the ranker file. Without a net the score is the sum of the inputs plus
// the XGBoost models' base margins: a plain XGBoost ensemble scores as XGBoost's
// output_margin. With a net, the trees enter it as they are (no base margin).
//
// NAME.net.bin, the net's weights (little-endian):
//   char[8]  "GSRNET01"
//   u32      layers (1 to 3)
//   layers x {u32 inputs, u32 outputs, u32 activation (0 identity, 1 relu, 2 tanh, 3 sigmoid)}
//   layers x {f32 weights[outputs][inputs] (row by row), f32 bias[outputs]}
//   u64      XXH3-64 of every byte before it
// Layer 0's inputs are the model inputs in file order; the last layer has one output, the score.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/ranker/model_layout.hpp"
#include "common/ranker/store_index.hpp"

namespace gpusearch::ranker {

// A ranker that cannot be loaded. Names the file at fault.
class RankerError : public Error {
 public:
  RankerError(const std::string& file, const std::string& what)
      : Error(fmt::format("ranker file {}: {}", file, what)), file_(file) {}
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

inline constexpr const char* kRankerFileSuffix = ".ranker.json";
inline constexpr int kRankerFormatVersion = 1;

// A model input before compilation: a single-feature transform of ranker column `index`, or a
// decision tree (`index` into RankerSpec::trees).
struct InputSpec {
  TransformType type = TransformType::kLinear;
  std::uint32_t index = 0;
  float param1 = 0, param2 = 0;
};

struct RankerSpec {
  std::string name;
  std::vector<std::string> features;         // catalog names; column j of V is features[j]
  std::vector<InputSpec> inputs;             // file order
  std::vector<std::vector<TreeNode>> trees;  // node features are columns of `features`
  std::vector<NetLayer> net;                 // layer 0 over the inputs in file order; empty: sum
  float sum_bias = 0;                        // without a net: added to the inputs' sum
  std::vector<std::filesystem::path> files;  // the ranker file, then the files it references
};

// Reads and validates a ranker file and the files it references. Throws RankerError naming the
// file at fault (the ranker file, its XGBoost model or its net file) and what is wrong.
RankerSpec read_ranker_file(const std::filesystem::path& file);

// Writes NAME.ranker.json into `dir`, with NAME.trees.json (XGBoost JSON, the spec's trees) and
// NAME.net.bin when the spec has trees or a net. Returns the ranker file's path.
std::filesystem::path write_ranker_file(const std::filesystem::path& dir, const RankerSpec& spec);

std::vector<NetLayer> read_net_file(const std::filesystem::path& file);
void write_net_file(const std::filesystem::path& file, const std::vector<NetLayer>& layers);

// Where the compiled transforms and trees read a feature: kCatalog, from feature-extraction rows
// (kFeatureStride columns in catalog order); kOwnColumns, from rows whose column j is the
// ranker's feature j (a feature matrix computed elsewhere, e.g. XGBoost's test data).
enum class ColumnSpace { kCatalog, kOwnColumns };

// Groups the inputs by transform type and pads each group to whole warps (paper 004, 3.4),
// reorders the first layer's weights to match, and validates the result. Throws RankerError
// naming `source`.
CompiledRanker compile(const RankerSpec& spec, ColumnSpace space, const std::string& source);

}  // namespace gpusearch::ranker
