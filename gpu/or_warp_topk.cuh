// The warp OR kernel's top-k (gpu/or_warp_kernel.cu): one per warp in registers for k <= 32,
// or one per block in shared memory (k up to 1024), appended to by every warp, sorted in by one.
#pragma once

#include <cstdint>

#include "gpu/batch_layout.hpp"
#include "gpu/device_topk.cuh"
#include "gpu/query_kernels.hpp"
#include "gpu/shard_access.cuh"

namespace gpusearch::gpu {

// A warp's top-k: lane i holds the i-th best entry (score descending, then docID ascending);
// an empty entry has score -1 (scores are >= 0), which no document ranks after.
struct WarpTopK {
  double score = -1.0;
  std::uint32_t doc = kEndDoc;
  double kth_score = -1.0;  // entry k-1, the same in every lane
  std::uint32_t kth_doc = kEndDoc;

  __device__ bool full() const { return kth_score >= 0.0; }
  __device__ double kth_bound() const { return kth_score; }  // -1 until full
  __device__ bool admits(double s, std::uint32_t d) const {
    return !full() || ranks_before(s, d, kth_score, kth_doc);
  }
  // Warp-uniform (s, d): inserted at its rank, the entries after it move down one lane.
  __device__ void insert(double s, std::uint32_t d, unsigned lane, unsigned k) {
    const unsigned pos = __popc(__ballot_sync(kFullMask, ranks_before(score, doc, s, d)));
    const double up_score = __shfl_up_sync(kFullMask, score, 1);
    const std::uint32_t up_doc = __shfl_up_sync(kFullMask, doc, 1);
    if (lane > pos) {
      score = up_score;
      doc = up_doc;
    } else if (lane == pos) {
      score = s;
      doc = d;
    }
    kth_score = __shfl_sync(kFullMask, score, k - 1);
    kth_doc = __shfl_sync(kFullMask, doc, k - 1);
  }
  // Every lane may hold one offer (have): each that still ranks inside goes in.
  __device__ void offer(bool have, double s, std::uint32_t d, unsigned lane, unsigned k) {
    for (unsigned want = __ballot_sync(kFullMask, have && admits(s, d)); want != 0;
         want &= want - 1) {
      const unsigned src = __ffs(want) - 1;
      const double cs = __shfl_sync(kFullMask, s, src);
      const std::uint32_t cd = __shfl_sync(kFullMask, d, src);
      if (admits(cs, cd)) insert(cs, cd, lane, k);
    }
  }
};

// k > 32: one top-k per block in shared memory: [0, k) best first (score -1 where empty), then
// a buffer of newcomers [k, capacity). Warps append under reservations; the warp that finds the
// buffer full takes the lock, closes the buffer, waits until every reserved slot is written, and
// sorts top-k and buffer together (bitonic, that warp alone) while the others wait for it to
// reopen. The k-th score is published as one 8-byte word (-1 until full); newcomers are
// admitted at or above it (a tie may still lose on its docID at the sort: never wrongly
// refused).
struct BlockTopKState {
  unsigned lock, reserved, committed, n_top;
  double kth_score;
};
constexpr unsigned kBufferClosed = 0xffffffffu;

struct BlockTopK {
  BlockTopKState* st;
  double* score;
  std::uint32_t* doc;
  unsigned k, capacity;

  __device__ double kth_bound() const { return *reinterpret_cast<volatile double*>(&st->kth_score); }
  __device__ bool full() const { return kth_bound() >= 0.0; }

  __device__ void init(unsigned tid, unsigned threads) {
    if (tid == 0) {
      st->lock = 0;
      st->reserved = 0;
      st->committed = 0;
      st->n_top = 0;
      st->kth_score = -1.0;
    }
    for (unsigned i = tid; i < capacity; i += threads) {
      score[i] = -1.0;
      doc[i] = kEndDoc;
    }
  }

