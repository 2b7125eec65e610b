// libFuzzer target corpus_reader: the body is gpusearch::fuzz::corpus_reader (tests/fuzz/fuzz_targets.hpp).
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return gpusearch::fuzz::corpus_reader(data, size);
}
