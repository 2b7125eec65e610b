#include "partition/repartition.hpp"

#include <chrono>
#include <optional>

#include "common/error.hpp"
#include "common/forward_index.hpp"
#include "common/progress.hpp"
#include "common/shard_index.hpp"
#include "partition/shard_writer.hpp"

namespace gpusearch {

namespace {

class IndexSource final : public PostingSource {
 public:
  explicit IndexSource(const Index& index) : index_(index) {}
  std::uint32_t num_terms() const override { return index_.shard(0).num_terms(); }
  std::string_view term(std::uint32_t t) const override { return index_.shard(0).term_string(t); }
  std::uint32_t df(std::uint32_t t) const override { return index_.shard(0).term(t).df_global; }
  void postings(std::uint32_t t, std::vector<std::pair<std::uint32_t, std::uint32_t>>& out) const override {
    out.clear();
    thread_local std::vector<DocId> docs;
    thread_local std::vector<std::uint32_t> freqs;
    for (std::size_t s = 0; s < index_.num_open_shards(); ++s) {
      const ShardIndex& shard = index_.shard(s);
      shard.decode_list(t, docs, freqs);
      const auto input = shard.input_positions();
      for (std::size_t i = 0; i < docs.size(); ++i) out.emplace_back(input[docs[i]], freqs[i]);
    }
  }

 private:
  const Index& index_;
};

// The input's forward index, by input position: each document's stream as its shard stored it
// (term IDs of the global vocabulary, which re-sharding keeps).
class ForwardSource final : public TokenStreamSource {
 public:
  ForwardSource(const Index& index, const std::vector<std::pair<std::uint32_t, DocId>>& where)
      : where_(where) {
    for (std::size_t s = 0; s < index.num_open_shards(); ++s)
      forward_.push_back(ForwardIndex::open(index.shard(s)));
  }
  void tokens(std::uint32_t input_position, std::vector<TermId>& out) const override {
    const auto [shard, doc] = where_[input_position];
    forward_[shard].tokens(doc, out);
  }

 private:
  const std::vector<std::pair<std::uint32_t, DocId>>& where_;
  std::vector<ForwardIndex> forward_;
};

}  // namespace

nlohmann::json repartition_index(const std::filesystem::path& in_dir,
                                 const std::filesystem::path& out_dir, std::uint32_t num_shards,
                                 SplitMode split, std::optional<codec::Codec> codec, bool progress,
                                 bool force) {
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  if (std::filesystem::exists(out_dir) && std::filesystem::equivalent(in_dir, out_dir, ec))
    throw InputError(out_dir.string(), 0, "output must differ from the input index");
  const Index index = Index::open(in_dir);
  const std::uint64_t n = index.params().collection.num_docs;
  // Documents back in input order.
  std::vector<std::pair<std::uint32_t, DocId>> where(n, {UINT32_MAX, 0});
  for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
    const auto input = index.shard(s).input_positions();
    for (DocId d = 0; d < index.shard(s).num_docs(); ++d) {
      if (input[d] >= n || where[input[d]].first != UINT32_MAX)
        throw IndexFormatError((index.shard(s).dir() / shard_files::kDocInputPosition).string(),
                               "input positions are not a permutation");
      where[input[d]] = {std::uint32_t(s), d};
    }
  }
  DocTable docs;
  docs.length.resize(n);
  docs.pagerank.resize(n);
  docs.global_score.resize(n);
  docs.global_rank.resize(n);
  for (std::uint64_t p = 0; p < n; ++p) {
    if (where[p].first == UINT32_MAX)
      throw IndexFormatError((in_dir / kRootManifestName).string(), "documents are missing");
    const ShardIndex& shard = index.shard(where[p].first);
    const DocId d = where[p].second;
    docs.length[p] = shard.doc_lengths()[d];
    docs.pagerank[p] = shard.pagerank()[d];
    docs.global_score[p] = shard.global_scores()[d];
    docs.global_rank[p] = shard.global_ranks()[d];
    docs.external_ids.add(shard.external_id(d));
  }
  WriteOptions wo;
  wo.num_shards = num_shards;
  wo.split = split;
  wo.codec = codec.value_or(index.params().codec);
  wo.progress = progress;
  wo.force = force;
  IndexSource source(index);
  // The forward index goes along when every input shard has one.
  std::size_t with_forward = 0;
  for (std::size_t s = 0; s < index.num_open_shards(); ++s)
    with_forward += read_forward_index_record(index.shard(s).dir() / kShardManifestName).has_value();
  if (with_forward != 0 && with_forward != index.num_open_shards())
    throw IndexFormatError((in_dir / kRootManifestName).string(),
                           fmt::format("{} of {} shards have a forward index: re-build the index",
                                       with_forward, index.num_open_shards()));
  std::optional<ForwardSource> streams;
  if (with_forward > 0) {
    streams.emplace(index, where);
    wo.token_streams = &*streams;
  }
  nlohmann::json info;
  info["source"] = {{"repartitioned_from", in_dir.string()}};
  nlohmann::json report = write_index(out_dir, docs, source, index.params(), wo, info);
  report["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report["peak_rss_bytes"] = peak_rss_bytes();
  return report;
}

}  // namespace gpusearch
