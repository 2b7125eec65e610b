// The aggregator's admission (issue 16), a program, not a test: how long AdmissionResolver takes
// to resolve a batch of the index's test queries, per query, hot (the same batch resolved just
// before) and cold (after `--cold-mb` MiB of other memory were read: the ISNs' engines run between
// two batches' admissions on the same node). Just in time, every query of a batch waits for the
// whole batch's admission, so this is on the latency path (NOTES-cluster.md, session 50). Every
// resolved query is checked against resolve_query and the lexicon's df.
//
//   bench_admission --index DIR [--batch 64] [--batches 400] [--cold-mb 64] [--threads 1]
//                   [--out admission.json]
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <limits>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "aggregator/admission_resolver.hpp"
#include "common/error.hpp"
#include "common/query.hpp"
#include "common/shard_index.hpp"
#include "common/term_dictionary.hpp"

using namespace gpusearch;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the aggregator's admission: resolving a batch of queries, hot and cold"};
  std::filesystem::path index_dir;
  std::size_t batch = 64, batches = 400, cold_mb = 64;
  unsigned threads = 1;
  std::string out;
  app.add_option("--index", index_dir, "index (its shard 0's vocabulary, its queries.test.tsv)")
      ->required();
  app.add_option("--batch", batch, "queries a batch")->check(CLI::Range(1, 65536));
  app.add_option("--batches", batches, "batches timed (fewer if the queries run out)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--cold-mb", cold_mb, "MiB read before each cold batch")
      ->check(CLI::Range(0, 65536));
  app.add_option("--threads", threads, "resolving threads (--admission-threads)")
      ->check(CLI::Range(1u, 64u));
  app.add_option("--out", out, "write the JSON here too");
  CLI11_PARSE(app, argc, argv);

  try {
    OpenOptions oo;
    oo.verify_checksums = false;
    const Index index = Index::open(index_dir, oo);
    const ShardIndex& shard = index.shard(0);
    const TermDictionary dictionary(shard);
    const QueryFile file = read_query_file(index_dir / "queries.test.tsv");
    const QueryLimits limits;
    AdmissionResolver resolver(dictionary, limits, threads);
    std::vector<std::uint64_t> other(cold_mb * (std::size_t(1) << 20) / sizeof(std::uint64_t), 1);
    std::uint64_t other_sum = 0;
    std::vector<double> hot_us, cold_us;
    std::vector<ResolvedQuery> got;
    std::size_t terms = 0, checked = 0;
    const std::size_t n = std::min(batches, file.queries.size() / batch);
    if (n == 0)
      throw Error(fmt::format("{}: fewer than {} test queries", index_dir.string(), batch));
    for (std::size_t b = 0; b < n; ++b) {
      for (int cold = 1; cold >= 0; --cold) {
        if (cold)
          for (std::size_t w = 0; w < other.size(); w += 8) other_sum += other[w];
        // The arrived queries are fresh copies, as the query source's poll makes them.
        std::vector<ArrivedQuery> arrived(batch);
        for (std::size_t i = 0; i < batch; ++i) arrived[i].text = file.queries[b * batch + i];
        // As the aggregator does just in time: the resolver's helpers are told when the batch
        // comes (100 us ahead), and it comes then.
        const auto due = Clock::now() + std::chrono::microseconds(100);
        resolver.expect_batch_at(due);
        while (Clock::now() < due) {
        }
        const auto t0 = Clock::now();
        resolver.resolve(arrived, "queries.test.tsv", got);
        const double us =
            std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / double(batch);
        (cold ? cold_us : hot_us).push_back(us);
        if (cold) continue;
        for (std::size_t i = 0; i < batch; ++i) {
          Query want;
          QueryProblem problem;
          const bool ok = resolve_query(shard, arrived[i].text, limits, want, problem, "q");
          double cost = std::numeric_limits<double>::max();
          for (TermId t : want.terms) cost = std::min(cost, double(shard.term(t).df_global));
          if (ok != got[i].ok || (ok && (want.terms != got[i].query.terms || cost != got[i].cost)))
            throw Error(
                fmt::format("query '{}': resolved unlike resolve_query", arrived[i].text.id));
          terms += want.terms.size();
          ++checked;
        }
      }
    }
    const nlohmann::json j = {
        {"index", index_dir.string()},
        {"vocabulary_terms", shard.num_terms()},
        {"batch", batch},
        {"batches", n},
        {"threads", threads},
        {"cold_mb", cold_mb},
        {"terms_per_query", double(terms) / double(std::max<std::size_t>(1, checked))},
        {"hot_us_per_query", median(hot_us)},
        {"cold_us_per_query", median(cold_us)},
        {"checked_queries", checked},
        {"sweep_checksum", other_sum % 7},
        {"helper_chunks", resolver.helper_stats().helper_chunks},
        {"split_chunks", resolver.helper_stats().chunks},
    };
    std::cout << j.dump(2) << '\n';
    if (!out.empty()) std::ofstream(out) << j.dump(2) << '\n';
  } catch (const std::exception& e) {
    std::cerr << "bench_admission: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
