#include "partition/shard_writer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>
#include <xxhash.h>

#include "common/block_codec.hpp"
#include "common/forward_index.hpp"
#include "common/progress.hpp"
#include "common/scoring.hpp"

namespace gpusearch {

namespace {

namespace fs = std::filesystem;

// Buffered file output that hashes what it writes.
class ChecksummedWriter {
 public:
  explicit ChecksummedWriter(const fs::path& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) throw Error("cannot create " + path.string());
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
    state_ = XXH3_createState();
    XXH3_64bits_reset(state_);
  }
  ~ChecksummedWriter() {
    if (file_) std::fclose(file_);
    if (state_) XXH3_freeState(state_);
  }
  ChecksummedWriter(const ChecksummedWriter&) = delete;
  ChecksummedWriter& operator=(const ChecksummedWriter&) = delete;

  void write(const void* data, std::size_t bytes) {
    if (bytes == 0) return;
    if (std::fwrite(data, 1, bytes, file_) != bytes) throw Error("write failed: " + path_.string());
    XXH3_64bits_update(state_, data, bytes);
    bytes_ += bytes;
  }
  template <typename T>
  void write_all(const std::vector<T>& v) {
    write(v.data(), v.size() * sizeof(T));
  }
  FileRecord close() {
    if (std::fclose(std::exchange(file_, nullptr)) != 0) throw Error("write failed: " + path_.string());
    return {bytes_, XXH3_64bits_digest(state_)};
  }

 private:
  fs::path path_;
  std::FILE* file_ = nullptr;
  XXH3_state_t* state_ = nullptr;
  std::uint64_t bytes_ = 0;
};

template <typename T>
FileRecord write_file(const fs::path& path, const std::vector<T>& v) {
  ChecksummedWriter w(path);
  w.write_all(v);
  return w.close();
}

// Upper bound for a float computation of an impact whose exact value is x: a few ulps above,
// so that block-max pruning with float scores stays exact.
float upper_float(double x) {
  float f = static_cast<float>(x);
  for (int i = 0; i < 4; ++i) f = std::nextafter(f, 2.0f);
  return f;
}

// One term's list in one shard, encoded.
struct EncodedList {
  std::vector<std::uint32_t> words;
  std::vector<DocId> block_last;
  std::vector<float> block_max;
  std::vector<std::uint32_t> block_words;
  std::uint32_t df = 0;
  float max_impact = 0;
  std::uint64_t docid_words = 0, freq_words = 0;
};

struct ShardOutput {
  fs::path dir;
  std::unique_ptr<ChecksummedWriter> postings;
  std::vector<DocId> block_last;
  std::vector<float> block_max;
  std::vector<std::uint64_t> block_offsets{0};
  std::vector<TermInfo> terms;
  std::vector<std::uint32_t> docs_by_local;  // input position of each local docID
  std::uint64_t num_postings = 0, words = 0, docid_words = 0, freq_words = 0;
};

}  // namespace

void prepare_output_directory(const fs::path& dir, bool force) {
  if (fs::exists(dir)) {
    if (!fs::is_directory(dir)) throw InputError(dir.string(), 0, "output exists and is not a directory");
    if (!fs::is_empty(dir)) {
      const bool is_index = fs::exists(dir / kRootManifestName);
      if (!force || !is_index)
        throw InputError(dir.string(), 0,
                         is_index ? "an index already exists here (use --force to replace it)"
                                  : "output directory is not empty and holds no index");
      for (const auto& e : fs::directory_iterator(dir)) {
        const auto name = e.path().filename().string();
        if (name == kRootManifestName || name.rfind("shard-", 0) == 0 ||
            name == "queries.train.tsv" || name == "queries.test.tsv")
          fs::remove_all(e.path());
      }
    }
  }
  fs::create_directories(dir);
}

