#include "partition/index_builder.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/parallel_sort.h>
#include <tbb/task_arena.h>

#include "common/progress.hpp"
#include "common/scoring.hpp"
#include "common/forward_index.hpp"
#include "common/tokenizer.hpp"
#include "partition/pagerank.hpp"
#include "partition/posting_accumulator.hpp"
#include "partition/shard_writer.hpp"
#include "partition/string_table.hpp"

namespace gpusearch {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Term string -> collection term id, shared by the tokenizing threads. Striped locks; each
// thread also keeps a private cache in front of it (see tokenize_batch).
class TermDictionary {
 public:
  TermId get_or_add(std::string_view term) {
    Stripe& s = stripes_[std::hash<std::string_view>{}(term) % kStripes];
    std::lock_guard lock(s.mutex);
    if (auto it = s.map.find(term); it != s.map.end()) return it->second;
    const TermId id = next_.fetch_add(1, std::memory_order_relaxed);
    s.map.emplace(std::string(term), id);
    return id;
  }
  std::uint32_t size() const { return next_.load(); }
  std::vector<std::string> strings_by_id() {
    std::vector<std::string> out(size());
    for (auto& s : stripes_)
      for (auto& [str, id] : s.map) out[id] = str;
    return out;
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Stripe {
    std::mutex mutex;
    std::unordered_map<std::string, TermId, Hash, std::equal_to<>> map;
  };
  static constexpr std::size_t kStripes = 256;
  Stripe stripes_[kStripes];
  std::atomic<TermId> next_{0};
};

// One document after counting: its distinct terms with frequencies.
struct CountedDoc {
  std::string id;
  std::string source;
  std::vector<std::pair<TermId, std::uint32_t>> terms;  // sorted by term
  std::vector<TermId> stream;  // the tokens in order (only when building a forward index)
  std::uint32_t length = 0;
  std::vector<std::string> link_ids;        // text corpora
  std::vector<std::uint64_t> link_targets;  // synthetic: input positions
};

struct Posting {
  TermId term;
  std::uint32_t doc_in_batch;
  std::uint32_t tf;
};

struct Batch {
  std::vector<RawDocument> raw;
  std::uint64_t synthetic_begin = 0, synthetic_end = 0;
  std::vector<CountedDoc> docs;
  std::vector<std::vector<Posting>> by_partition;
};

void count_terms(std::vector<TermId>& ids, CountedDoc& doc) {
  doc.length = std::uint32_t(ids.size());
  std::sort(ids.begin(), ids.end());
  doc.terms.clear();
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j < ids.size() && ids[j] == ids[i]) ++j;
    doc.terms.emplace_back(ids[i], std::uint32_t(j - i));
    i = j;
  }
}

void split_by_partition(Batch& b, unsigned partitions) {
  b.by_partition.assign(partitions, {});
  for (std::uint32_t d = 0; d < b.docs.size(); ++d)
    for (const auto& [t, tf] : b.docs[d].terms) b.by_partition[t % partitions].push_back({t, d, tf});
}

// Everything step 1 collects, keyed by input position.
struct Collected {
  explicit Collected(unsigned partitions) : postings(partitions) {}
  PostingAccumulator postings;
  std::vector<std::uint32_t> length, max_tf;
  StringTable ids;
  std::uint64_t total_tokens = 0;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;  // resolved (src, dst)
  StringTable link_targets;                                    // text: unresolved targets
  std::vector<std::uint32_t> link_sources;
  std::vector<std::string> term_strings;  // by collection term id
  std::uint64_t skipped = 0;
  std::vector<std::string> skipped_messages;
  std::uint64_t dropped_links = 0;
  // Forward index (when asked for): streams by input position, collection term IDs, vbyte.
  bool forward = false;
  std::vector<std::uint8_t> forward_bytes;
  std::vector<std::uint64_t> forward_offsets{0};
};

// Appends a counted batch: positions, statistics, links, postings (partitions in parallel).
class Appender {
 public:
  Appender(Collected& c, bool detect_duplicates, bool skip_bad)
      : c_(c), detect_duplicates_(detect_duplicates), skip_bad_(skip_bad),
        ids_seen_(0, IdHash{&c.ids}, IdEq{&c.ids}) {}

