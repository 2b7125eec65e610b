#include "partition/corpus_reader.hpp"

#include <zlib.h>

#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace gpusearch {

CorpusFormat parse_corpus_format(const std::string& s) {
  if (s == "auto") return CorpusFormat::kAuto;
  if (s == "jsonl") return CorpusFormat::kJsonl;
  if (s == "trec") return CorpusFormat::kTrec;
  throw InputError("--format", 0, "unknown corpus format '" + s + "' (auto, jsonl, trec)");
}

// Lines of a gzip or plain file (zlib reads both), any length.
class CorpusReader::LineSource {
 public:
  explicit LineSource(const std::filesystem::path& path) : path_(path.string()) {
    file_ = gzopen(path_.c_str(), "rb");
    if (!file_) throw InputError(path_, 0, "cannot open corpus file");
    gzbuffer(file_, 1 << 20);
  }
  ~LineSource() {
    if (file_) gzclose(file_);
  }
  // Next line without its newline; false at end of file.
  bool getline(std::string& line) {
    line.clear();
    for (;;) {
      if (pos_ == len_) {
        const int n = gzread(file_, buf_, sizeof(buf_));
        if (n < 0) {
          int err = 0;
          throw InputError(path_, line_no_ + 1, std::string("read error: ") + gzerror(file_, &err));
        }
        if (n == 0) {
          if (line.empty()) return false;
          ++line_no_;
          return true;
        }
        pos_ = 0;
        len_ = std::size_t(n);
      }
      const char* start = buf_ + pos_;
      const void* nl = std::memchr(start, '\n', len_ - pos_);
      if (nl) {
        const std::size_t k = std::size_t(static_cast<const char*>(nl) - start);
        line.append(start, k);
        pos_ += k + 1;
        ++line_no_;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return true;
      }
      line.append(start, len_ - pos_);
      pos_ = len_;
    }
  }
  std::uint64_t line_no() const { return line_no_; }
  const std::string& path() const { return path_; }
  std::uint64_t compressed_offset() const { return std::uint64_t(gzoffset(file_)); }
  // First non-blank byte of the file, without consuming input.
  int peek_first_byte() {
    std::string first;
    while (getline(first)) {
      const auto p = first.find_first_not_of(" \t\r");
      if (p != std::string::npos) {
        pending_ = first;
        has_pending_ = true;
        return static_cast<unsigned char>(first[p]);
      }
    }
    return -1;
  }
  void unget(std::string line) {
    pending_ = std::move(line);
    has_pending_ = true;
  }
  bool take_pending(std::string& line) {
    if (!has_pending_) return false;
    line = std::move(pending_);
    has_pending_ = false;
    return true;
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
  char buf_[1 << 16];
  std::size_t pos_ = 0, len_ = 0;
  std::uint64_t line_no_ = 0;
  std::string pending_;
  bool has_pending_ = false;
};

CorpusReader::CorpusReader(std::vector<std::filesystem::path> files, CorpusReadOptions options)
    : files_(std::move(files)), options_(options) {
  if (files_.empty()) throw InputError("--corpus", 0, "no corpus file given");
  for (const auto& f : files_) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(f, ec);
    if (ec) throw InputError(f.string(), 0, "cannot open corpus file: " + ec.message());
    total_bytes_ += size;
  }
}

CorpusReader::~CorpusReader() = default;

std::uint64_t CorpusReader::bytes_read() const {
  return bytes_done_ + (source_ ? source_->compressed_offset() : 0);
}

void CorpusReader::bad(const std::string& what, std::uint64_t line) {
  if (!options_.skip_bad) throw InputError(source_->path(), line, what + " (use --skip-bad to skip)");
  ++skipped_;
  if (skipped_messages_.size() < 100)
    skipped_messages_.push_back(fmt::format("{}:{}: {}", source_->path(), line, what));
}

bool CorpusReader::open_next_file() {
  if (source_) bytes_done_ += std::filesystem::file_size(source_->path());
  source_.reset();
  if (next_file_ >= files_.size()) return false;
  const auto& path = files_[next_file_++];
  source_ = std::make_unique<LineSource>(path);
  current_format_ = options_.format;
  if (current_format_ == CorpusFormat::kAuto) {
    const int c = source_->peek_first_byte();
    current_format_ = c == '<' ? CorpusFormat::kTrec : CorpusFormat::kJsonl;
  }
  return true;
}

bool CorpusReader::next(RawDocument& doc) {
  for (;;) {
    if (!source_ && !open_next_file()) return false;
    const bool got = current_format_ == CorpusFormat::kTrec ? next_trec(doc) : next_jsonl(doc);
    if (got) return true;
    if (!open_next_file()) return false;
  }
}

