#include "common/heap_retention.hpp"

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace gpusearch {

bool retain_freed_heap_memory() {
#if defined(__GLIBC__)
  // 1 GiB: above any batch's answers. Setting it stops glibc's dynamic mmap threshold, so the
  // threshold is set to 32 MiB, where that rule would take it for a server's repeated large
  // buffers: below it, allocations come from (and stay in) the heap.
  return mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 && mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
#else
  return false;
#endif
}

}  // namespace gpusearch
