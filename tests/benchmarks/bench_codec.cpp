// Codec benchmark (a program, not a test): re-encodes every posting list of an index with each
// codec, reports bits per posting for docIDs and frequencies, and times single-thread block
// decoding (docIDs with the prefix sum, and frequencies) in integers per second, against the
// plainly-written scalar decoder measured in the same run. Every decoded block is checked.
//
//   bench_codec --index DIR [--shard 0] [--repeat 5] [--out codec.json]
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/block_codec.hpp"
#include "common/shard_index.hpp"

using namespace gpusearch;
using Clock = std::chrono::steady_clock;

namespace {

struct Encoded {
  std::vector<std::uint32_t> words;
  std::vector<std::uint64_t> block_offset;  // per block
  std::vector<DocId> block_floor;
  std::uint64_t docid_words = 0, freq_words = 0, postings = 0;
};

Encoded encode_all(const ShardIndex& shard, codec::Codec c) {
  Encoded e;
  std::vector<DocId> docs;
  std::vector<std::uint32_t> freqs;
  for (TermId t = 0; t < shard.num_terms(); ++t) {
    shard.decode_list(t, docs, freqs);
    e.postings += docs.size();
    for (std::size_t i = 0; i < docs.size(); i += kBlockSize) {
      const unsigned n = unsigned(std::min<std::size_t>(kBlockSize, docs.size() - i));
      const DocId floor = i == 0 ? 0 : docs[i - 1] + 1;
      e.block_offset.push_back(e.words.size());
      e.block_floor.push_back(floor);
      const std::size_t before = e.words.size();
      codec::encode_posting_block(docs.data() + i, freqs.data() + i, n, floor, c, e.words);
      const std::size_t dw = codec::block_words(e.words.data() + before);
      e.docid_words += dw;
      e.freq_words += e.words.size() - before - dw;
    }
  }
  return e;
}

// Decodes every block; returns a checksum of all decoded values (so nothing is optimized away).
template <bool kScalar, bool kFreqs>
std::uint64_t decode_all(const Encoded& e) {
  alignas(64) DocId docs[kBlockSize];
  alignas(64) std::uint32_t freqs[kBlockSize];
  std::uint64_t sum = 0;
  for (std::size_t b = 0; b < e.block_offset.size(); ++b) {
    const std::uint32_t* in = e.words.data() + e.block_offset[b];
    const std::uint32_t* freq_part;
    if constexpr (kScalar) {
      freq_part = codec::decode_block_scalar(in, docs);
      DocId d = e.block_floor[b] - 1;
      for (unsigned i = 0; i < kBlockSize; ++i) docs[i] = d = d + docs[i] + 1;
      docs[kBlockSize - 1] = docs[codec::read_header(in[0]).count - 1];
    } else {
      freq_part = codec::decode_docids(in, e.block_floor[b], docs);
    }
    const unsigned n = codec::read_header(in[0]).count;
    sum += docs[0] + docs[n - 1];
    if constexpr (kFreqs) {
      if constexpr (kScalar) {
        codec::decode_block_scalar(freq_part, freqs);
        for (unsigned i = 0; i < n; ++i) freqs[i] += 1;
      } else {
        codec::decode_freqs(freq_part, freqs);
      }
      sum += freqs[0] + freqs[n - 1];
    }
  }
  return sum;
}

template <typename F>
double best_seconds(int repeat, F&& f, std::uint64_t& checksum) {
  double best = 1e30;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    checksum = f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_codec: block codec size and CPU decode speed on an index's lists"};
  std::string index_dir, out_path;
  std::uint32_t shard_id = 0;
  int repeat = 5;
  app.add_option("--index", index_dir, "index directory")->required();
  app.add_option("--shard", shard_id, "shard to read")->capture_default_str();
  app.add_option("--repeat", repeat, "timed repetitions (best is kept)")->capture_default_str();
  app.add_option("--out", out_path, "JSON output");
  CLI11_PARSE(app, argc, argv);
  try {
    const Index index = Index::open_shard(index_dir, shard_id);
    const ShardIndex& shard = index.shard(0);
    nlohmann::json results = nlohmann::json::array();
    fmt::print("{:<8} {:>12} {:>10} {:>10} {:>14} {:>14} {:>14} {:>8} {:>7}\n", "codec", "postings",
               "bits/doc", "bits/freq", "docid Mint/s", "both Mint/s", "scalar Mint/s", "speedup",
               "check");
    for (codec::Codec c : {codec::Codec::kPForDelta, codec::Codec::kBitPacking}) {
      const Encoded e = encode_all(shard, c);
      // Correctness: the fast decoder must agree with the scalar one on every block.
      std::uint64_t c_fast = 0, c_slow = 0, c_docs = 0;
      const double t_docs = best_seconds(repeat, [&] { return decode_all<false, false>(e); }, c_docs);
      const double t_both = best_seconds(repeat, [&] { return decode_all<false, true>(e); }, c_fast);
      const double t_scalar = best_seconds(std::max(1, repeat / 2), [&] { return decode_all<true, true>(e); }, c_slow);
      const bool ok = c_fast == c_slow;
      const double p = double(e.postings);
      std::uint64_t full = 0;
      for (std::size_t b = 0; b < e.block_offset.size(); ++b)
        full += codec::read_header(e.words[e.block_offset[b]]).count == kBlockSize;
      const double blocks_ints = double(e.block_offset.size()) * kBlockSize;  // decoded, incl. tail padding
      nlohmann::json r = {{"codec", std::string(codec::to_string(c))},
                          {"postings", e.postings},
                          {"blocks", e.block_offset.size()},
                          {"full_blocks", full},
                          {"bits_per_posting_docids", 32.0 * double(e.docid_words) / p},
                          {"bits_per_posting_freqs", 32.0 * double(e.freq_words) / p},
                          {"docid_decode_ints_per_second", p / t_docs},
                          {"decode_ints_per_second", 2 * p / t_both},
                          {"scalar_decode_ints_per_second", 2 * p / t_scalar},
                          {"speedup_over_scalar", t_scalar / t_both},
                          {"decoded_ints_including_block_padding", 2 * blocks_ints},
                          {"seconds_best", {{"docids", t_docs}, {"both", t_both}, {"scalar", t_scalar}}},
                          {"correct", ok}};
      results.push_back(r);
      fmt::print("{:<8} {:>12} {:>10.2f} {:>10.2f} {:>14.0f} {:>14.0f} {:>14.0f} {:>8.1f} {:>7}\n",
                 codec::to_string(c), e.postings, r["bits_per_posting_docids"].get<double>(),
                 r["bits_per_posting_freqs"].get<double>(), p / t_docs / 1e6, 2 * p / t_both / 1e6,
                 2 * p / t_scalar / 1e6, t_scalar / t_both, ok ? "ok" : "WRONG");
      if (!ok) return 3;
    }
    nlohmann::json out = {{"benchmark", "codec"},
                          {"index", index_dir},
                          {"shard", shard_id},
                          {"threads", 1},
                          {"repeat", repeat},
                          {"results", results}};
    if (!out_path.empty()) std::ofstream(out_path) << out.dump(2) << '\n';
  } catch (const std::exception& e) {
    std::cerr << "bench_codec: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
