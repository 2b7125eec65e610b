#include "gpu/cuda_util.hpp"

#include <fmt/format.h>

namespace gpusearch::gpu {

void throw_cuda_error(cudaError_t status, const char* what, const char* file, int line) {
  throw CudaError(fmt::format("CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(status),
                              cudaGetErrorString(status), what, file, line));
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" status
    return 0;
  }
  return n;
}

}  // namespace gpusearch::gpu
