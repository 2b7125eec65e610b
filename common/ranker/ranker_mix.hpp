// Which ranker a query uses (issue 12): its own (the query file's third column), else one
// ranker for the whole log, else a draw from a Zipf mix over a ranker store, as a production
// store of hundreds of rankers would see (a few hot, a long tail). The draw depends only on the
// query id, the seed and the store's ranker list, so the aggregator and an in-process search
// assign the same ranker to the same query.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpusearch::ranker {

class ZipfRankerMix {
 public:
  ZipfRankerMix() = default;
  // P(rank i) proportional to 1 / (i + 1)^exponent, i = 0 for names[0].
  ZipfRankerMix(std::vector<std::string> names, double exponent, std::uint64_t seed)
      : names_(std::move(names)), seed_(seed) {
    double sum = 0;
    for (std::size_t i = 0; i < names_.size(); ++i) {
      sum += 1.0 / std::pow(double(i + 1), exponent);
      cdf_.push_back(sum);
    }
    for (double& c : cdf_) c /= sum;
  }
  bool empty() const { return names_.empty(); }
  const std::string& pick(std::string_view query_id) const {
    // FNV-1a over the id, mixed with the seed (splitmix64's finalizer), to a uniform in [0, 1).
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : query_id) h = (h ^ c) * 1099511628211ull;
    std::uint64_t z = h ^ (seed_ + 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const double u = double(z >> 11) * 0x1.0p-53;
    std::size_t lo = 0, hi = cdf_.size() - 1;
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (u < cdf_[mid])
        hi = mid;
      else
        lo = mid + 1;
    }
    return names_[lo];
  }

 private:
  std::vector<std::string> names_;
  std::vector<double> cdf_;
  std::uint64_t seed_ = 0;
};

}  // namespace gpusearch::ranker

namespace gpusearch::ranker {

// The ranker of each query: its own, else the log's, else the mix's draw, else none.
struct RankerAssignment {
  std::string default_ranker;
  ZipfRankerMix mix;
  bool active() const { return !default_ranker.empty() || !mix.empty(); }
  std::string for_query(std::string_view id, const std::string& own) const {
    if (!own.empty()) return own;
    if (!default_ranker.empty()) return default_ranker;
    if (!mix.empty()) return mix.pick(id);
    return {};
  }
};

}  // namespace gpusearch::ranker
