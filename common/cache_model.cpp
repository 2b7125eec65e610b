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

CacheRunSample CacheRunSample::from_bench_row(const nlohmann::json& row) {
  try {
    CacheRunSample s;
    const auto& lc = row.at("list_cache");
    s.cache_bytes = row.at("cache_bytes").get<double>();
    s.batch_bytes = row.at("batch_bytes").get<double>();
    s.queries = row.at("queries").get<double>();
    s.batches = lc.at("batches").get<double>();
    s.wall_seconds = row.at("seconds").get<double>();
    s.shipped_bytes = lc.at("bytes_shipped_total").get<double>();  // deduplicated: as copied
    s.transfer_seconds = row.at("h2d_seconds").get<double>();
    s.max_batch_queries = row.at("batch_cap").get<double>();
    s.shipped_query_bytes = lc.value("bytes_shipped", 0.0);
    s.read_bytes =
        lc.value("bytes_hit", 0.0) + s.shipped_query_bytes + lc.value("bytes_unavailable", 0.0);
    if (lc.contains("device") && lc["device"].contains("cache_used_bytes"))
      s.cache_used_bytes = lc["device"]["cache_used_bytes"].get<double>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw InputError("cache model", 0, fmt::format("not a bench_list_cache row: {}", e.what()));
  }
}

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
      m.fit_notes.push_back("copy time: no fixed part (bytes per batch without spread)");
    }
    m.t_fixed_s = std::max(0.0, a);
    m.t_per_byte = b;
  }
  // Bytes per query at each measured cache size (as copied: deduplicated within a batch).
  {
    struct At {
      double shipped = 0, queries = 0, shipped_query = 0, read = 0, used = 0;
      bool used_known = true, read_known = true;
    };
    std::map<double, At> by_cache;
    for (const auto& s : ok) {
      At& a = by_cache[s.cache_bytes];
      a.shipped += s.shipped_bytes;
      a.queries += s.queries;
      a.shipped_query += s.shipped_query_bytes;
      a.read += s.read_bytes;
      a.read_known = a.read_known && s.read_bytes > 0;
      a.used = std::max(a.used, s.cache_used_bytes);
      a.used_known = a.used_known && s.cache_used_bytes >= 0;
    }
    for (const auto& [c, a] : by_cache) m.dq_points.push_back({c, a.shipped / a.queries});
    // Below the smallest measured cache. (1) Its plan filled only `used` bytes: a cache of
    // `used` bytes holds the same plan and ships the same. (2) A zero cache ships all that the
    // queries read, deduplicated within a batch as at the smallest measured cache.
    const double c_min = by_cache.begin()->first;
    const At& a = by_cache.begin()->second;
    const double dq_min = m.dq_points.front().second;
    if (a.used_known && a.used < 0.99 * c_min && a.used > 0) {  // full to 1%: full
      m.dq_points.insert(m.dq_points.begin(), {a.used, dq_min});
      m.fit_notes.push_back(fmt::format(
          "dq({:.0f}) = dq({:.0f}): the plans filled only {:.0f} bytes of the smallest measured "
          "cache",
          a.used, c_min, a.used));
    }
    if (c_min > 0 && a.read_known) {
      const double dedup = a.shipped_query > 0 ? std::min(1.0, a.shipped / a.shipped_query) : 1.0;
      const double dq0 = std::max(dq_min, dedup * a.read / a.queries);
      m.dq_points.insert(m.dq_points.begin(), {0.0, dq0});
      m.fit_notes.push_back(fmt::format(
          "dq(0) = {:.0f} bytes per query: every byte read ({:.0f} per query), x {:.3f} for a "
          "batch's sharing as at the smallest measured cache (an estimate; interpolated up to "
          "the next point)",
          dq0, a.read / a.queries, dedup));
    }
    if (m.dq_points.front().first > 0)
      m.fit_notes.push_back(fmt::format(
          "dq below {:.0f} bytes of cache unknown (no reads in the runs): the model does not "
          "choose smaller caches",
          m.dq_points.front().first));
  }
  // Compute: what is left of each run's time per query after its copies (as fitted), against
  // 1 / n; least squares with c0, c1 >= 0.
  {
    std::vector<double> x, y;
    for (const auto& s : ok) {
      const double n = s.queries / s.batches;
      const double copies = s.batches * m.t_fixed_s + s.shipped_bytes * m.t_per_byte;
      x.push_back(1.0 / n);
      y.push_back((s.wall_seconds - copies) / s.queries);
    }
    auto [a, b] = fit_line(x, y);
    if (b < 0) {  // a larger batch never costs more per query: a flat fit instead
      double sum = 0;
      for (double v : y) sum += v;
      m.fit_notes.push_back(fmt::format(
          "c1 = 0: these runs were faster per query in smaller batches (unconstrained fit c0 "
          "{:.3g} s, c1 {:.3g} s), which c0 + c1 / n cannot describe; c = their mean",
          a, b));
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
  return t_for_copy(batch_bytes / 2);
}

double ThroughputModel::t_for_copy(double copy_bytes) const {
  return t_per_byte + (copy_bytes > 0 ? t_fixed_s / copy_bytes : 0.0);
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
  double n = std::max(1.0, max_queries);
  if (d > 0) n = std::min(n, std::max(1.0, batch_bytes / 2 / d));
  if (max_response_ms > 0) {
    // A batch: n (c0 + t dq) + c1 + a <= theta.
    const double theta = max_response_ms / 1e3;
    const double n_theta = (theta - c1 - (d > 0 ? t_fixed_s : 0.0)) / (c0 + t_per_byte * d);
    if (!(n_theta >= 1.0)) return s;  // not even one query per batch meets the bound
    n = std::min(n, std::floor(n_theta));
  }
  s.batch_queries = n;
  // The copy's fixed part is paid per batch, over the bytes the batch ships (n dq), not over
  // the lane's region: batches stopped by the launch cap ship less than S_b / 2.
  const double per_query = c(n) + t_for_copy(n * d) * d;
  s.throughput = per_query > 0 ? 1.0 / per_query : 0.0;
  s.response_ms = 1e3 * n * per_query;
  s.feasible = true;
  return s;
}

CacheSplit ThroughputModel::choose(double memory_bytes, double min_batch_bytes, double max_queries,
                                   double max_response_ms, unsigned steps) const {
  CacheSplit best;
  const double span = std::max(0.0, memory_bytes - min_batch_bytes);
  const double lo = std::min(dq_known_from(), span);  // no choice where dq is unknown
  for (unsigned i = 0; i <= steps; ++i) {
    const double cache = lo + (span - lo) * double(i) / double(std::max(1u, steps));
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
          {"note", note},
          {"fit_notes", fit_notes}};
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
  if (j.contains("fit_notes"))
    for (const auto& n : j["fit_notes"]) m.fit_notes.push_back(n.get<std::string>());
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

std::vector<nlohmann::json> bench_rows(const nlohmann::json& report, double ratio,
                                       const std::string& policy) {
  std::vector<nlohmann::json> rows;
  auto take = [&](const nlohmann::json& list) {
    if (!list.is_array()) return;
    for (const auto& row : list) {
      if (!row.is_object() || !row.contains("list_cache")) continue;
      if (std::abs(row.value("ratio", -1.0) - ratio) > 1e-9 * std::max(1.0, ratio)) continue;
      if (row.value("policy", "") != policy) continue;
      const bool seen = std::any_of(rows.begin(), rows.end(), [&](const nlohmann::json& r) {
        return r.value("cache_share", -1.0) == row.value("cache_share", -2.0) &&
               r.value("batch_cap", 0u) == row.value("batch_cap", 1u);
      });
      if (!seen) rows.push_back(row);
    }
  };
  take(report.value("sweep", nlohmann::json::array()));
  if (report.contains("model")) take(report["model"].value("rows", nlohmann::json::array()));
  return rows;
}

nlohmann::json compare_with_measured(const ThroughputModel& model,
                                     std::span<const nlohmann::json> rows, double memory_bytes,
                                     double max_queries, double max_response_ms) {
  const CacheSplit predicted =
      model.choose(memory_bytes, memory_bytes * 0.01, max_queries, max_response_ms);
  nlohmann::json measured, ranked;
  double ranked_tp = -1;
  nlohmann::json per_row = nlohmann::json::array();
  for (const auto& row : rows) {
    const CacheRunSample s = CacheRunSample::from_bench_row(row);
    const CacheSplit at = model.at(s.cache_bytes, s.batch_bytes, s.max_batch_queries, 0);
    per_row.push_back({{"cache_share", row.value("cache_share", 0.0)},
                       {"batch_cap", s.max_batch_queries},
                       {"measured_queries_per_second", s.queries / s.wall_seconds},
                       {"predicted_queries_per_second", at.throughput}});
    if (max_response_ms > 0 && row.value("batch_ms_p95", 0.0) > max_response_ms) continue;
    if (measured.is_null() || row["queries_per_second"] > measured["queries_per_second"])
      measured = row;
    if (at.throughput > ranked_tp * (1 + 1e-9)) ranked_tp = at.throughput, ranked = row;
  }
  auto share = [](const nlohmann::json& r) {
    return r.is_null() ? -1.0 : r["cache_share"].get<double>();
  };
  return {
      {"max_response_ms", max_response_ms},
      {"predicted_cache_share", predicted.cache_bytes / memory_bytes},
      {"predicted_batch_queries", predicted.batch_queries},
      {"predicted_queries_per_second", predicted.throughput},
      {"feasible", predicted.feasible},
      {"model_ranks_first_cache_share", share(ranked)},
      {"model_ranks_first_batch_cap", ranked.is_null() ? 0u : ranked["batch_cap"].get<unsigned>()},
      {"measured_cache_share", share(measured)},
      {"measured_batch_cap", measured.is_null() ? 0u : measured["batch_cap"].get<unsigned>()},
      {"measured_queries_per_second",
       measured.is_null() ? 0.0 : measured["queries_per_second"].get<double>()},
      {"rows", per_row}};
}

}  // namespace gpusearch