  void append(Batch& b, std::uint32_t num_terms) {
    std::vector<std::uint32_t> position(b.docs.size());
    for (std::size_t d = 0; d < b.docs.size(); ++d) {
      CountedDoc& doc = b.docs[d];
      if (c_.length.size() >= 0xfffffff0u) throw Error("more than 2^32 - 16 documents");
      const std::uint32_t pos = std::uint32_t(c_.length.size());
      c_.ids.add(doc.id);
      if (detect_duplicates_ && !ids_seen_.insert(pos).second) {
        c_.ids.pop_back();
        const std::string what = "duplicate document id '" + doc.id + "'";
        if (!skip_bad_) throw InputError(doc.source, 0, what + " (use --skip-bad to skip)");
        ++c_.skipped;
        if (c_.skipped_messages.size() < 100) c_.skipped_messages.push_back(doc.source + ": " + what);
        position[d] = UINT32_MAX;
        continue;
      }
      position[d] = pos;
      c_.length.push_back(doc.length);
      std::uint32_t max_tf = 0;
      for (const auto& [t, tf] : doc.terms) max_tf = std::max(max_tf, tf);
      c_.max_tf.push_back(max_tf);
      c_.total_tokens += doc.length;
      if (c_.forward) {
        for (const TermId t : doc.stream) vbyte::append(t, c_.forward_bytes);
        c_.forward_offsets.push_back(c_.forward_bytes.size());
        doc.stream = {};
      }
      for (auto target : doc.link_targets) c_.edges.emplace_back(pos, std::uint32_t(target));
      for (const auto& id : doc.link_ids) {
        c_.link_targets.add(id);
        c_.link_sources.push_back(pos);
      }
    }
    c_.postings.reserve_terms(num_terms);
    tbb::parallel_for(0u, c_.postings.partitions(), [&](unsigned p) {
      for (const Posting& x : b.by_partition[p])
        if (position[x.doc_in_batch] != UINT32_MAX)
          c_.postings.append(p, x.term, position[x.doc_in_batch], x.tf);
    });
  }

 private:
  struct IdHash {
    const StringTable* t;
    std::size_t operator()(std::uint32_t i) const { return std::hash<std::string_view>{}(t->get(i)); }
  };
  struct IdEq {
    const StringTable* t;
    bool operator()(std::uint32_t a, std::uint32_t b) const { return t->get(a) == t->get(b); }
  };
  Collected& c_;
  bool detect_duplicates_, skip_bad_;
  std::unordered_set<std::uint32_t, IdHash, IdEq> ids_seen_;
};

unsigned pipeline_tokens() { return std::max(2, 2 * tbb::this_task_arena::max_concurrency()); }
unsigned partitions_for_threads() { return unsigned(std::max(8, 4 * tbb::this_task_arena::max_concurrency())); }

// Step 2 and 3: statistics, PageRank, GS order, then the shard writer.
class AccumulatorSource final : public PostingSource {
 public:
  AccumulatorSource(const Collected& c, std::vector<TermId> order)
      : c_(c), order_(std::move(order)) {}
  std::uint32_t num_terms() const override { return std::uint32_t(order_.size()); }
  std::string_view term(std::uint32_t t) const override { return c_.term_strings[order_[t]]; }
  std::uint32_t df(std::uint32_t t) const override { return c_.postings.df(order_[t]); }
  void postings(std::uint32_t t, std::vector<std::pair<std::uint32_t, std::uint32_t>>& out) const override {
    c_.postings.read(order_[t], out);
  }

 private:
  const Collected& c_;
  std::vector<TermId> order_;
};

