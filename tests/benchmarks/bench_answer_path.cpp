// The answer's path outside the engines (issue 16), a program, not a test: what one batch's
// answer costs from the ISN's packed results to the aggregator's merged hits, on this machine,
// with nothing else running. Per batch of `--queries` queries of `--hits` hits each (external ids
// of `--id-chars` characters, or with `--index` the ids of random documents of its shard 0),
// median over `--repeat` rounds, each after `--cold-mb` MiB of other memory were read (the
// engine's work between two answers; 0: hot caches):
//   lookup   with --index: the hits' external ids, as the ISN looks them up (prefetch rounds),
//   encode   encode_results (the ISN's MPI thread, after the id look-ups; its first segment from
//            a pool, as the ISN's),
//   flatten  the message's segments into one buffer (what MPI's receive leaves at the aggregator),
//   decode   ResultBatchView::decode of one answer (the aggregator's merge thread),
//   merge    merge_answer_views of every query over `--isns` answers (the merge thread's loop).
// And the batch's way there, before the answer's in each round:
//   batch_encode  encode_message of the batch's QueryBatch (the aggregator's cut: each query's
//                 id and three term IDs), with its flattening,
//   batch_decode  decode_query_batch (the ISN's MPI thread, before the engine takes the batch).
// Every merged answer is checked against the ISNs' hits (the best `--hits` over all ISNs).
//
//   bench_answer_path [--queries 64] [--hits 10] [--isns 1] [--id-chars 8] [--repeat 2000]
//                     [--index DIR [--huge-ids]] [--cold-mb 0] [--seed 1]
//                     [--out answer-path.json]
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "aggregator/kway_merge.hpp"
#include "common/shard_index.hpp"
#include "common/wire/result_view.hpp"
#include "common/wire/segment_pool.hpp"
#include "common/wire/wire.hpp"

