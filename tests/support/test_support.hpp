// Helpers shared by the tests: temporary directories, small corpora, running the CLI.
#pragma once

#include <cstdlib>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/query.hpp"

namespace gpusearch::testing {

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    static std::mt19937_64 rng(std::random_device{}());
    path_ = std::filesystem::temp_directory_path() /
            ("gpusearch-test-" + std::to_string(::getpid()) + "-" + std::to_string(rng()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// The gpusearch binary beside the running test binary (binaries carried together to another
// machine, e.g. a GPU host), else the one of this build.
inline std::string gpusearch_binary() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = self.parent_path() / "gpusearch";
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
  return std::string(GPUSEARCH_BINARY_DIR) + "/bin/gpusearch";
}

// Runs the gpusearch binary (gpusearch_binary()) with the given arguments.
inline CommandResult run_gpusearch(const std::string& args) {
  const std::string cmd = gpusearch_binary() + " -q " + args + " 2>&1";
  CommandResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Real test collections: $GPUSEARCH_SHARED_DATA when set (binaries built on one machine and
// run on another, e.g. a GPU host), else the directory configured at build time.
inline std::filesystem::path shared_data(const std::string& rel) {
  if (const char* env = std::getenv("GPUSEARCH_SHARED_DATA"); env && *env)
    return std::filesystem::path(env) / rel;
  return std::filesystem::path(GPUSEARCH_SHARED_DATA_DIR) / rel;
}

// Waits until `done` holds, polling every millisecond; false after two minutes (only a hang gets
// there on a loaded host). For tests that wait for a background thread to reach a state rather
// than assert a time.
inline bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// The queries of a query file resolved against a shard, those with at least one known term
// (what most tests serve; the others are counted elsewhere). `label` names the file in errors.
inline std::vector<Query> known_queries(const ShardIndex& shard, const std::filesystem::path& file,
                                        const std::string& label = "test") {
  return read_known_queries(shard, file, std::numeric_limits<std::size_t>::max(), label);
}

}  // namespace gpusearch::testing
