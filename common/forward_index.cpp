#include "common/forward_index.hpp"

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "common/error.hpp"

namespace gpusearch {

namespace ff = forward_files;
using nlohmann::json;

json to_json(const ForwardIndexRecord& r) {
  return json{{"format_version", r.format_version},
              {"encoding", r.encoding},
              {"num_tokens", r.num_tokens},
              {"files", {{ff::kOffsets, {{"bytes", r.offsets.bytes}, {"xxh3", r.offsets.xxh3}}},
                         {ff::kData, {{"bytes", r.data.bytes}, {"xxh3", r.data.xxh3}}}}}};
}

std::optional<ForwardIndexRecord> read_forward_index_record(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw IndexFormatError(file.string(), "cannot open");
  try {
    const json j = json::parse(in);
    if (!j.contains(kForwardIndexSection)) return std::nullopt;
    const json& s = j.at(kForwardIndexSection);
    ForwardIndexRecord r;
    r.format_version = s.at("format_version").get<int>();
    r.encoding = s.at("encoding").get<std::string>();
    r.num_tokens = s.at("num_tokens").get<std::uint64_t>();
    const auto record = [&](const char* name) {
      const json& f = s.at("files").at(name);
      return FileRecord{f.at("bytes").get<std::uint64_t>(), f.at("xxh3").get<std::uint64_t>()};
    };
    r.offsets = record(ff::kOffsets);
    r.data = record(ff::kData);
    return r;
  } catch (const json::exception& e) {
    throw IndexFormatError(file.string(), fmt::format("bad or missing field in '{}': {}",
                                                      kForwardIndexSection, e.what()));
  }
}

ForwardIndex ForwardIndex::open(const ShardIndex& shard, const OpenOptions& options) {
  const std::string manifest_file = (shard.dir() / kShardManifestName).string();
  const std::optional<ForwardIndexRecord> record = read_forward_index_record(manifest_file);
  if (!record)
    throw IndexFormatError(manifest_file,
                           "the shard has no forward index (build the index with --forward-index)");
  const ForwardIndexRecord& rec = *record;
  if (rec.format_version != kForwardIndexFormatVersion)
    throw IndexFormatError(manifest_file,
                           fmt::format("forward index version {} is not the supported version {}",
                                       rec.format_version, kForwardIndexFormatVersion));
  if (rec.encoding != kForwardIndexEncoding)
    throw IndexFormatError(manifest_file, fmt::format("unknown forward index encoding '{}' "
                                                      "(supported: {})",
                                                      rec.encoding, kForwardIndexEncoding));
  ForwardIndex f;
  f.shard_ = &shard;
  f.num_tokens_ = rec.num_tokens;
  auto map = [&](const char* name, const FileRecord& r, std::uint64_t expected_bytes) {
    const auto path = shard.dir() / name;
    MappedFile file(path);
    if (file.size() != r.bytes)
      throw IndexFormatError(path.string(), fmt::format("is {} bytes but the manifest records {} "
                                                        "(truncated or overwritten?)",
                                                        file.size(), r.bytes));
    if (expected_bytes != UINT64_MAX && file.size() != expected_bytes)
      throw IndexFormatError(path.string(), fmt::format("is {} bytes but {} documents imply {}",
                                                        file.size(), shard.num_docs(),
                                                        expected_bytes));
    if (options.verify_checksums && XXH3_64bits(file.data(), file.size()) != r.xxh3)
      throw IndexFormatError(path.string(), "checksum mismatch (the file is corrupt)");
    return file;
  };
  f.offsets_file_ = map(ff::kOffsets, rec.offsets, 8 * (std::uint64_t(shard.num_docs()) + 1));
  f.data_file_ = map(ff::kData, rec.data, UINT64_MAX);
  f.offsets_ = f.offsets_file_.as_span<std::uint64_t>();
  f.data_ = f.data_file_.as_span<std::uint8_t>();

  // Offsets in order and in range: no document's stream can lead a reader out of the mapping.
  const std::string offsets_file = (shard.dir() / ff::kOffsets).string();
  if (f.offsets_.front() != 0 || f.offsets_.back() != f.data_.size())
    throw IndexFormatError(offsets_file, fmt::format("offsets must run from 0 to {}", f.data_.size()));
  for (std::size_t d = 1; d < f.offsets_.size(); ++d)
    if (f.offsets_[d] < f.offsets_[d - 1])
      throw IndexFormatError(offsets_file, fmt::format("offset {} decreases", d));
  std::uint64_t tokens = 0;
  for (const std::uint32_t length : shard.doc_lengths()) tokens += length;
  if (tokens != rec.num_tokens)
    throw IndexFormatError(manifest_file,
                           fmt::format("forward index records {} tokens, document lengths sum to {}",
                                       rec.num_tokens, tokens));
  if (options.verify_checksums) {  // the full structural check costs one decode, like the hash
    std::vector<TermId> scratch;
    for (DocId d = 0; d < f.num_docs(); ++d) f.tokens(d, scratch);
  }
  return f;
}

void ForwardIndex::tokens(DocId d, std::vector<TermId>& out) const {
  out.clear();
  const std::uint32_t length = shard_->doc_lengths()[d];
  out.reserve(length);
  const std::uint8_t* p = data_.data() + offsets_[d];
  const std::uint8_t* const end = data_.data() + offsets_[d + 1];
  const std::uint32_t T = shard_->num_terms();
  std::uint32_t t = 0;
  while (p < end) {
    if (!vbyte::next(p, end, t) || t >= T || out.size() == length)
      throw IndexFormatError((shard_->dir() / ff::kData).string(),
                             fmt::format("stream of docID {} is malformed", d));
    out.push_back(t);
  }
  if (out.size() != length)
    throw IndexFormatError((shard_->dir() / ff::kData).string(),
                           fmt::format("stream of docID {} holds {} tokens, its length is {}", d,
                                       out.size(), length));
}

}  // namespace gpusearch
