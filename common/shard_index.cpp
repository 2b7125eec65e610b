#include "common/shard_index.hpp"

#include <algorithm>
#include <new>

#include <fmt/format.h>
#include <xxhash.h>

#include "common/error.hpp"

namespace gpusearch {

namespace sf = shard_files;

std::optional<GlobalRank> contiguous_run_base(std::span<const GlobalRank> ranks) {
  if (ranks.empty()) return std::nullopt;
  const std::uint64_t base = ranks[0];
  for (std::size_t d = 1; d < ranks.size(); ++d)
    if (ranks[d] != base + d) return std::nullopt;
  return static_cast<GlobalRank>(base);
}

std::unique_ptr<ShardIndex> ShardIndex::open(const std::filesystem::path& dir,
                                             const OpenOptions& options) {
  std::unique_ptr<ShardIndex> s(new ShardIndex());
  s->dir_ = dir;
  s->manifest_ = read_shard_manifest(dir / kShardManifestName);
  const ShardManifest& m = s->manifest_;
  const std::uint64_t T = m.params.num_terms, B = m.num_blocks, n = m.num_docs;

  // Each file: present, of the size the manifest records and the counts imply, checksum intact.
  auto map = [&](const char* name, std::uint64_t expected_bytes) -> const MappedFile& {
    const auto path = dir / name;
    MappedFile f(path);
    const FileRecord& rec = m.files.at(name);
    if (f.size() != rec.bytes)
      throw IndexFormatError(path.string(), fmt::format("is {} bytes but the manifest records {} "
                                                        "(truncated or overwritten?)",
                                                        f.size(), rec.bytes));
    if (expected_bytes != UINT64_MAX && f.size() != expected_bytes)
      throw IndexFormatError(path.string(), fmt::format("is {} bytes but the counts in {} imply {}",
                                                        f.size(), kShardManifestName,
                                                        expected_bytes));
    if (options.verify_checksums && XXH3_64bits(f.data(), f.size()) != rec.xxh3)
      throw IndexFormatError(path.string(), "checksum mismatch (the file is corrupt)");
    s->files_.push_back(std::move(f));
    return s->files_.back();
  };
  s->files_.reserve(std::size(sf::kAll));
  s->lexicon_offsets_ = map(sf::kLexiconOffsets, 8 * (T + 1)).as_span<std::uint64_t>();
  s->lexicon_strings_ = map(sf::kLexiconStrings, UINT64_MAX).as_span<char>();
  s->terms_ = map(sf::kTerms, sizeof(TermInfo) * T).as_span<TermInfo>();
  s->block_last_docid_ = map(sf::kBlockLastDocid, 4 * B).as_span<DocId>();
  s->block_max_impact_ = map(sf::kBlockMaxImpact, 4 * B).as_span<float>();
  s->block_offsets_ = map(sf::kBlockOffsets, 8 * (B + 1)).as_span<std::uint64_t>();
  s->postings_ = map(sf::kPostings, 4 * m.postings_words).as_span<std::uint32_t>();
  s->doc_lengths_ = map(sf::kDocLengths, 4 * n).as_span<std::uint32_t>();
  s->pagerank_ = map(sf::kDocPagerank, 4 * n).as_span<float>();
  s->global_scores_ = map(sf::kDocGlobalScore, 4 * n).as_span<float>();
  s->global_ranks_ = map(sf::kDocGlobalRank, 4 * n).as_span<GlobalRank>();
  s->input_positions_ = map(sf::kDocInputPosition, 4 * n).as_span<std::uint32_t>();
  s->docid_offsets_ = map(sf::kDocIdOffsets, 8 * (n + 1)).as_span<std::uint64_t>();
  s->docid_strings_ = map(sf::kDocIdStrings, UINT64_MAX).as_span<char>();
  s->contiguous_rank_base_ = contiguous_run_base(s->global_ranks_);

  // Structure: offsets monotone and in range, so that no reader can be led out of a mapping.
  auto bad = [&](const char* name, const std::string& what) {
    return IndexFormatError((dir / name).string(), what);
  };
  auto check_offsets = [&](std::span<const std::uint64_t> off, std::uint64_t end,
                           const char* name) {
    if (off.front() != 0 || off.back() != end)
      throw bad(name, fmt::format("offsets must run from 0 to {}", end));
    for (std::size_t i = 1; i < off.size(); ++i)
      if (off[i] < off[i - 1]) throw bad(name, fmt::format("offset {} decreases", i));
  };
  check_offsets(s->lexicon_offsets_, s->lexicon_strings_.size(), sf::kLexiconOffsets);
  check_offsets(s->block_offsets_, m.postings_words, sf::kBlockOffsets);
  check_offsets(s->docid_offsets_, s->docid_strings_.size(), sf::kDocIdOffsets);
  if (options.external_ids_in_huge_pages) try {
    s->docid_offsets_copy_ = HugePageArray<std::uint64_t>(s->docid_offsets_.size());
    std::copy(s->docid_offsets_.begin(), s->docid_offsets_.end(), s->docid_offsets_copy_.data());
    s->docid_offsets_ = {s->docid_offsets_copy_.data(), s->docid_offsets_copy_.size()};
    s->docid_strings_copy_ = HugePageArray<char>(s->docid_strings_.size());
    std::copy(s->docid_strings_.begin(), s->docid_strings_.end(), s->docid_strings_copy_.data());
    s->docid_strings_ = {s->docid_strings_copy_.data(), s->docid_strings_copy_.size()};
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("{}: no memory for a copy of the shard's external ids ({} bytes; "
                            "the ISN's --id-table mapped reads them from the files instead)",
                            dir.string(),
                            s->docid_offsets_.size_bytes() + s->docid_strings_.size_bytes()));
  }
  std::uint64_t postings = 0;
  for (std::uint64_t t = 0; t < T; ++t) {
    const TermInfo& ti = s->terms_[t];
    const std::uint64_t expected_blocks = (std::uint64_t(ti.df_shard) + kBlockSize - 1) / kBlockSize;
    if (ti.num_blocks != expected_blocks || ti.first_block + ti.num_blocks > B ||
        ti.df_shard > ti.df_global || ti.df_global > m.params.collection.num_docs)
      throw bad(sf::kTerms, fmt::format("term {} has inconsistent counts", t));
    postings += ti.df_shard;
  }
  if (postings != m.num_postings)
    throw bad(sf::kTerms, fmt::format("holds {} postings, manifest says {}", postings,
                                      m.num_postings));
  for (std::uint64_t b = 0; b < B; ++b) {
    if (s->block_offsets_[b + 1] - s->block_offsets_[b] < 2)
      throw bad(sf::kBlockOffsets, fmt::format("block {} is too short", b));
    if (s->block_last_docid_[b] >= n && n > 0)
      throw bad(sf::kBlockLastDocid, fmt::format("block {} ends past the last document", b));
  }
  for (std::uint64_t d = 1; d < n; ++d)
    if (s->global_scores_[d] > s->global_scores_[d - 1])
      throw bad(sf::kDocGlobalScore, fmt::format("GS increases at docID {}", d));
  return s;
}

