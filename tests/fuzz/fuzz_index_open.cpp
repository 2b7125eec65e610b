// libFuzzer target index_open: the body is gpusearch::fuzz::index_open (tests/fuzz/fuzz_targets.hpp).
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gpusearch::fuzz::index_fixture();  // build the index once, before the clock starts
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return gpusearch::fuzz::index_open(data, size);
}
