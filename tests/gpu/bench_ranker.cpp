// Second-stage ranking benchmark (issue 12; paper 004, chapter 5): ranking latency per query
// against documents per query (100 to 10,000) for the three reference rankers of Table 4.2, the
// GPU (features, transforms, trees, cuBLAS net, with the request's copies) against the CPU twin on
// all host cores, in the same run, with the copy share of GPU time (Figures 5.2, 5.4, 5.6) and a
// correctness column (largest relative score difference, top-10 agreement). A program writing
// JSON, not a test.
//
// Each query's candidates are its exact first-stage top D (OR, BM25) on a synthetic index with a
// forward index (built once into --work unless --index names one); a query with fewer than D
// matches is not used at that D.
#include <tbb/global_control.h>
#include <tbb/info.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <numeric>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/forward_index.hpp"
#include "common/metrics.hpp"
#include "common/shard_index.hpp"
#include "gpu/ranker_engine.hpp"
#include "isn/engine_factory.hpp"
#include "isn/ranker/cpu_ranker.hpp"
#include "isn/ranker/ranker_store.hpp"
#include "isn/ranker/reference_rankers.hpp"
#include "isn/ranker/second_stage.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"

using namespace gpusearch;
using namespace gpusearch::ranker;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
double median(std::vector<double> v) {
  return v.empty() ? 0.0 : metrics::percentile(std::move(v), 50);
}

std::vector<std::uint32_t> parse_list(const std::string& s) {
  std::vector<std::uint32_t> out;
  std::size_t start = 0;
  while (start < s.size()) {
    const std::size_t c = std::min(s.find(',', start), s.size());
    out.push_back(std::uint32_t(std::stoul(s.substr(start, c - start))));
    start = c + 1;
  }
  return out;
}

