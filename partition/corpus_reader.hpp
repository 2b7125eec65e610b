// Streaming corpus readers: JSONL (`id` or `_id`; `contents`, or `title` + `text`; optional
// `links`) and TREC <DOC> files, gzip-compressed or plain. A malformed document raises an
// InputError naming the file and line, or, with skip_bad, is counted and skipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace gpusearch {

struct RawDocument {
  std::string id;
  std::string text;
  std::vector<std::string> links;  // external ids of linked documents
  std::string source;              // file:line, for messages
};

enum class CorpusFormat { kAuto, kJsonl, kTrec };
CorpusFormat parse_corpus_format(const std::string& s);

struct CorpusReadOptions {
  CorpusFormat format = CorpusFormat::kAuto;
  bool skip_bad = false;
};

// Reads documents from a list of files, one after the other.
class CorpusReader {
 public:
  CorpusReader(std::vector<std::filesystem::path> files, CorpusReadOptions options);
  ~CorpusReader();
  // Fills `doc` with the next well-formed document; false at the end of the last file.
  bool next(RawDocument& doc);
  std::uint64_t skipped() const { return skipped_; }
  std::uint64_t bytes_read() const;  // compressed bytes consumed so far, for progress
  std::uint64_t total_bytes() const { return total_bytes_; }
  const std::vector<std::string>& skipped_messages() const { return skipped_messages_; }

 private:
  class LineSource;
  bool open_next_file();
  bool next_jsonl(RawDocument& doc);
  bool next_trec(RawDocument& doc);
  void bad(const std::string& what, std::uint64_t line);

  std::vector<std::filesystem::path> files_;
  CorpusReadOptions options_;
  std::size_t next_file_ = 0;
  std::unique_ptr<LineSource> source_;
  CorpusFormat current_format_ = CorpusFormat::kJsonl;
  std::uint64_t skipped_ = 0;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t bytes_done_ = 0;  // of finished files
  std::vector<std::string> skipped_messages_;
};

}  // namespace gpusearch