// The collected streams, renumbered into the final vocabulary as the shard writer asks.
class AccumulatedStreams final : public TokenStreamSource {
 public:
  AccumulatedStreams(const Collected& c, std::vector<TermId> final_id)
      : c_(c), final_id_(std::move(final_id)) {}
  void tokens(std::uint32_t pos, std::vector<TermId>& out) const override {
    out.clear();
    const std::uint8_t* p = c_.forward_bytes.data() + c_.forward_offsets[pos];
    const std::uint8_t* const end = c_.forward_bytes.data() + c_.forward_offsets[pos + 1];
    for (std::uint32_t t = 0; p < end;) {
      if (!vbyte::next(p, end, t)) throw Error("forward index: corrupt stream in memory");
      out.push_back(final_id_[t]);
    }
  }

 private:
  const Collected& c_;
  std::vector<TermId> final_id_;  // collection term id -> position in the sorted vocabulary
};

nlohmann::json finish(Collected& c, const BuildOptions& options, nlohmann::json info,
                      Clock::time_point start) {
  const std::uint32_t n = std::uint32_t(c.length.size());
  if (n == 0) throw InputError("corpus", 0, "no documents to index");
  info["accumulate_seconds"] = seconds_since(start);
  info["accumulator_bytes"] = c.postings.bytes_allocated();
  const auto t_stats = Clock::now();

  // Vocabulary: the terms that occur, sorted.
  std::vector<TermId> order;
  for (TermId t = 0; t < c.postings.num_terms(); ++t)
    if (c.postings.df(t) > 0) order.push_back(t);
  tbb::parallel_sort(order.begin(), order.end(),
                     [&](TermId a, TermId b) { return c.term_strings[a] < c.term_strings[b]; });

  // Links of text corpora: resolve target ids to positions.
  if (!c.link_sources.empty()) {
    std::unordered_map<std::string_view, std::uint32_t> by_id;
    by_id.reserve(n);
    for (std::uint32_t p = 0; p < n; ++p) by_id.emplace(c.ids.get(p), p);
    for (std::size_t i = 0; i < c.link_sources.size(); ++i) {
      auto it = by_id.find(c.link_targets.get(i));
      if (it == by_id.end()) ++c.dropped_links;
      else c.edges.emplace_back(c.link_sources[i], it->second);
    }
    c.link_targets = StringTable{};
    c.link_sources = {};
  }

  IndexParams params;
  params.bm25 = options.bm25;
  params.gs_alpha = options.gs_alpha;
  params.pagerank_damping = options.pagerank_damping;
  params.collection.num_docs = n;
  params.collection.total_tokens = c.total_tokens;
  params.collection.avg_doc_length = c.total_tokens > 0 ? double(c.total_tokens) / n : 1.0;
  for (TermId t : order) params.num_postings_total += c.postings.df(t);

  const auto t_pagerank = Clock::now();
  const std::uint64_t edges = c.edges.size();
  params.has_links = edges > 0;
  PageRankResult pr = compute_pagerank(n, c.edges, options.pagerank_damping,
                                       options.pagerank_max_iterations);
  c.edges = {};
  params.pagerank_iterations = pr.iterations;
  const double pagerank_seconds = seconds_since(t_pagerank);

  // GS(d) = alpha * PR'(d) + (1 - alpha) * max_t impact(d, t); the impact grows with tf, so the
  // maximum is at the document's largest tf.
  DocTable docs;
  docs.length = std::move(c.length);
  docs.external_ids = std::move(c.ids);
  docs.pagerank.resize(n);
  docs.global_score.resize(n);
  docs.global_rank.resize(n);
  const double max_pr = *std::max_element(pr.rank.begin(), pr.rank.end());
  std::vector<double> gs(n);
  tbb::parallel_for(0u, n, [&](std::uint32_t p) {
    const double pr_norm = pr.rank[p] / max_pr;
    const double max_impact =
        c.max_tf[p] ? impact(c.max_tf[p], length_norm(params.bm25, docs.length[p],
                                                      params.collection.avg_doc_length))
                    : 0.0;
    gs[p] = global_score(options.gs_alpha, pr_norm, max_impact);
    docs.pagerank[p] = float(pr_norm);
    docs.global_score[p] = float(gs[p]);
  });
  std::vector<std::uint32_t> by_rank(n);
  for (std::uint32_t p = 0; p < n; ++p) by_rank[p] = p;
  tbb::parallel_sort(by_rank.begin(), by_rank.end(), [&](std::uint32_t a, std::uint32_t b) {
    return gs[a] != gs[b] ? gs[a] > gs[b] : a < b;
  });
  for (std::uint32_t r = 0; r < n; ++r) docs.global_rank[by_rank[r]] = r;
  info["stats_seconds"] = seconds_since(t_stats) - pagerank_seconds;
  info["pagerank"] = {{"edges", edges},
                      {"dropped_links", c.dropped_links},
                      {"iterations", pr.iterations},
                      {"final_delta", pr.final_delta},
                      {"seconds", pagerank_seconds}};
  info["skipped_documents"] = c.skipped;
  info["skipped_messages"] = c.skipped_messages;

  WriteOptions wo;
  wo.num_shards = options.num_shards;
  wo.split = options.split;
  wo.codec = options.codec;
  wo.progress = options.progress;
  wo.directory_prepared = true;  // prepare_output_directory ran at the start
  std::unique_ptr<AccumulatedStreams> streams;
  if (c.forward) {
    std::vector<TermId> final_id(c.term_strings.size(), UINT32_MAX);
    for (std::uint32_t i = 0; i < order.size(); ++i) final_id[order[i]] = i;
    streams = std::make_unique<AccumulatedStreams>(c, std::move(final_id));
    wo.token_streams = streams.get();
  }
  AccumulatorSource source(c, std::move(order));
  const nlohmann::json write = write_index(options.out_dir, docs, source, params, wo, info);
  nlohmann::json report = info;
  report["write"] = write;
  report["forward_index"] = c.forward;
  const double total = seconds_since(start);
  report["seconds"] = total;
  report["docs"] = n;
  report["terms"] = source.num_terms();
  report["postings"] = params.num_postings_total;
  report["docs_per_second"] = n / total;
  report["postings_per_second"] = double(params.num_postings_total) / total;
  report["peak_rss_bytes"] = peak_rss_bytes();
  report["threads"] = tbb::this_task_arena::max_concurrency();
  return report;
}

}  // namespace