// Queries with at least `docs` first-stage candidates, up to `limit`, each as a one-query request.
std::vector<FeatureBatch> requests(const ShardIndex& shard, const ForwardIndex& fwd,
                                   QueryEngine& engine, const std::vector<Query>& queries,
                                   std::uint32_t docs, std::size_t limit, double alpha) {
  std::vector<FeatureBatch> out;
  SearchParams p;
  p.k = docs;
  p.alpha = alpha;
  for (std::size_t start = 0; start < queries.size() && out.size() < limit; start += 256) {
    const std::size_t n = std::min<std::size_t>(256, queries.size() - start);
    std::span<const Query> batch(queries.data() + start, n);
    std::vector<ShardResult> results(n);
    engine.search(batch, p, results);
    for (std::size_t q = 0; q < n && out.size() < limit; ++q) {
      if (results[q].hits.size() < docs) continue;
      const std::size_t one[] = {q};
      FeatureBatch b;
      build_feature_batch(shard, fwd, batch, one, results, alpha, b);
      out.push_back(std::move(b));
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"second-stage ranker latency: GPU vs the CPU twin on all cores (JSON out)"};
  fs::path index_dir, work = "/tmp/gpusearch-bench-ranker", out_path = "bench_ranker.json";
  std::uint32_t synthetic_docs = 300000;
  std::string docs_list = "100,300,1000,3000,10000", rankers_list = "R-S-BLG,R-M-BGD,R-L-D";
  std::size_t queries_per_point = 20;
  unsigned repeat = 5, threads = 0;
  int device = -1;
  bool describe = false;
  gpu::FeatureOptions feature_options;
  std::string decode = "shuffle";
  app.add_option("--index", index_dir,
                 "index with a forward index (default: a synthetic one in --work)");
  app.add_option("--work", work, "where the synthetic index and the rankers are made")
      ->capture_default_str();
  app.add_option("--synthetic-docs", synthetic_docs, "documents of the synthetic index")
      ->capture_default_str();
  app.add_option("--docs-per-query", docs_list, "candidates per query (list)")
      ->capture_default_str();
  app.add_option("--rankers", rankers_list, "reference rankers (list)")->capture_default_str();
  app.add_option("--queries", queries_per_point, "queries per point")->capture_default_str();
  app.add_option("--repeat", repeat, "timed runs per query (median)")->capture_default_str();
  app.add_option("--threads", threads, "CPU twin threads (default: all cores)");
  app.add_option("--gpu", device, "device ordinal");
  app.add_option("--out", out_path, "JSON output")->capture_default_str();
  app.add_option("--segment-bytes", feature_options.segment_bytes,
                 "GPU feature walk: streams longer than this are walked by a warp per segment")
      ->capture_default_str();
  app.add_option("--decode", decode, "GPU feature walk's token decoder")
      ->check(CLI::IsMember({"shuffle", "reread"}))
      ->capture_default_str();
  app.add_flag("--describe", describe,
               "print the candidates' stream sizes per point (the work the walks do) and exit; "
               "needs no device");
  CLI11_PARSE(app, argc, argv);
  std::unique_ptr<tbb::global_control> limit;
  if (threads > 0)
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                  threads);
  const int cpu_threads = threads > 0 ? int(threads) : tbb::info::default_concurrency();
  try {
    if (!describe && gpu::ranker_device_count() == 0) {
      std::cerr << "bench_ranker: NO CUDA DEVICE: nothing measured\n";
      return 2;
    }
    fs::create_directories(work);
    if (index_dir.empty()) {
      index_dir = work / fmt::format("syn{}", synthetic_docs);
      if (!fs::exists(index_dir / kRootManifestName)) {
        std::cerr << "building a synthetic index of " << synthetic_docs
                  << " documents (forward index) in " << index_dir << "\n";
        BuildOptions bo;
        bo.out_dir = index_dir;
        bo.forward_index = true;
        bo.force = true;
        bo.progress = false;
        build_index_synthetic(SyntheticParams::parse(fmt::format("docs={},seed=7", synthetic_docs)),
                              bo);
      }
    }
    const fs::path store_dir = work / "reference-rankers";
    if (!fs::exists(store_dir / kStoreIndexName)) write_reference_rankers(store_dir, 4);
    const RankerStore store = RankerStore::open(store_dir);
    const Index index = Index::open(index_dir);
    const ShardIndex& shard = index.shard(0);
    const ForwardIndex fwd = ForwardIndex::open(shard);
    const double alpha = index.params().gs_alpha;
    std::vector<Query> queries;
    for (const QueryText& qt : read_query_file(index_dir / "queries.test.tsv").queries) {
      Query q;
      QueryProblem p;
      if (resolve_query(shard, qt, {}, q, p, "queries") && q.terms.size() >= 2)
        queries.push_back(q);
    }
    EngineOptions eo;
    eo.engine = "cpu";
    const auto engine = make_engine(eo, shard, index.shard_id(0));
    if (describe) {
      fmt::print("{:>6} {:>3} {:>12} {:>12} {:>10} {:>10}\n", "docs", "q", "bytes/query",
                 "bytes/doc", "max doc", "p99 doc");
      for (const std::uint32_t docs : parse_list(docs_list)) {
        std::vector<double> per_query, per_doc;
        double longest = 0;
        for (const FeatureBatch& b : requests(shard, fwd, *engine, queries, docs,
                                              queries_per_point, alpha)) {
          per_query.push_back(double(b.stream_bytes()));
          for (const FeatureDoc& d : b.docs) {
            per_doc.push_back(d.stream_bytes);
            longest = std::max(longest, double(d.stream_bytes));
          }
        }
        if (per_query.empty()) continue;
        const double per_doc_mean =
            std::accumulate(per_doc.begin(), per_doc.end(), 0.0) / double(per_doc.size());
        fmt::print("{:>6} {:>3} {:>12.0f} {:>12.1f} {:>10.0f} {:>10.0f}\n", docs, per_query.size(),
                   median(per_query), per_doc_mean, longest, metrics::percentile(per_doc, 99));
      }
      return 0;
    }
    // Two GPU modes: the shard's forward index kept on the device (a request carries queries and
    // candidates only), and every request carrying its candidates' streams (paper 004's setting).
    gpu::GpuRankerEngine resident_engine(device), copying_engine(device);
    feature_options.shuffle_decode = decode == "shuffle";
    resident_engine.set_feature_options(feature_options);
    copying_engine.set_feature_options(feature_options);
    resident_engine.attach_streams(fwd.data().data(), fwd.data().size());
    const nlohmann::json device_info = resident_engine.stats();
    const std::vector<std::string> rankers = [&] {
      std::vector<std::string> v;
      std::size_t s = 0;
      while (s < rankers_list.size()) {
        const std::size_t c = std::min(rankers_list.find(',', s), rankers_list.size());
        v.push_back(rankers_list.substr(s, c - s));
        s = c + 1;
      }
      return v;
    }();

    nlohmann::json points = nlohmann::json::array();
    fmt::print("{:<8} {:>6} {:>3} {:>9} | {:>8} {:>7} {:>6} | {:>8} {:>7} {:>6} | {:>7} {:>7} {:>7} {:>8} {:>6}\n",
               "ranker", "docs", "q", "cpu ms", "gpu ms", "speedup", "copy%", "gpu+cp", "speedup",
               "copy%", "fe ms", "mit ms", "net ms", "max rel", "top10");
    for (const std::uint32_t docs : parse_list(docs_list)) {
      const auto reqs = requests(shard, fwd, *engine, queries, docs, queries_per_point, alpha);
      if (reqs.empty()) {
        fmt::print("no query has {} candidates: skipped\n", docs);
        continue;
      }
      for (const std::string& name : rankers) {
        const auto compiled = store.load(name);
        const CpuRanker cpu(compiled);
        struct Mode {
          gpu::GpuRankerEngine* engine;
          std::unique_ptr<gpu::DeviceRanker> ranker;
          std::vector<double> wall, device_ms, copy, fe, mit, net, pack;
          std::uint64_t units = 0, segmented = 0;
        };
        Mode modes[2] = {{&resident_engine, resident_engine.upload(compiled), {}, {}, {}, {}, {}, {}, {}},
                         {&copying_engine, copying_engine.upload(compiled), {}, {}, {}, {}, {}, {}, {}}};
        std::vector<double> cpu_ms;
        double worst = 0;
        std::size_t top10_same = 0;
        for (const FeatureBatch& b : reqs) {
          std::vector<float> cs(b.num_docs()), gs(b.num_docs());
          cpu.rank(b, cs);  // warm-up (and the reference scores)
          std::vector<double> c_runs;
          for (unsigned r = 0; r < repeat; ++r) {
            const auto t0 = Clock::now();
            cpu.rank(b, cs);
            c_runs.push_back(ms_since(t0));
          }
          cpu_ms.push_back(median(c_runs));
          for (Mode& m : modes) {
            m.engine->rank(*m.ranker, b, gs);  // warm-up
            std::vector<double> g_runs;
            gpu::RankerTimings best{};
            for (unsigned r = 0; r < repeat; ++r) {
              const gpu::RankerTimings t = m.engine->rank(*m.ranker, b, gs);
              g_runs.push_back(t.wall_ms);
              if (r == 0 || t.wall_ms < best.wall_ms) best = t;
            }
            m.wall.push_back(median(g_runs));
            m.device_ms.push_back(best.gpu_ms());
            m.copy.push_back(best.copy_ms());
            m.fe.push_back(best.features_ms);
            m.mit.push_back(best.transforms_ms);
            m.net.push_back(best.net_ms);
            m.pack.push_back(best.pack_ms);
            m.units += best.feature_units, m.segmented += best.segmented_streams;
            for (std::size_t i = 0; i < cs.size(); ++i)
              worst = std::max(worst, double(std::fabs(cs[i] - gs[i])) /
                                          std::max(1.0, double(std::fabs(cs[i]))));
          }
          // Do the CPU and the GPU (the last mode's scores) put the same ten documents on top?
          std::vector<std::size_t> oc(cs.size()), og(cs.size());
          std::iota(oc.begin(), oc.end(), 0);
          std::iota(og.begin(), og.end(), 0);
          const std::size_t k = std::min<std::size_t>(10, cs.size());
          std::partial_sort(oc.begin(), oc.begin() + std::ptrdiff_t(k), oc.end(),
                            [&](auto a, auto b) { return cs[a] > cs[b]; });
          std::partial_sort(og.begin(), og.begin() + std::ptrdiff_t(k), og.end(),
                            [&](auto a, auto b) { return gs[a] > gs[b]; });
          std::sort(oc.begin(), oc.begin() + std::ptrdiff_t(k));
          std::sort(og.begin(), og.begin() + std::ptrdiff_t(k));
          top10_same += std::equal(oc.begin(), oc.begin() + std::ptrdiff_t(k), og.begin());
        }
        const double c = median(cpu_ms);
        const auto mode_json = [&](const Mode& m) {
          const double g = median(m.wall), dev = median(m.device_ms), copy = median(m.copy);
          return nlohmann::json{{"gpu_ms_median", g},
                                {"speedup", g > 0 ? c / g : 0.0},
                                {"gpu_device_ms_median", dev},
                                {"copy_ms_median", copy},
                                {"copy_share_of_gpu_time", dev > 0 ? copy / dev : 0.0},
                                {"features_ms_median", median(m.fe)},
                                {"transforms_ms_median", median(m.mit)},
                                {"net_ms_median", median(m.net)},
                                {"pack_ms_median", median(m.pack)},
                                {"feature_units", m.units},
                                {"segmented_streams", m.segmented},
                                {"gpu_ms", m.wall}};
        };
        nlohmann::json p = {
            {"ranker", name},
            {"docs_per_query", docs},
            {"queries", reqs.size()},
            {"cpu_ms_median", c},
            {"cpu_ms", cpu_ms},
            {"resident_streams", mode_json(modes[0])},
            {"copied_streams", mode_json(modes[1])},
            {"request_bytes_with_streams_mean",
             std::accumulate(reqs.begin(), reqs.end(), 0.0,
                             [](double s, const FeatureBatch& b) { return s + double(b.bytes()); }) /
                 double(reqs.size())},
            {"stream_bytes_per_query_mean",
             std::accumulate(reqs.begin(), reqs.end(), 0.0,
                             [](double s, const FeatureBatch& b) {
                               return s + double(b.stream_bytes());
                             }) /
                 double(reqs.size())},
            {"longest_stream_bytes",
             std::accumulate(reqs.begin(), reqs.end(), std::uint32_t(0),
                             [](std::uint32_t s, const FeatureBatch& b) {
                               for (const FeatureDoc& d : b.docs) s = std::max(s, d.stream_bytes);
                               return s;
                             })},
            {"max_relative_difference", worst},
            {"top10_equal_queries", top10_same}};
        const auto& r = p["resident_streams"];
        const auto& cp = p["copied_streams"];
        fmt::print(
            "{:<8} {:>6} {:>3} {:>9.3f} | {:>8.3f} {:>6.1f}x {:>5.0f}% | {:>8.3f} {:>6.1f}x {:>5.0f}% | "
            "{:>7.3f} {:>7.3f} {:>7.3f} {:>8.1e} {:>3}/{}\n",
            name, docs, reqs.size(), c, r["gpu_ms_median"].get<double>(), r["speedup"].get<double>(),
            100 * r["copy_share_of_gpu_time"].get<double>(), cp["gpu_ms_median"].get<double>(),
            cp["speedup"].get<double>(), 100 * cp["copy_share_of_gpu_time"].get<double>(),
            r["features_ms_median"].get<double>(), r["transforms_ms_median"].get<double>(),
            r["net_ms_median"].get<double>(), worst, top10_same, reqs.size());
        points.push_back(std::move(p));
      }
    }
    const nlohmann::json out = {{"benchmark", "bench_ranker"},
                                {"index", index_dir.string()},
                                {"documents", shard.num_docs()},
                                {"avg_doc_length", index.params().collection.avg_doc_length},
                                {"cpu_threads", cpu_threads},
                                {"repeat", repeat},
                                {"feature_segment_bytes", feature_options.segment_bytes},
                                {"feature_decode", decode},
                                {"device", device_info},
                                {"note",
                                 "cpu: the CPU twin, documents in parallel on all cores (oneTBB); "
                                 "gpu: one request per query, wall time including packing, both "
                                 "copies and the kernels; resident_streams: the forward index kept "
                                 "on the device; copied_streams: every request carries its "
                                 "candidates' streams; copy share = copies / device time"},
                                {"points", points}};
    std::ofstream f(out_path);
    f << out.dump(1) << '\n';
    if (!f) throw Error("cannot write " + out_path.string());
    fmt::print("wrote {}\n", out_path.string());
  } catch (const std::exception& e) {
    std::cerr << "bench_ranker: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