namespace {
// A JSON id may be a string or a number.
bool json_id(const nlohmann::json& v, std::string& out) {
  if (v.is_string()) out = v.get<std::string>();
  else if (v.is_number_integer()) out = std::to_string(v.get<long long>());
  else return false;
  return !out.empty();
}
}  // namespace

bool CorpusReader::next_jsonl(RawDocument& doc) {
  std::string line;
  for (;;) {
    if (!source_->take_pending(line) && !source_->getline(line)) return false;
    const std::uint64_t ln = source_->line_no();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      bad("malformed JSON line", ln);
      continue;
    }
    doc = RawDocument{};
    const auto id_it = j.contains("id") ? j.find("id") : j.find("_id");
    if (id_it == j.end() || !json_id(*id_it, doc.id)) {
      bad("document has no \"id\" (or \"_id\") string", ln);
      continue;
    }
    auto text_field = [&](const char* name, std::string& out) -> int {
      const auto it = j.find(name);
      if (it == j.end() || it->is_null()) return 0;
      if (!it->is_string()) return -1;
      out += it->get_ref<const std::string&>();
      return 1;
    };
    int c = text_field("contents", doc.text);
    if (c == 0) {
      const int t = text_field("title", doc.text);
      if (t > 0) doc.text.push_back('\n');
      const int x = text_field("text", doc.text);
      c = (t < 0 || x < 0) ? -1 : (t + x > 0 ? 1 : 0);
    }
    if (c <= 0) {
      bad(c < 0 ? "text fields must be strings"
                : "document " + doc.id + " has no \"contents\" or \"title\"/\"text\"",
          ln);
      continue;
    }
    if (const auto it = j.find("links"); it != j.end() && !it->is_null()) {
      bool ok = it->is_array();
      if (ok) {
        for (const auto& l : *it) {
          std::string target;
          if (!json_id(l, target)) { ok = false; break; }
          doc.links.push_back(std::move(target));
        }
      }
      if (!ok) {
        bad("\"links\" must be a list of document ids", ln);
        continue;
      }
    }
    doc.source = fmt::format("{}:{}", source_->path(), ln);
    return true;
  }
}

namespace {
// Text of a TREC document body: tags removed, DOCHDR (HTTP headers in GOV2) skipped.
void append_without_tags(std::string_view s, std::string& out, bool& in_tag, bool& in_header) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_tag) {
      if (c == '>') in_tag = false;
      continue;
    }
    if (c == '<') {
      const auto rest = s.substr(i);
      if (rest.starts_with("<DOCHDR>")) in_header = true;
      else if (rest.starts_with("</DOCHDR>")) in_header = false;
      in_tag = true;
      out.push_back(' ');
      continue;
    }
    if (!in_header) out.push_back(c);
  }
  out.push_back('\n');
}
}  // namespace

bool CorpusReader::next_trec(RawDocument& doc) {
  std::string line;
  for (;;) {
    // Find <DOC>.
    bool found = false;
    while (source_->take_pending(line) || source_->getline(line)) {
      const auto p = line.find("<DOC>");
      if (p != std::string::npos) {
        line.erase(0, p + 5);
        found = true;
        break;
      }
    }
    if (!found) return false;
    const std::uint64_t start_line = source_->line_no();
    doc = RawDocument{};
    bool in_tag = false, in_header = false, closed = false, has_docno = false;
    std::string body = line;
    for (;;) {
      const auto docno = body.find("<DOCNO>");
      if (!has_docno && docno != std::string::npos) {
        const auto end = body.find("</DOCNO>", docno);
        if (end == std::string::npos) break;
        std::string id = body.substr(docno + 7, end - docno - 7);
        const auto b = id.find_first_not_of(" \t"), e = id.find_last_not_of(" \t");
        if (b != std::string::npos) doc.id = id.substr(b, e - b + 1);
        has_docno = !doc.id.empty();
        body.erase(docno, end + 8 - docno);
      }
      const auto close = body.find("</DOC>");
      if (close != std::string::npos) {
        append_without_tags(std::string_view(body).substr(0, close), doc.text, in_tag, in_header);
        closed = true;
        break;
      }
      append_without_tags(body, doc.text, in_tag, in_header);
      if (!source_->getline(body)) break;
      if (body.find("<DOC>") != std::string::npos) {  // the next document began: this one is open
        source_->unget(std::move(body));
        break;
      }
    }
    if (!closed) {
      bad("<DOC> without </DOC>", start_line);
      continue;
    }
    if (!has_docno) {
      bad("<DOC> without <DOCNO>", start_line);
      continue;
    }
    doc.source = fmt::format("{}:{}", source_->path(), start_line);
    return true;
  }
}

}  // namespace gpusearch