nlohmann::json write_index(const fs::path& dir, const DocTable& docs, const PostingSource& source,
                           IndexParams params, const WriteOptions& options,
                           const nlohmann::json& build_info) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint32_t n = static_cast<std::uint32_t>(docs.size());
  const std::uint32_t S = options.num_shards;
  if (S == 0) throw InputError("--shards", 0, "must be at least 1");
  if (S > n) throw InputError("--shards", 0, fmt::format("{} shards for {} documents", S, n));
  params.codec = options.codec;
  params.num_shards = S;
  params.split = options.split;
  params.num_terms = source.num_terms();

  // Shard of every document, and its local docID: the GS order within the shard.
  std::vector<std::uint32_t> shard_of(n), local_of(n);
  std::vector<ShardOutput> shards(S);
  std::vector<std::uint32_t> by_rank(n);
  for (std::uint32_t p = 0; p < n; ++p) by_rank[docs.global_rank[p]] = p;
  auto range_begin = [&](std::uint32_t s) { return std::uint32_t(std::uint64_t(n) * s / S); };
  if (options.split == SplitMode::kRoundRobin) {
    for (std::uint32_t p = 0; p < n; ++p) shard_of[p] = p % S;
  } else {
    for (std::uint32_t s = 0; s < S; ++s) {
      for (std::uint32_t p = range_begin(s); p < range_begin(s + 1); ++p) {
        shard_of[options.split == SplitMode::kInputRanges ? p : by_rank[p]] = s;
      }
    }
  }
  for (std::uint32_t r = 0; r < n; ++r) {  // visiting by rank numbers each shard in GS order
    const std::uint32_t p = by_rank[r];
    ShardOutput& out = shards[shard_of[p]];
    local_of[p] = std::uint32_t(out.docs_by_local.size());
    out.docs_by_local.push_back(p);
  }
  by_rank = {};

  if (!options.directory_prepared) prepare_output_directory(dir, options.force);
  for (std::uint32_t s = 0; s < S; ++s) {
    shards[s].dir = dir / shard_dir_name(s);
    fs::create_directories(shards[s].dir);
    shards[s].postings = std::make_unique<ChecksummedWriter>(shards[s].dir / shard_files::kPostings);
    shards[s].terms.reserve(params.num_terms);
  }

  // Encode term lists in chunks: in parallel within a chunk, appended in term order.
  const std::uint32_t T = params.num_terms;
  std::uint64_t total_postings = 0;
  for (std::uint32_t t = 0; t < T; ++t) total_postings += source.df(t);
  Progress bar("write", total_postings, "postings", options.progress);
  struct Scratch {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> in;
    std::vector<std::vector<std::pair<DocId, std::uint32_t>>> per_shard;
    std::vector<DocId> docs;
    std::vector<std::uint32_t> freqs;
  };
  tbb::enumerable_thread_specific<Scratch> scratch;
  const double avgdl = params.collection.avg_doc_length;
  std::vector<EncodedList> chunk;
  for (std::uint32_t begin = 0; begin < T;) {
    std::uint32_t end = begin;
    for (std::uint64_t postings = 0; end < T && postings < (8u << 20) && end - begin < (1u << 18); ++end)
      postings += source.df(end);
    chunk.assign(std::size_t(end - begin) * S, EncodedList{});
    tbb::parallel_for(begin, end, [&](std::uint32_t t) {
      Scratch& sc = scratch.local();
      sc.per_shard.resize(S);
      for (auto& v : sc.per_shard) v.clear();
      source.postings(t, sc.in);
      for (const auto& [pos, tf] : sc.in) sc.per_shard[shard_of[pos]].emplace_back(local_of[pos], tf);
      for (std::uint32_t s = 0; s < S; ++s) {
        auto& list = sc.per_shard[s];
        std::sort(list.begin(), list.end());
        EncodedList& e = chunk[std::size_t(t - begin) * S + s];
        e.df = std::uint32_t(list.size());
        double list_max = 0;
        for (std::size_t i = 0; i < list.size(); i += kBlockSize) {
          const unsigned m = unsigned(std::min<std::size_t>(kBlockSize, list.size() - i));
          sc.docs.resize(m);
          sc.freqs.resize(m);
          double block_max = 0;
          for (unsigned j = 0; j < m; ++j) {
            sc.docs[j] = list[i + j].first;
            sc.freqs[j] = list[i + j].second;
            const std::uint32_t length = docs.length[shards[s].docs_by_local[sc.docs[j]]];
            block_max = std::max(block_max, impact(sc.freqs[j], length_norm(params.bm25, length, avgdl)));
          }
          const DocId floor = i == 0 ? 0 : e.block_last.back() + 1;
          const std::size_t before = e.words.size();
          codec::encode_posting_block(sc.docs.data(), sc.freqs.data(), m, floor, options.codec, e.words);
          const std::size_t docid_words = codec::block_words(e.words.data() + before);
          e.docid_words += docid_words;
          e.freq_words += e.words.size() - before - docid_words;
          e.block_words.push_back(std::uint32_t(e.words.size() - before));
          e.block_last.push_back(sc.docs[m - 1]);
          e.block_max.push_back(upper_float(block_max));
          list_max = std::max(list_max, block_max);
        }
        e.max_impact = list.empty() ? 0.0f : upper_float(list_max);
      }
    });
    for (std::uint32_t t = begin; t < end; ++t) {
      for (std::uint32_t s = 0; s < S; ++s) {
        EncodedList& e = chunk[std::size_t(t - begin) * S + s];
        ShardOutput& out = shards[s];
        out.terms.push_back({out.block_last.size(), std::uint32_t(e.block_last.size()), e.df,
                             source.df(t), e.max_impact});
        out.postings->write(e.words.data(), e.words.size() * 4);
        for (std::size_t b = 0; b < e.block_last.size(); ++b) {
          out.block_last.push_back(e.block_last[b]);
          out.block_max.push_back(e.block_max[b]);
          out.block_offsets.push_back(out.block_offsets.back() + e.block_words[b]);
        }
        out.words += e.words.size();
        out.num_postings += e.df;
        out.docid_words += e.docid_words;
        out.freq_words += e.freq_words;
        bar.add(e.df);
      }
    }
    begin = end;
  }
  bar.finish();
  chunk = {};

  // Vocabulary files are the same in every shard: build them once.
  std::vector<std::uint64_t> lexicon_offsets{0};
  std::vector<char> lexicon_strings;
  for (std::uint32_t t = 0; t < T; ++t) {
    const std::string_view s = source.term(t);
    lexicon_strings.insert(lexicon_strings.end(), s.begin(), s.end());
    lexicon_offsets.push_back(lexicon_strings.size());
  }

  RootManifest root;
  root.params = params;
  nlohmann::json shard_reports = nlohmann::json::array();
  std::uint64_t all_docid_words = 0, all_freq_words = 0, all_bytes = 0, forward_bytes = 0;
  for (std::uint32_t s = 0; s < S; ++s) {
    ShardOutput& out = shards[s];
    ShardManifest m;
    m.params = params;
    m.shard_id = s;
    m.num_docs = std::uint32_t(out.docs_by_local.size());
    m.num_postings = out.num_postings;
    m.num_blocks = out.block_last.size();
    m.postings_words = out.words;
    namespace sf = shard_files;
    m.files[sf::kPostings] = out.postings->close();
    out.postings.reset();
    m.files[sf::kTerms] = write_file(out.dir / sf::kTerms, out.terms);
    m.files[sf::kBlockLastDocid] = write_file(out.dir / sf::kBlockLastDocid, out.block_last);
    m.files[sf::kBlockMaxImpact] = write_file(out.dir / sf::kBlockMaxImpact, out.block_max);
    m.files[sf::kBlockOffsets] = write_file(out.dir / sf::kBlockOffsets, out.block_offsets);
    m.files[sf::kLexiconOffsets] = write_file(out.dir / sf::kLexiconOffsets, lexicon_offsets);
    m.files[sf::kLexiconStrings] = write_file(out.dir / sf::kLexiconStrings, lexicon_strings);
    std::vector<std::uint32_t> u32(m.num_docs);
    std::vector<float> f32(m.num_docs);
    auto column_u32 = [&](const char* name, auto get) {
      for (std::uint32_t d = 0; d < m.num_docs; ++d) u32[d] = get(out.docs_by_local[d]);
      m.files[name] = write_file(out.dir / name, u32);
    };
    auto column_f32 = [&](const char* name, const std::vector<float>& v) {
      for (std::uint32_t d = 0; d < m.num_docs; ++d) f32[d] = v[out.docs_by_local[d]];
      m.files[name] = write_file(out.dir / name, f32);
    };
    column_u32(sf::kDocLengths, [&](std::uint32_t p) { return docs.length[p]; });
    column_u32(sf::kDocGlobalRank, [&](std::uint32_t p) { return docs.global_rank[p]; });
    column_u32(sf::kDocInputPosition, [&](std::uint32_t p) { return p; });
    column_f32(sf::kDocPagerank, docs.pagerank);
    column_f32(sf::kDocGlobalScore, docs.global_score);
    {
      ChecksummedWriter strings(out.dir / sf::kDocIdStrings);
      std::vector<std::uint64_t> offsets{0};
      for (std::uint32_t d = 0; d < m.num_docs; ++d) {
        const std::string_view id = docs.external_ids.get(out.docs_by_local[d]);
        strings.write(id.data(), id.size());
        offsets.push_back(offsets.back() + id.size());
      }
      m.files[sf::kDocIdStrings] = strings.close();
      m.files[sf::kDocIdOffsets] = write_file(out.dir / sf::kDocIdOffsets, offsets);
    }
    std::optional<ForwardIndexRecord> forward;  // its own section of shard.json
    if (options.token_streams) {
      ChecksummedWriter data(out.dir / forward_files::kData);
      std::vector<std::uint64_t> offsets{0};
      std::vector<TermId> tokens;
      std::vector<std::uint8_t> bytes;
      ForwardIndexRecord& rec = forward.emplace();
      for (std::uint32_t d = 0; d < m.num_docs; ++d) {
        const std::uint32_t p = out.docs_by_local[d];
        options.token_streams->tokens(p, tokens);
        if (tokens.size() != docs.length[p])  // the reader checks the same; fail at the source
          throw Error(fmt::format("forward index: document {} has {} tokens in its stream but "
                                  "length {}", docs.external_ids.get(p), tokens.size(),
                                  docs.length[p]));
        bytes.clear();
        for (const TermId t : tokens) vbyte::append(t, bytes);
        data.write(bytes.data(), bytes.size());
        offsets.push_back(offsets.back() + bytes.size());
        rec.num_tokens += tokens.size();
      }
      rec.data = data.close();
      rec.offsets = write_file(out.dir / forward_files::kOffsets, offsets);
      forward_bytes += rec.data.bytes + rec.offsets.bytes;
    }
    const auto manifest_path = out.dir / kShardManifestName;
    {
      std::ofstream mf(manifest_path);
      nlohmann::json j = to_json(m);
      if (forward) j[kForwardIndexSection] = to_json(*forward);
      mf << j.dump(2) << '\n';
      if (!mf) throw Error("cannot write " + manifest_path.string());
    }
    std::uint64_t shard_bytes = 0;
    for (const auto& [name, rec] : m.files) shard_bytes += rec.bytes;
    if (forward) shard_bytes += forward->data.bytes + forward->offsets.bytes;
    root.shards.push_back({shard_dir_name(s), m.num_docs, m.num_postings,
                           {fs::file_size(manifest_path), xxh3_of_file(manifest_path)}});
    shard_reports.push_back({{"dir", shard_dir_name(s)},
                             {"docs", m.num_docs},
                             {"postings", m.num_postings},
                             {"blocks", m.num_blocks},
                             {"postings_bytes", out.words * 4},
                             {"bytes", shard_bytes}});
    all_docid_words += out.docid_words;
    all_freq_words += out.freq_words;
    all_bytes += shard_bytes;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double postings = double(std::max<std::uint64_t>(total_postings, 1));
  nlohmann::json report = {
      {"shards", shard_reports},
      {"postings", total_postings},
      {"terms", T},
      {"docs", n},
      {"index_bytes", all_bytes},
      {"forward_index_bytes", forward_bytes},
      {"postings_bytes", (all_docid_words + all_freq_words) * 4},
      {"bits_per_posting_docids", 32.0 * double(all_docid_words) / postings},
      {"bits_per_posting_freqs", 32.0 * double(all_freq_words) / postings},
      {"write_seconds", seconds}};
  nlohmann::json info = build_info;
  info["write"] = report;
  write_root_manifest(dir / kRootManifestName, root, info);  // last: an index without it is invalid
  return report;
}

}  // namespace gpusearch
