// Keeping freed heap memory in the process: an engine that answers a batch at k = 1000 allocates
// a result vector per query (4,096 queries: about 100 MB of RankedDoc), frees the previous
// batch's, and with glibc's defaults the freed top of each arena goes back to the kernel and is
// faulted in again, page by page, by the next batch: the GPU engine's unpacking of such a batch
// on 16 cores was bound by those page faults (NOTES-gpu-engine.md, ninth session). Servers and
// benchmarks call this once at start-up; the memory a process keeps is its peak, as jemalloc
// and tcmalloc would keep it.
#pragma once

namespace gpusearch {

// Raises glibc's trim threshold so that freed memory stays in the heap for the next
// allocation. Returns false where the C library offers no such setting (the call is a no-op).
bool retain_freed_heap_memory();

}  // namespace gpusearch
