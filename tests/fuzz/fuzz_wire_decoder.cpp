// libFuzzer target wire_decoder: the body is gpusearch::fuzz::wire_decoder (tests/fuzz/fuzz_targets.hpp).
#include "fuzz_targets.hpp"

// GPUSEARCH_FUZZ_WRITE_SEEDS=DIR: write one valid message of every type there (a seed corpus).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("GPUSEARCH_FUZZ_WRITE_SEEDS")) {
    int n = 0;
    for (const auto& w : gpusearch::fuzz::wire_examples()) {
      const auto b = gpusearch::wire::as_bytes(w);
      std::ofstream(std::string(dir) + "/message-" + std::to_string(n++), std::ios::binary)
          .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return gpusearch::fuzz::wire_decoder(data, size);
}
