// GPUSEARCH_HOST_DEVICE marks a function written once for host and device: under nvcc it is
// __host__ __device__, elsewhere nothing. No CUDA header is included, so common/ and the CPU-only
// build keep to plain C++ (ARCHITECTURE.md). Write `GPUSEARCH_HOST_DEVICE inline ...`.
#pragma once

#if defined(__CUDACC__)
#define GPUSEARCH_HOST_DEVICE __host__ __device__
#else
#define GPUSEARCH_HOST_DEVICE
#endif
