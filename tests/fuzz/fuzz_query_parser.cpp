// libFuzzer target query_parser: the body is gpusearch::fuzz::query_parser (tests/fuzz/fuzz_targets.hpp).
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return gpusearch::fuzz::query_parser(data, size);
}
