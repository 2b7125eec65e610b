// Byte sizes on the command line: "2G", "512M", "64K", "1048576" (binary multiples).
#pragma once

#include <cctype>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "common/error.hpp"

namespace gpusearch {

// Throws InputError naming the flag; 0 only where allow_zero.
inline std::uint64_t parse_byte_size(const std::string& text, const char* flag,
                                     bool allow_zero = false) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (unit == "B" || unit.empty()) {
  } else if (unit == "K" || unit == "KB" || unit == "KIB")
    value *= 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    value *= 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    value *= 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB")
    value *= 1024.0 * 1024 * 1024 * 1024;
  else
    used = 0;
  if (used == 0 || !(value > 0 || (allow_zero && value == 0)))
    throw InputError(flag, 0, fmt::format("'{}' is not a size (e.g. 2G, 512M, 1048576)", text));
  return static_cast<std::uint64_t>(value);
}

}  // namespace gpusearch
