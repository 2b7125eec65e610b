// Error types shared by every part of gpusearch. Libraries throw; only mains decide to exit.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace gpusearch {

// Any gpusearch failure that is not a programming error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input: a corpus or query line, a flag value. Names the input and, where known, the line.
class InputError : public Error {
 public:
  InputError(const std::string& source, std::uint64_t line, const std::string& what)
      : Error(line > 0 ? fmt::format("{}:{}: {}", source, line, what)
                       : fmt::format("{}: {}", source, what)),
        source_(source),
        line_(line) {}
  const std::string& source() const { return source_; }
  std::uint64_t line() const { return line_; }

 private:
  std::string source_;
  std::uint64_t line_;
};

// An index file that is missing, truncated, corrupt or of another format version. Names the file.
class IndexFormatError : public Error {
 public:
  IndexFormatError(const std::string& file, const std::string& what)
      : Error(fmt::format("index file {}: {}", file, what)), file_(file) {}
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

}  // namespace gpusearch
