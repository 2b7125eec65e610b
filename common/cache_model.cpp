#include "common/cache_model.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace gpusearch {

namespace {

// Least squares y = a + b x; with one distinct x, b = 0 and a the mean.
std::pair<double, double> fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = double(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double den = n * sxx - sx * sx;
  if (n < 2 || std::abs(den) <= 1e-12 * std::max(1.0, n * sxx)) return {sy / n, 0.0};
  const double b = (n * sxy - sx * sy) / den;
  return {(sy - b * sx) / n, b};
}

}  // namespace

ThroughputModel ThroughputModel::fit(std::span<const CacheRunSample> samples) {
  std::vector<CacheRunSample> ok;
  for (const CacheRunSample& s : samples)
    if (s.queries > 0 && s.batches > 0 && s.wall_seconds > 0) ok.push_back(s);
  if (ok.empty()) throw InputError("cache model", 0, "no measured run to fit");
  ThroughputModel m;
  // Transfer: a batch's copy time against its bytes.
  {
    std::vector<double> x, y;
    for (const auto& s : ok) {
      x.push_back(s.shipped_bytes / s.batches);
      y.push_back(s.transfer_seconds / s.batches);
    }
    auto [a, b] = fit_line(x, y);
    if (b <= 0) {  // no spread in bytes, or noise: time per byte over all
      double bytes = 0, secs = 0;
      for (const auto& s : ok) bytes += s.shipped_bytes, secs += s.transfer_seconds;
      a = 0;
      b = bytes > 0 ? secs / bytes : 0;
    }
    m.t_fixed_s = std::max(0.0, a);
    m.t_per_byte = b;
  }
  // Bytes per query at each cache size.
  {
    std::map<double, std::pair<double, double>> by_cache;  // S_c -> (shipped, queries)
    for (const auto& s : ok) {
      by_cache[s.cache_bytes].first += s.shipped_bytes;
      by_cache[s.cache_bytes].second += s.queries;
    }
    for (const auto& [c, v] : by_cache) m.dq_points.push_back({c, v.first / v.second});
  }
  // Compute: what is left of each run's time per query after its transfers, against 1 / n.
  {
    std::vector<double> x, y;
    for (const auto& s : ok) {
      const double n = s.queries / s.batches;
      const double dq = s.shipped_bytes / s.queries;
      x.push_back(1.0 / n);
      y.push_back(s.wall_seconds / s.queries - m.t(s.batch_bytes) * dq);
    }
    auto [a, b] = fit_line(x, y);
    if (b < 0) {  // a larger batch never costs more per query: a flat fit instead
      double sum = 0;
      for (double v : y) sum += v;
      a = sum / double(y.size());
      b = 0;
    }
    m.c0 = std::max(a, 0.0);
    m.c1 = b;
  }
  return m;
}

double ThroughputModel::c(double n) const {
  return c0 + c1 / std::max(n, 1.0);
}

double ThroughputModel::t(double batch_bytes) const {
  const double lane = batch_bytes / 2;
  return t_per_byte + (lane > 0 ? t_fixed_s / lane : 0.0);
}

double ThroughputModel::dq(double cache_bytes) const {
  if (dq_points.empty()) return 0;
  if (cache_bytes <= dq_points.front().first) return dq_points.front().second;
  if (cache_bytes >= dq_points.back().first) return dq_points.back().second;
  const auto hi = std::lower_bound(dq_points.begin(), dq_points.end(), cache_bytes,
                                   [](const auto& p, double v) { return p.first < v; });
  const auto lo = std::prev(hi);
  const double f = (cache_bytes - lo->first) / (hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

CacheSplit ThroughputModel::at(double cache_bytes, double batch_bytes, double max_queries,
                               double max_response_ms) const {
  CacheSplit s;
  s.cache_bytes = cache_bytes;
  s.batch_bytes = batch_bytes;
  const double d = dq(cache_bytes);
  const double per_byte = t(batch_bytes);
  double n = std::max(1.0, max_queries);
  if (d > 0) n = std::min(n, std::max(1.0, batch_bytes / 2 / d));
  if (max_response_ms > 0) {
    // n * (c0 + t dq) + c1 <= theta
    const double theta = max_response_ms / 1e3;
    const double n_theta = (theta - c1) / (c0 + per_byte * d);
    if (!(n_theta >= 1.0)) return s;  // not even one query per batch meets the bound
    n = std::min(n, std::floor(n_theta));
  }
  s.batch_queries = n;
  const double per_query = c(n) + per_byte * d;
  s.throughput = per_query > 0 ? 1.0 / per_query : 0.0;
  s.response_ms = 1e3 * n * per_query;
  s.feasible = true;
  return s;
}

CacheSplit ThroughputModel::choose(double memory_bytes, double min_batch_bytes, double max_queries,
                                   double max_response_ms, unsigned steps) const {
  CacheSplit best;
  const double span = std::max(0.0, memory_bytes - min_batch_bytes);
  for (unsigned i = 0; i <= steps; ++i) {
    const double cache = span * double(i) / double(std::max(1u, steps));
    const CacheSplit s = at(cache, memory_bytes - cache, max_queries, max_response_ms);
    if (s.feasible && (!best.feasible || s.throughput > best.throughput)) best = s;
  }
  return best;
}

nlohmann::json ThroughputModel::to_json() const {
  nlohmann::json dq = nlohmann::json::array();
  for (const auto& [c, v] : dq_points) dq.push_back({c, v});
  return {{"format", "gpusearch-cache-model"},
          {"version", 1},
          {"c0_seconds", c0},
          {"c1_seconds", c1},
          {"transfer_seconds_per_byte", t_per_byte},
          {"transfer_fixed_seconds", t_fixed_s},
          {"dq_bytes_per_query", dq},
          {"note", note}};
}

ThroughputModel ThroughputModel::from_json(const nlohmann::json& j) {
  if (j.value("format", "") != "gpusearch-cache-model" || j.value("version", 0) != 1)
    throw InputError("cache model", 0, "not a gpusearch cache model (version 1)");
  ThroughputModel m;
  m.c0 = j.at("c0_seconds").get<double>();
  m.c1 = j.at("c1_seconds").get<double>();
  m.t_per_byte = j.at("transfer_seconds_per_byte").get<double>();
  m.t_fixed_s = j.at("transfer_fixed_seconds").get<double>();
  for (const auto& p : j.at("dq_bytes_per_query"))
    m.dq_points.push_back({p.at(0).get<double>(), p.at(1).get<double>()});
  std::sort(m.dq_points.begin(), m.dq_points.end());
  m.note = j.value("note", "");
  return m;
}

void ThroughputModel::write(const std::filesystem::path& file) const {
  std::ofstream out(file);
  if (!out) throw InputError(file.string(), 0, "cannot write the cache model");
  out << to_json().dump(2) << '\n';
}

ThroughputModel ThroughputModel::read(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError(file.string(), 0, "cannot read the cache model");
  try {
    return from_json(nlohmann::json::parse(in));
  } catch (const InputError& e) {
    throw InputError(file.string(), 0, e.what());
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file.string(), 0, fmt::format("malformed cache model: {}", e.what()));
  }
}

}  // namespace gpusearch
