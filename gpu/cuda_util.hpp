// RAII owners for CUDA resources and the check every CUDA call goes through. Host-only code
// (no kernels): included by .cu and .cpp files alike.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace gpusearch::gpu {

// A CUDA failure: the call, where, and the driver's message.
class CudaError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* what, const char* file,
                                   int line);

#define GPUSEARCH_CUDA_CHECK(call)                                                      \
  do {                                                                                  \
    const cudaError_t gpusearch_status_ = (call);                                       \
    if (gpusearch_status_ != cudaSuccess)                                               \
      ::gpusearch::gpu::throw_cuda_error(gpusearch_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch errors now (naming the kernel), execution errors at the next
// synchronization.
#define GPUSEARCH_CUDA_CHECK_LAUNCH(kernel_name)                                                \
  do {                                                                                          \
    const cudaError_t gpusearch_status_ = cudaGetLastError();                                   \
    if (gpusearch_status_ != cudaSuccess)                                                       \
      ::gpusearch::gpu::throw_cuda_error(gpusearch_status_, "launch of " kernel_name, __FILE__, \
                                         __LINE__);                                             \
  } while (0)

// Number of CUDA devices; 0 when there is no driver or no device (never throws).
int cuda_device_count();

// Device memory of n elements of T.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  // Discards the contents.
  void resize(std::size_t n) {
    if (n == size_) return;
    release();
    if (n > 0) GPUSEARCH_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
    size_ = n;
  }
  // Grows (never shrinks) to at least n elements, discarding the contents when it grows.
  void reserve(std::size_t n) {
    if (n > size_) resize(n + n / 4);
  }
  T* data() const { return ptr_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

 private:
  void release() noexcept {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
  }
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
};

// Page-locked host memory (so that copies are asynchronous and run at full PCIe speed).
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void reserve(std::size_t n) {
    if (n <= size_) return;
    release();
    const std::size_t want = n + n / 4;
    GPUSEARCH_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&ptr_), want * sizeof(T)));
    size_ = want;
  }
  // Exactly n elements (large staging buffers, where reserve()'s quarter of headroom would
  // pin gigabytes for nothing).
  void reserve_exact(std::size_t n) {
    if (n <= size_) return;
    release();
    GPUSEARCH_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
    size_ = n;
  }
  T* data() const { return ptr_; }
  std::size_t size() const { return size_; }

 private:
  void release() noexcept {
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    size_ = 0;
  }
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
};

class CudaStream {
 public:
  CudaStream() { GPUSEARCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (s_) cudaStreamDestroy(s_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return s_; }
  void synchronize() const { GPUSEARCH_CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() { GPUSEARCH_CUDA_CHECK(cudaEventCreate(&e_)); }
  ~CudaEvent() {
    if (e_) cudaEventDestroy(e_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return e_; }
  void record(cudaStream_t s) { GPUSEARCH_CUDA_CHECK(cudaEventRecord(e_, s)); }
  void synchronize() const { GPUSEARCH_CUDA_CHECK(cudaEventSynchronize(e_)); }
  // Whether the work before the event has completed (never blocks).
  bool completed() const {
    const cudaError_t status = cudaEventQuery(e_);
    if (status == cudaErrorNotReady) return false;
    GPUSEARCH_CUDA_CHECK(status);
    return true;
  }
  // Milliseconds from `start` to this event (both recorded and complete).
  float ms_since(const CudaEvent& start) const {
    float ms = 0;
    GPUSEARCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
    return ms;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

// Makes `device` current for this thread for the object's lifetime, restoring the previous one.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    GPUSEARCH_CUDA_CHECK(cudaGetDevice(&previous_));
    if (device >= 0 && device != previous_) GPUSEARCH_CUDA_CHECK(cudaSetDevice(device));
  }
  ~ScopedDevice() { cudaSetDevice(previous_); }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace gpusearch::gpu