nlohmann::json build_index_from_corpus(const std::vector<std::filesystem::path>& files,
                                       const CorpusReadOptions& read_options,
                                       const BuildOptions& options) {
  const auto start = Clock::now();
  prepare_output_directory(options.out_dir, options.force);
  CorpusReader reader(files, read_options);
  const unsigned partitions = partitions_for_threads();
  Collected c(partitions);
  c.forward = options.forward_index;
  TermDictionary dictionary;
  Appender appender(c, /*detect_duplicates=*/true, read_options.skip_bad);
  Progress bar("index", reader.total_bytes(), "bytes", options.progress);
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Cache {
    std::unordered_map<std::string, TermId, Hash, std::equal_to<>> map;
  };
  tbb::enumerable_thread_specific<Cache> caches;
  constexpr std::size_t kBatchDocs = 1024, kBatchBytes = 8 << 20;

  tbb::parallel_pipeline(
      pipeline_tokens(),
      tbb::make_filter<void, std::shared_ptr<Batch>>(
          tbb::filter_mode::serial_in_order,
          [&](tbb::flow_control& fc) -> std::shared_ptr<Batch> {
            auto b = std::make_shared<Batch>();
            std::size_t bytes = 0;
            RawDocument doc;
            while (b->raw.size() < kBatchDocs && bytes < kBatchBytes && reader.next(doc)) {
              bytes += doc.text.size();
              b->raw.push_back(std::move(doc));
            }
            bar.set(reader.bytes_read());
            if (b->raw.empty()) {
              fc.stop();
              return nullptr;
            }
            return b;
          }) &
          tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(
              tbb::filter_mode::parallel,
              [&](std::shared_ptr<Batch> b) {
                b->docs.resize(b->raw.size());
                Cache& cache = caches.local();
                std::vector<TermId> ids;
                for (std::size_t d = 0; d < b->raw.size(); ++d) {
                  RawDocument& raw = b->raw[d];
                  CountedDoc& doc = b->docs[d];
                  ids.clear();
                  for_each_token(raw.text, [&](std::string_view tok) {
                    auto it = cache.map.find(tok);
                    if (it != cache.map.end()) {
                      ids.push_back(it->second);
                      return;
                    }
                    const TermId id = dictionary.get_or_add(tok);
                    if (cache.map.size() > (1u << 20)) cache.map.clear();
                    cache.map.emplace(tok, id);
                    ids.push_back(id);
                  });
                  if (options.forward_index) doc.stream = ids;  // before count_terms sorts
                  count_terms(ids, doc);
                  doc.id = std::move(raw.id);
                  doc.source = std::move(raw.source);
                  doc.link_ids = std::move(raw.links);
                }
                b->raw.clear();
                split_by_partition(*b, partitions);
                return b;
              }) &
          tbb::make_filter<std::shared_ptr<Batch>, void>(
              tbb::filter_mode::serial_in_order,
              [&](std::shared_ptr<Batch> b) { appender.append(*b, dictionary.size()); }));
  bar.finish();
  c.term_strings = dictionary.strings_by_id();
  c.skipped += reader.skipped();
  c.skipped_messages.insert(c.skipped_messages.begin(), reader.skipped_messages().begin(),
                            reader.skipped_messages().end());
  nlohmann::json info;
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.string());
  info["source"] = {{"corpus", names}};
  info["input_bytes"] = reader.total_bytes();
  return finish(c, options, info, start);
}