  // One warp: top-k [0, k) and buffer [k, k + n_buf) sorted together, cut back to k.
  __device__ void sort_in(unsigned n_buf, unsigned lane) {
    unsigned size = 1;
    while (size < k + n_buf) size <<= 1;
    for (unsigned i = k + n_buf + lane; i < size; i += 32) {
      score[i] = -1.0;
      doc[i] = kEndDoc;
    }
    __syncwarp();
    for (unsigned span = 2; span <= size; span <<= 1) {
      for (unsigned stride = span >> 1; stride > 0; stride >>= 1) {
        bitonic_stage(score, doc, size, span, stride, lane, 32);
        __syncwarp();
      }
    }
    // Entries past k are dropped: the buffer's slots are rewritten before they count again.
    if (lane == 0) {
      unsigned n = st->n_top + n_buf;
      if (n > k) n = k;
      st->n_top = n;
      if (n == k) *reinterpret_cast<volatile double*>(&st->kth_score) = score[k - 1];
    }
    __syncwarp();
  }

  // The calling warp flushes if it gets the lock, else waits for the flush under way.
  __device__ void flush_or_wait(unsigned lane) {
    unsigned got = 0;
    if (lane == 0) got = atomicCAS(&st->lock, 0u, 1u) == 0u;
    got = __shfl_sync(kFullMask, got, 0);
    if (got) {
      unsigned n_buf = 0;
      if (lane == 0) {
        n_buf = atomicExch(&st->reserved, kBufferClosed);
        while (*reinterpret_cast<volatile unsigned*>(&st->committed) != n_buf) __nanosleep(32);
        __threadfence_block();
      }
      n_buf = __shfl_sync(kFullMask, n_buf, 0);
      sort_in(n_buf, lane);
      if (lane == 0) {
        st->committed = 0;
        __threadfence_block();
        atomicExch(&st->reserved, 0u);
        atomicExch(&st->lock, 0u);
      }
    } else if (lane == 0) {
      while (*reinterpret_cast<volatile unsigned*>(&st->lock) != 0u) __nanosleep(32);
    }
    __syncwarp();
  }

  // Warp-collective: every lane may hold one offer.
  __device__ void offer(bool have, double s, std::uint32_t d, unsigned lane, unsigned) {
    bool mine = have && s >= kth_bound();
    const unsigned buffer = capacity - k;
    for (unsigned want = __ballot_sync(kFullMask, mine); want != 0;
         want = __ballot_sync(kFullMask, mine)) {
      const unsigned cnt = __popc(want);
      unsigned base = 0;
      if (lane == 0) {
        unsigned old = *reinterpret_cast<volatile unsigned*>(&st->reserved);
        while (true) {
          if (old == kBufferClosed) {  // a flush is under way
            __nanosleep(32);
            old = *reinterpret_cast<volatile unsigned*>(&st->reserved);
            continue;
          }
          if (old + cnt > buffer) {
            base = kBufferClosed;  // full: flush first
            break;
          }
          const unsigned seen = atomicCAS(&st->reserved, old, old + cnt);
          if (seen == old) {
            base = old;
            break;
          }
          old = seen;
        }
      }
      base = __shfl_sync(kFullMask, base, 0);
      if (base != kBufferClosed) {
        if (mine) {
          const unsigned at = k + base + __popc(want & ((1u << lane) - 1u));
          score[at] = s;
          doc[at] = d;
        }
        __syncwarp();
        if (lane == 0) {
          __threadfence_block();
          atomicAdd(&st->committed, cnt);
        }
        return;
      }
      flush_or_wait(lane);
      mine = mine && s >= kth_bound();
    }
  }

  // After the block's last barrier, warp 0: the buffer sorted in, the row written.
  __device__ void finish(const BatchPointers& batch, std::uint32_t row, unsigned lane) {
    const unsigned n_buf = st->committed;
    if (n_buf > 0) sort_in(n_buf, lane);
    const unsigned n = st->n_top;
    for (unsigned i = lane; i < n; i += 32)
      batch.partial_hits[std::size_t(row) * k + i] = {score[i], doc[i], 0};
    if (lane == 0) batch.partial_count[row] = n;
  }
};

}  // namespace gpusearch::gpu
