// Runs tests/support/xgboost_parity.py with a Python that has XGBoost (Debian's python3-xgboost):
// the parity tests' expected values come from XGBoost itself at test time.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace gpusearch::testing {

// The first of /usr/bin/python3 and python3 that imports xgboost, or nullopt.
inline std::optional<std::string> python_with_xgboost() {
  for (const char* py : {"/usr/bin/python3", "python3"}) {
    const std::string cmd = std::string(py) + " -c 'import xgboost' > /dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return std::string(py);
  }
  return std::nullopt;
}

inline std::string xgboost_script() {
  return std::string(GPUSEARCH_SOURCE_DIR) + "/tests/support/xgboost_parity.py";
}

inline std::vector<float> read_f32(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v(std::filesystem::file_size(p) / 4);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * 4));
  return v;
}

inline void write_f32(const std::filesystem::path& p, const std::vector<float>& v) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
}

}  // namespace gpusearch::testing