using namespace gpusearch;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double micros_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the answer's path outside the engines: encode, decode and merge one batch"};
  std::size_t queries = 64, hits = 10, isns = 1, id_chars = 8, repeat = 2000;
  std::string out;
  std::filesystem::path index_dir;
  std::size_t cold_mb = 0;
  std::uint64_t seed = 1;
  app.add_option("--index", index_dir, "look the hits' ids up in this index's shard 0");
  app.add_option("--cold-mb", cold_mb, "MiB read between rounds (0: hot caches)")
      ->check(CLI::Range(0, 65536));
  app.add_option("--seed", seed, "the random documents' seed (with --index)");
  bool huge_ids = false;
  app.add_flag("--huge-ids", huge_ids,
               "with --index: the ids in huge pages, as the ISN's --id-table huge-pages");
  app.add_option("--queries", queries, "queries a batch")->check(CLI::Range(1, 65536));
  app.add_option("--hits", hits, "hits a query (k)")->check(CLI::Range(1, 1000));
  app.add_option("--isns", isns, "answers merged a batch")->check(CLI::Range(1, 64));
  app.add_option("--id-chars", id_chars, "characters of an external id")->check(CLI::Range(1, 64));
  app.add_option("--repeat", repeat, "rounds (the median is reported)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--out", out, "write the JSON here too");
  CLI11_PARSE(app, argc, argv);

  std::optional<Index> index;
  OpenOptions open_options;
  open_options.verify_checksums = false;
  open_options.external_ids_in_huge_pages = huge_ids;
  if (!index_dir.empty()) index.emplace(Index::open(index_dir, open_options));
  const ShardIndex* shard = index ? &index->shard(0) : nullptr;
  std::mt19937_64 rng(seed);
  // ISN i's answers: query q's hits rank j * isns + i over all ISNs (scores falling with the
  // rank), so that the merged top-k takes from every ISN; hit (q, j) of ISN i is document
  // i + isns * (q * hits + j), or with --index a random document of the shard.
  std::vector<std::vector<ShardResult>> results(isns, std::vector<ShardResult>(queries));
  std::vector<std::vector<std::string>> id_strings(isns);
  std::vector<std::vector<std::string_view>> ids(isns);
  for (std::size_t i = 0; i < isns; ++i) {
    for (std::size_t q = 0; q < queries; ++q) {
      ShardResult& r = results[i][q];
      r.and_matches = 1000;
      for (std::size_t j = 0; j < hits; ++j) {
        RankedDoc d;
        d.doc = shard ? DocId(rng() % shard->num_docs()) : DocId(i + isns * (q * hits + j));
        d.score = 1000.0 - double(j * isns + i) - 0.001 * double(q);
        d.rank = GlobalRank(i + isns * (q * hits + j));
        d.shard = std::uint32_t(i);
        r.hits.push_back(d);
        std::string id = fmt::format("{:0{}}", d.doc, id_chars);
        id_strings[i].push_back(id.substr(id.size() - id_chars));
      }
    }
    for (const std::string& s : id_strings[i]) ids[i].push_back(s);
  }
  // The ISN's look-up (encode_answer's): look_up_external_ids.
  const auto look_up = [&](std::size_t i) {
    look_up_external_ids(*shard, results[i], ids[i].data());
  };
  SearchParams params;
  params.k = std::uint32_t(hits);

  // Other memory read between rounds: the engine's work evicts the answer path's lines.
  std::vector<std::uint64_t> other(cold_mb * (std::size_t(1) << 20) / sizeof(std::uint64_t), 1);
  std::uint64_t other_sum = 0;

  std::vector<double> lookup_us, encode_us, flatten_us, decode_us, merge_us;
  std::vector<double> batch_encode_us, batch_decode_us;
  wire::QueryBatch batch;  // ids as the answers', three term IDs a query
  for (std::size_t q = 0; q < queries; ++q)
    batch.queries.push_back({fmt::format("q{:0{}}", q, id_chars), {},
                             {std::uint32_t(17 * q), std::uint32_t(17 * q + 5),
                              std::uint32_t(17 * q + 9)}});
  batch.params = params;
  std::size_t batch_bytes = 0;
  std::size_t answer_bytes = 0;
  std::vector<wire::WireBytes> flat(isns);
  std::vector<wire::ResultBatchView> views(isns);
  std::vector<wire::ShardAnswerView> shards(isns);
  MergedHits merged;
  std::uint64_t checksum = 0;
  // Each ISN's first segments come from its pool, as the ISN's answers do (zeroed when the
  // message is gone, so that the encode finds them zeroed).
  std::vector<std::shared_ptr<wire::SegmentPool>> pools(isns);
  for (auto& p : pools) p = std::make_shared<wire::SegmentPool>();
  for (std::size_t round = 0; round < repeat; ++round) {
    for (std::size_t w = 0; w < other.size(); w += 8) other_sum += other[w];
    {
      batch.batch_id = round;
      auto t0 = Clock::now();
      const wire::WireBytes sent = wire::encode_message(batch).flat();
      batch_encode_us.push_back(micros_since(t0));
      batch_bytes = sent.size() * sizeof(std::uint64_t);
      t0 = Clock::now();
      const wire::QueryBatch got = wire::decode_query_batch(wire::as_bytes(sent));
      batch_decode_us.push_back(micros_since(t0));
      if (got.queries.size() != queries || got.batch_id != round ||
          got.queries.back().term_ids != batch.queries.back().term_ids) {
        std::cerr << "query batch decoded unlike the one encoded\n";
        return 1;
      }
    }
    for (std::size_t i = 0; i < isns; ++i) {
      wire::ResultHeader header;
      header.batch_id = round;
      header.isn_rank = std::uint32_t(i + 1);
      auto t0 = Clock::now();
      if (shard) {
        look_up(i);
        if (i == 0) lookup_us.push_back(micros_since(t0));
        t0 = Clock::now();
      }
      wire::EncodedMessage message = wire::encode_results(header, results[i], ids[i], pools[i]);
      if (i == 0) encode_us.push_back(micros_since(t0));
      t0 = Clock::now();
      flat[i] = message.flat();
      if (i == 0) flatten_us.push_back(micros_since(t0));
      answer_bytes = flat[i].size() * sizeof(std::uint64_t);
    }
    for (std::size_t i = 0; i < isns; ++i) {
      const auto t0 = Clock::now();
      views[i].decode(wire::as_bytes(flat[i]));
      if (i == 0) decode_us.push_back(micros_since(t0));
    }
    const auto t0 = Clock::now();
    for (std::size_t q = 0; q < queries; ++q) {
      for (std::size_t i = 0; i < isns; ++i) shards[i] = views[i].answer(q);
      merge_answer_views(params, shards, merged);
      checksum += merged.hits.size();
      if (round == 0) {
        // The best `hits` over all ISNs: ranks 0..hits-1 of the interleaving.
        if (merged.hits.size() != hits) {
          std::cerr << fmt::format("query {}: {} merged hits, expected {}\n", q, merged.hits.size(),
                                   hits);
          return 1;
        }
        for (std::size_t r = 0; r < hits; ++r) {
          const std::size_t isn = r % isns, j = r / isns;
          const std::string_view want = ids[isn][q * hits + j];
          if (merged.hits[r].docid != want) {
            std::cerr << fmt::format("query {} rank {}: merged id '{}', expected '{}'\n", q, r,
                                     merged.hits[r].docid, want);
            return 1;
          }
        }
      }
    }
    merge_us.push_back(micros_since(t0));
  }
  if (checksum != repeat * queries * hits || other_sum != other.size() / 8 * repeat) {
    std::cerr << "merged hit count wrong\n";
    return 1;
  }
  const nlohmann::json j = {
      {"queries", queries},
      {"hits", hits},
      {"isns", isns},
      {"id_chars", id_chars},
      {"repeat", repeat},
      {"answer_bytes", answer_bytes},
      {"index", index_dir.string()},
      {"cold_mb", cold_mb},
      {"huge_ids", huge_ids},
      {"lookup_us", median(lookup_us)},
      {"encode_us", median(encode_us)},
      {"flatten_us", median(flatten_us)},
      {"decode_us", median(decode_us)},
      {"merge_us", median(merge_us)},
      {"batch_bytes", batch_bytes},
      {"batch_encode_us", median(batch_encode_us)},
      {"batch_decode_us", median(batch_decode_us)},
  };
  std::cout << j.dump(2) << '\n';
  if (!out.empty()) std::ofstream(out) << j.dump(2) << '\n';
  return 0;
}