nlohmann::json build_index_synthetic(const SyntheticParams& params, const BuildOptions& options) {
  const auto start = Clock::now();
  prepare_output_directory(options.out_dir, options.force);
  const SyntheticCollection collection(params);
  const unsigned partitions = partitions_for_threads();
  Collected c(partitions);
  c.forward = options.forward_index;
  Appender appender(c, /*detect_duplicates=*/false, false);
  Progress bar("index (synthetic)", params.num_docs, "docs", options.progress);
  constexpr std::uint64_t kBatchDocs = 1024;
  std::uint64_t next = 0;
  tbb::parallel_pipeline(
      pipeline_tokens(),
      tbb::make_filter<void, std::shared_ptr<Batch>>(
          tbb::filter_mode::serial_in_order,
          [&](tbb::flow_control& fc) -> std::shared_ptr<Batch> {
            if (next >= params.num_docs) {
              fc.stop();
              return nullptr;
            }
            auto b = std::make_shared<Batch>();
            b->synthetic_begin = next;
            b->synthetic_end = next = std::min(params.num_docs, next + kBatchDocs);
            return b;
          }) &
          tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(
              tbb::filter_mode::parallel,
              [&](std::shared_ptr<Batch> b) {
                b->docs.resize(b->synthetic_end - b->synthetic_begin);
                SyntheticDocument d;
                for (std::uint64_t i = b->synthetic_begin; i < b->synthetic_end; ++i) {
                  collection.document(i, d);
                  CountedDoc& doc = b->docs[i - b->synthetic_begin];
                  if (options.forward_index) doc.stream = d.tokens;  // before count_terms sorts
                  count_terms(d.tokens, doc);
                  doc.id = SyntheticCollection::doc_id(i);
                  doc.link_targets = d.links;
                }
                split_by_partition(*b, partitions);
                return b;
              }) &
          tbb::make_filter<std::shared_ptr<Batch>, void>(
              tbb::filter_mode::serial_in_order, [&](std::shared_ptr<Batch> b) {
                appender.append(*b, collection.vocabulary_size());
                bar.add(b->docs.size());
              }));
  bar.finish();
  // Only the terms that occur need strings; the rest are never looked up.
  c.term_strings.resize(collection.vocabulary_size());
  tbb::parallel_for(0u, collection.vocabulary_size(), [&](std::uint32_t t) {
    if (c.postings.df(t) > 0) c.term_strings[t] = SyntheticCollection::term_string(t);
  });
  nlohmann::json info;
  info["source"] = {{"synthetic", params.to_json()}};
  nlohmann::json report = finish(c, options, info, start);
  collection.write_queries(options.out_dir);
  return report;
}

}  // namespace gpusearch