std::optional<TermId> ShardIndex::find_term(std::string_view term) const {
  std::uint32_t lo = 0, hi = num_terms();
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    const std::string_view s = term_string(mid);
    if (s < term) lo = mid + 1;
    else hi = mid;
  }
  if (lo < num_terms() && term_string(lo) == term) return lo;
  return std::nullopt;
}

std::string_view ShardIndex::term_string(TermId t) const {
  return {lexicon_strings_.data() + lexicon_offsets_[t],
          static_cast<std::size_t>(lexicon_offsets_[t + 1] - lexicon_offsets_[t])};
}

std::string_view ShardIndex::external_id(DocId d) const {
  return {docid_strings_.data() + docid_offsets_[d],
          static_cast<std::size_t>(docid_offsets_[d + 1] - docid_offsets_[d])};
}

void ShardIndex::decode_list(TermId t, std::vector<DocId>& docs,
                             std::vector<std::uint32_t>& freqs) const {
  const TermInfo& ti = terms_[t];
  docs.resize(std::size_t(ti.num_blocks) * kBlockSize);
  freqs.resize(docs.size());
  for (std::uint32_t i = 0; i < ti.num_blocks; ++i) {
    const std::uint64_t b = ti.first_block + i;
    const std::uint32_t* freq_part =
        codec::decode_docids(block_data(b), block_floor(ti, b), docs.data() + i * kBlockSize);
    codec::decode_freqs(freq_part, freqs.data() + i * kBlockSize);
  }
  docs.resize(ti.df_shard);
  freqs.resize(ti.df_shard);
}

void Index::open_into(Index& index, std::uint32_t shard_id, const OpenOptions& options) {
  const auto& rec = index.manifest_.shards.at(shard_id);
  const auto dir = index.dir_ / rec.dir;
  const auto manifest_path = dir / kShardManifestName;
  if (std::filesystem::exists(manifest_path) &&
      std::filesystem::file_size(manifest_path) == rec.manifest.bytes &&
      xxh3_of_file(manifest_path) != rec.manifest.xxh3)
    throw IndexFormatError(manifest_path.string(),
                           "checksum does not match the root manifest (corrupt or from another "
                           "build)");
  auto shard = ShardIndex::open(dir, options);
  if (shard->manifest().shard_id != shard_id || shard->num_docs() != rec.num_docs)
    throw IndexFormatError(manifest_path.string(), "does not match the root manifest");
  index.shards_.push_back(std::move(shard));
  index.shard_ids_.push_back(shard_id);
}

Index Index::open(const std::filesystem::path& dir, const OpenOptions& options) {
  Index index;
  index.dir_ = dir;
  index.manifest_ = read_root_manifest(dir / kRootManifestName);
  for (std::uint32_t s = 0; s < index.manifest_.shards.size(); ++s) open_into(index, s, options);
  return index;
}

Index Index::open_shard(const std::filesystem::path& dir, std::uint32_t shard_id,
                        const OpenOptions& options) {
  Index index;
  index.dir_ = dir;
  index.manifest_ = read_root_manifest(dir / kRootManifestName);
  if (shard_id >= index.manifest_.shards.size())
    throw IndexFormatError((dir / kRootManifestName).string(),
                           fmt::format("has {} shards; shard {} requested",
                                       index.manifest_.shards.size(), shard_id));
  open_into(index, shard_id, options);
  return index;
}

}  // namespace gpusearch
