#include "isn/ranker/ranker_backend.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "isn/ranker/gpu_ranker_backend.hpp"

namespace gpusearch::ranker {

std::unique_ptr<RankerBackend> make_ranker_backend(std::string_view which, int gpu_device) {
  if (which == "cpu") return make_cpu_ranker_backend();
  if (which != "gpu" && which != "auto")
    throw InputError("--ranker-backend", 0,
                     fmt::format("unknown ranker backend '{}' (cpu, gpu, auto)", which));
#if defined(GPUSEARCH_HAVE_CUDA)
  if (which == "gpu" || gpu_ranker_device_present()) return make_gpu_ranker_backend(gpu_device);
#else
  if (which == "gpu")
    throw InputError("--ranker-backend", 0, "gpu: this build has no CUDA (configure with nvcc)");
#endif
  return make_cpu_ranker_backend();
}

}  // namespace gpusearch::ranker
