// The bodies of the libFuzzer targets (tests/fuzz/fuzz_*.cpp), shared with the unit tests'
// FuzzRegressions.* (tests/unit/fuzz_regressions_test.cpp), which run every seed and every
// saved crash input through them in the ordinary build. A finding is a crash, a sanitizer
// report, an exception other than the reader's own error, or std::abort() where an invariant
// fails.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cache_plan.hpp"
#include "common/error.hpp"
#include "common/query.hpp"
#include "common/shard_index.hpp"
#include "common/wire/wire.hpp"
#include "partition/cache_planner.hpp"
#include "partition/corpus_reader.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"

namespace gpusearch::fuzz {

// A directory of this process's, removed at exit (the path is never destroyed: the exit
// handler runs after static destructors would have).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path* dir = [] {
    auto* d = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                        ("gpusearch-fuzz-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return *dir;
}

// Query files (TSV and TREC topics), single live lines, query-id checks: every accepted id must
// pass query_id_problem (so that it can go into a TREC run line).
inline int query_parser(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::istringstream in(input);
  const QueryFile f = read_query_stream(in, "fuzz");
  for (const QueryText& q : f.queries)
    if (!query_id_problem(q.id).empty()) std::abort();  // an id no run file may hold
  for (const QueryProblem& p : f.problems) (void)p.message();
  QueryText q;
  QueryProblem p;
  if (parse_tsv_query_line(input, 1, q, p, "fuzz") && !query_id_problem(q.id).empty()) std::abort();
  (void)escape_query_id(input);
  return 0;
}

// The corpus readers (JSONL, TREC, gzip-compressed either way). The first byte picks the format
// and whether the file is gzipped; the rest is the file. Malformed documents raise InputError
// (or are skipped with skip_bad).
inline int corpus_reader(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t how = data[0];
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool gz = how & 1;
  const CorpusFormat format = (how >> 1) % 3 == 0   ? CorpusFormat::kAuto
                              : (how >> 1) % 3 == 1 ? CorpusFormat::kJsonl
                                                    : CorpusFormat::kTrec;
  const auto file = scratch_dir() / (gz ? "corpus.jsonl.gz" : ((how >> 3) & 1) ? "corpus.trec"
                                                                                : "corpus.jsonl");
  if (gz) {
    gzFile g = gzopen(file.c_str(), "wb");
    gzwrite(g, body.data(), unsigned(body.size()));
    gzclose(g);
  } else {
    std::ofstream(file, std::ios::binary) << body;
  }
  for (bool skip_bad : {true, false}) {
    try {
      CorpusReader reader({file}, {format, skip_bad});
      RawDocument doc;
      while (reader.next(doc)) {
      }
    } catch (const Error&) {
    }
  }
  return 0;
}

// Every wire message type decoded from arbitrary bytes (copied into 8-byte words as the
// transport delivers them): WireError for anything malformed.
inline int wire_decoder(const std::uint8_t* data, std::size_t size) {
  using namespace wire;
  WireBytes words((size + 7) / 8, 0);
  if (size) std::memcpy(words.data(), data, size);
  const auto bytes = as_bytes(words).first(size);
  try { (void)decode_query_batch(bytes); } catch (const WireError&) {}
  try { (void)decode_result_batch(bytes); } catch (const WireError&) {}
  try { (void)decode_result_header(bytes); } catch (const WireError&) {}
  try { (void)decode_control(bytes); } catch (const WireError&) {}
  return 0;
}

// Valid messages of every type, for the wire decoder's seed corpus.
inline std::vector<wire::WireBytes> wire_examples() {
  using namespace wire;
  QueryBatch qb;
  qb.batch_id = 7;
  qb.params.k = 10;
  qb.queries.push_back({"q1", {"alpha", "beta"}, {}});
  qb.queries.push_back({"q2", {}, {3, 1, 4}});
  ResultBatch rb;
  rb.batch_id = 7;
  rb.isn_rank = 1;
  ShardAnswer a;
  a.result.hits.push_back({2.5, 5, 0, 5});
  a.hit_ids.push_back("doc5");
  rb.answers.push_back(a);
  rb.answers.push_back({});
  return {encode(qb), encode(rb), encode(Control{Control::Kind::kHello, "{\"shard\": 0}"}),
          encode(Control{Control::Kind::kClockPong, "", 12345})};
}

// Opening an index and a cache plan whose files were damaged: built once (2 small shards and a
// plan); each input names a file (first byte), a damage (second byte: replace with the rest,
// truncate, overwrite at an offset) and the bytes. Index::open (with and without checksums) and
// CachePlan::read must refuse with gpusearch's Error naming the file.
struct IndexFixture {
  std::filesystem::path dir;
  std::vector<std::filesystem::path> files;
  std::vector<std::string> original;
};

inline IndexFixture& index_fixture() {
  static IndexFixture f = [] {
    namespace fs = std::filesystem;
    IndexFixture x;
    x.dir = scratch_dir() / "index-fixture";
    fs::remove_all(x.dir);
    SyntheticParams sp;
    sp.num_docs = 300;
    sp.seed = 3;
    sp.mean_doc_length = 40;
    sp.train_queries = 50;
    sp.test_queries = 10;
    BuildOptions bo;
    bo.out_dir = x.dir / "idx";
    bo.num_shards = 2;
    bo.progress = false;
    build_index_synthetic(sp, bo);
    CachePlanOptions po;
    po.budget_bytes = 1 << 16;
    po.progress = false;
    make_cache_plan(Index::open(bo.out_dir), bo.out_dir / "queries.train.tsv", po)
        .write(x.dir / "plan.json");
    for (const auto& e : fs::recursive_directory_iterator(x.dir))
      if (e.is_regular_file() && e.path().extension() != ".tsv") x.files.push_back(e.path());
    std::sort(x.files.begin(), x.files.end());
    for (const auto& p : x.files) {
      std::ifstream in(p, std::ios::binary);
      x.original.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return x;
  }();
  return f;
}

inline int index_open(const std::uint8_t* data, std::size_t size) {
  IndexFixture& fx = index_fixture();
  if (size < 2 || fx.files.empty()) return 0;
  const std::size_t which = data[0] % fx.files.size();
  std::string content = fx.original[which];
  const std::string rest(reinterpret_cast<const char*>(data + 2), size - 2);
  switch (data[1] % 3) {
    case 0: content = rest; break;
    case 1: {  // truncate
      std::size_t n = 0;
      for (std::size_t i = 0; i < std::min<std::size_t>(rest.size(), 4); ++i)
        n = n * 256 + std::uint8_t(rest[i]);
      content.resize(content.empty() ? 0 : n % content.size());
      break;
    }
    default: {  // overwrite at an offset
      std::size_t off = rest.empty() ? 0 : std::size_t(std::uint8_t(rest[0])) * 97;
      if (!content.empty()) off %= content.size();
      for (std::size_t i = 1; i < rest.size() && off + i - 1 < content.size(); ++i)
        content[off + i - 1] = rest[i];
    }
  }
  std::ofstream(fx.files[which], std::ios::binary | std::ios::trunc) << content;
  for (bool verify : {false, true}) {
    try {
      OpenOptions oo;
      oo.verify_checksums = verify;
      const Index index = Index::open(fx.dir / "idx", oo);
      (void)CachePlan::read(fx.dir / "plan.json", &index);
    } catch (const Error&) {
    }
  }
  std::ofstream(fx.files[which], std::ios::binary | std::ios::trunc) << fx.original[which];
  return 0;
}

}  // namespace gpusearch::fuzz
