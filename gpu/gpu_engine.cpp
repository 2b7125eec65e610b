#include "gpu/gpu_engine.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "common/reference_engine.hpp"
#include "common/scoring.hpp"
#include "gpu/device_shard.hpp"
#include "gpu/query_kernels.hpp"

namespace gpusearch::gpu {

namespace {

constexpr std::size_t align_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

std::vector<std::string> gpu_algorithms() { return {"bmw", "window", "exhaustive"}; }

bool gpu_available() { return cuda_device_count() > 0; }

// One of the two pipelines: its stream, its pinned and device buffers, the batch it carries.
struct Lane {
  CudaStream stream;
  PinnedBuffer<std::byte> host_in, host_out;
  DeviceBuffer<std::byte> dev_in, dev_out;
  DeviceBuffer<std::uint32_t> term_cache;
  CudaEvent start, after_h2d, after_kernels, after_d2h;
  std::vector<std::size_t> query_index;  // positions in the caller's span
  std::size_t num_terms = 0, out_bytes = 0, in_bytes = 0;
  GpuBatchStats stats;
  bool pending = false;
};

struct GpuEngine::Impl {
  const ShardIndex& shard;
  std::uint32_t shard_id;
  GpuEngineOptions options;
  int device = 0;
  std::unique_ptr<DeviceShard> image;
  std::array<Lane, 2> lanes;

  Impl(const ShardIndex& s, std::uint32_t id, GpuEngineOptions o)
      : shard(s), shard_id(id), options(std::move(o)) {}
};

GpuEngine::GpuEngine(const ShardIndex& shard, std::uint32_t shard_id, GpuEngineOptions options) {
  if (options.algorithm.empty()) options.algorithm = "bmw";
  const auto algos = gpu_algorithms();
  if (std::find(algos.begin(), algos.end(), options.algorithm) == algos.end())
    throw InputError("--algorithm", 0,
                     fmt::format("unknown GPU algorithm '{}' (bmw, window, exhaustive)", options.algorithm));
  if (options.batch_size == 0) throw InputError("--gpu-batch", 0, "must be at least 1");
  if (options.bmw_threads < 32 || options.bmw_threads > 256 || options.bmw_threads % 32 != 0)
    throw InputError("--bmw-threads", 0, "must be a multiple of 32 in [32, 256]");
  if (options.or_window < 256 || options.or_window > 65536 || options.or_window % 128 != 0)
    throw InputError("--or-window", 0, "must be a multiple of 128 in [256, 65536]");
  if (!gpu_available()) throw CudaError("no CUDA device is available to the GPU engine");
  if (options.device >= cuda_device_count())
    throw InputError("--gpu", 0, fmt::format("device {} does not exist ({} present)",
                                             options.device, cuda_device_count()));
  impl_ = std::make_unique<Impl>(shard, shard_id, options);
  if (options.device < 0) GPUSEARCH_CUDA_CHECK(cudaGetDevice(&impl_->device));
  else impl_->device = options.device;
  ScopedDevice scoped(impl_->device);
  configure_query_kernels();
  impl_->image = std::make_unique<DeviceShard>(shard);
}

GpuEngine::~GpuEngine() {
  if (!impl_) return;
  try {
    ScopedDevice scoped(impl_->device);
    impl_.reset();  // streams, buffers and the image are freed on their device
  } catch (...) {
  }
}

void GpuEngine::search(std::span<const Query> queries, const SearchParams& params,
                       std::span<ShardResult> out) {
  try {
    search_batches(queries, params, out);
  } catch (...) {
    // A failed call leaves no launch pending: the next call (or a CPU fallback) starts clean.
    for (Lane& lane : impl_->lanes) lane.pending = false;
    throw;
  }
}

void GpuEngine::search_batches(std::span<const Query> queries, const SearchParams& params,
                               std::span<ShardResult> out) {
  Impl& m = *impl_;
  ScopedDevice scoped(m.device);
  const ShardIndex& shard = m.shard;
  const IndexParams& ip = shard.params();
  const unsigned k = params.k;
  const bool bmw = m.options.algorithm == "bmw";
  const bool pruned = m.options.algorithm != "exhaustive";

  // Queries the kernels cannot take (more terms than their shared memory plans for) are
  // answered by the reference engine; none exist under the default query limits.
  std::vector<std::size_t> gpu_queries;
  gpu_queries.reserve(queries.size());
  for (std::size_t i = 0; i < queries.size(); ++i) {
    if (queries[i].terms.size() <= kMaxGpuTerms) {
      gpu_queries.push_back(i);
      continue;
    }
    ReferenceEngine ref(shard, m.shard_id);
    ref.search(queries.subspan(i, 1), params, out.subspan(i, 1));
  }
  if (k == 0) {
    for (std::size_t i : gpu_queries) out[i] = ShardResult{};
    return;
  }
  // Cost order (paper 003): the length of the shortest list for AND, of all lists for OR.
  auto cost = [&](std::size_t i) {
    std::uint64_t shortest = ~std::uint64_t(0), total = 0;
    for (TermId t : queries[i].terms) {
      shortest = std::min<std::uint64_t>(shortest, shard.term(t).df_shard);
      total += shard.term(t).df_shard;
    }
    return params.mode == Mode::kOr ? total : (queries[i].terms.empty() ? 0 : shortest);
  };
  if (m.options.cost_order) {
    std::vector<std::uint64_t> c(queries.size());
    for (std::size_t i : gpu_queries) c[i] = cost(i);
    std::stable_sort(gpu_queries.begin(), gpu_queries.end(),
                     [&](std::size_t a, std::size_t b) { return c[a] > c[b]; });
  }

  auto finish = [&](Lane& lane) {
    lane.after_d2h.synchronize();
    lane.stats.h2d_ms = lane.after_h2d.ms_since(lane.start);
    lane.stats.kernel_ms = lane.after_kernels.ms_since(lane.after_h2d);
    lane.stats.d2h_ms = lane.after_d2h.ms_since(lane.after_kernels);
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t nq = lane.query_index.size();
    const auto* qout = reinterpret_cast<const QueryOut*>(lane.host_out.data());
    const auto* hits = reinterpret_cast<const HitOut*>(
        lane.host_out.data() + align_up(nq * sizeof(QueryOut), 16));
    const auto ranks = shard.global_ranks();
    auto to_ranked = [&](const HitOut* h, std::uint32_t n) {
      std::vector<RankedDoc> v(n);
      for (std::uint32_t j = 0; j < n; ++j)
        v[j] = RankedDoc{h[j].score, ranks[h[j].doc], m.shard_id, h[j].doc};
      return v;
    };
    for (std::size_t slot = 0; slot < nq; ++slot) {
      const QueryOut& o = qout[slot];
      const HitOut* h = hits + slot * 2 * std::size_t(k);
      ShardResult& r = out[lane.query_index[slot]];
      r = ShardResult{};
      r.counters.postings_decoded = o.postings_decoded;
      r.counters.blocks_decoded = o.blocks_decoded;
      r.counters.blocks_skipped = o.blocks_skipped;
      r.counters.docs_scored = o.docs_scored;
      r.counters.early_terminations = o.early_terminated ? 1 : 0;
      r.hits = to_ranked(h, std::min(o.num_hits, k));
      if (params.mode == Mode::kAndOr) {
        r.and_matches = o.and_matches;
        if (o.and_matches < k) r.or_hits = to_ranked(h + k, std::min(o.num_or_hits, k));
      }
      lane.stats.postings_bytes_read += o.bytes_read;
      lane.stats.postings_decoded += o.postings_decoded;
      lane.stats.early_termination_rounds_saved += o.rounds_saved;
    }
    lane.stats.unpack_ms = ms_since(t0);
    batches_.push_back(lane.stats);
    lane.pending = false;
  };

  const unsigned batch_size = m.options.batch_size;
  std::size_t launch = 0;
  for (std::size_t begin = 0; begin < gpu_queries.size(); begin += batch_size, ++launch) {
    Lane& lane = m.lanes[launch % 2];
    if (lane.pending) finish(lane);
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t end = std::min(gpu_queries.size(), begin + batch_size);
    lane.query_index.assign(gpu_queries.begin() + std::ptrdiff_t(begin),
                            gpu_queries.begin() + std::ptrdiff_t(end));
    const std::size_t nq = lane.query_index.size();
    std::size_t nt = 0;
    unsigned max_terms = 1;
    for (std::size_t i : lane.query_index) {
      nt += queries[i].terms.size();
      max_terms = std::max<unsigned>(max_terms, unsigned(queries[i].terms.size()));
    }
    // One input buffer: queries, terms, AND orders.
    const std::size_t terms_at = align_up(nq * sizeof(QueryDesc), 16);
    const std::size_t order_at = terms_at + align_up(nt * sizeof(TermDesc), 16);
    lane.in_bytes = order_at + align_up(nt, 16);
    const std::size_t hits_at = align_up(nq * sizeof(QueryOut), 16);
    lane.out_bytes = hits_at + nq * 2 * std::size_t(k) * sizeof(HitOut);
    lane.host_in.reserve(lane.in_bytes);
    lane.host_out.reserve(lane.out_bytes);
    lane.dev_in.reserve(lane.in_bytes);
    lane.dev_out.reserve(lane.out_bytes);
    lane.term_cache.reserve(std::max<std::size_t>(nt, 1) * 2 * (2 * kValuesPerBlockHost + 1));
    auto* qd = reinterpret_cast<QueryDesc*>(lane.host_in.data());
    auto* td = reinterpret_cast<TermDesc*>(lane.host_in.data() + terms_at);
    auto* od = reinterpret_cast<std::uint8_t*>(lane.host_in.data() + order_at);
    std::uint32_t term_pos = 0;
    std::vector<std::uint32_t> dfs;
    std::vector<unsigned> order;
    for (std::size_t slot = 0; slot < nq; ++slot) {
      const Query& q = queries[lane.query_index[slot]];
      const unsigned T = unsigned(q.terms.size());
      dfs.clear();
      for (TermId t : q.terms) dfs.push_back(shard.term(t).df_global);
      const QueryWeights w = make_query_weights(params.scoring, params.alpha, ip.bm25,
                                                ip.collection.num_docs, dfs);
      const auto factor = gs_bound_factor(w, ip.gs_alpha);
      QueryDesc& d = qd[slot];
      d.term_begin = term_pos;
      d.num_terms = T;
      d.static_weight = w.static_weight;
      d.gs_bound_factor = factor ? *factor : -1.0;
      d.and_order_begin = term_pos;
      d.slot = std::uint32_t(slot);
      order.resize(T);
      std::iota(order.begin(), order.end(), 0u);
      std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
        return shard.term(q.terms[a]).df_shard < shard.term(q.terms[b]).df_shard;
      });
      d.shortest = T > 0 ? order[0] : 0;
      for (unsigned j = 0; j < T; ++j) {
        const TermInfo& ti = shard.term(q.terms[j]);
        td[term_pos + j] = TermDesc{ti.first_block, ti.num_blocks, ti.df_shard,
                                    w.term_weight[j], ti.max_impact, 0};
        od[term_pos + j] = std::uint8_t(order[j]);
      }
      std::uint32_t flags = 0;
      switch (params.mode) {
        case Mode::kAnd: flags = kRunAnd; break;
        case Mode::kOr: flags = kRunOr; break;
        case Mode::kAndOr: flags = kRunAnd | kRunOr | kOrOnlyIfAndShort; break;
      }
      if (pruned) flags |= kEarlyTerminate | kPruneBlockMax;
      // Block-max WAND over the threads of a block (paper 002) where its per-thread top-k and
      // cursors fit; other queries take the windowed OR kernel with block-max pruning.
      if (bmw && params.mode != Mode::kAnd && k <= kBmwMaxK && T <= kBmwMaxTerms)
        flags |= kOrByThreads;
      d.flags = flags;
      term_pos += T;
    }
    lane.num_terms = nt;
    lane.stats = GpuBatchStats{};
    lane.stats.queries = std::uint32_t(nq);
    lane.stats.pack_ms = ms_since(t0);
    lane.stats.h2d_bytes = lane.in_bytes;
    lane.stats.d2h_bytes = lane.out_bytes;

    const cudaStream_t s = lane.stream.get();
    lane.start.record(s);
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(lane.dev_in.data(), lane.host_in.data(), lane.in_bytes,
                                         cudaMemcpyHostToDevice, s));
    GPUSEARCH_CUDA_CHECK(cudaMemsetAsync(lane.dev_out.data(), 0, nq * sizeof(QueryOut), s));
    lane.after_h2d.record(s);
    BatchPointers bp{};
    bp.queries = reinterpret_cast<const QueryDesc*>(lane.dev_in.data());
    bp.terms = reinterpret_cast<const TermDesc*>(lane.dev_in.data() + terms_at);
    bp.and_order = reinterpret_cast<const std::uint8_t*>(lane.dev_in.data() + order_at);
    bp.out = reinterpret_cast<QueryOut*>(lane.dev_out.data());
    bp.hits = reinterpret_cast<HitOut*>(lane.dev_out.data() + hits_at);
    bp.term_cache = lane.term_cache.data();
    bp.num_queries = std::uint32_t(nq);
    bp.k = k;
    bp.max_terms = max_terms;
    const ShardView& view = m.image->view();
    if (params.mode != Mode::kOr) launch_and_kernel(view, bp, s);
    if (params.mode != Mode::kAnd) {
      launch_or_kernel(view, bp, m.options.or_window, s);
      if (bmw) launch_bmw_kernel(view, bp, m.options.bmw_threads, s);
    }
    lane.after_kernels.record(s);
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(lane.host_out.data(), lane.dev_out.data(),
                                         lane.out_bytes, cudaMemcpyDeviceToHost, s));
    lane.after_d2h.record(s);
    lane.pending = true;
  }
  // Finish in launch order.
  for (std::size_t i = 0; i < 2; ++i) {
    Lane& lane = m.lanes[(launch + i) % 2];
    if (lane.pending) finish(lane);
  }
}

nlohmann::json GpuEngine::stats() const {
  GpuBatchStats total;
  for (const auto& b : batches_) {
    total.queries += b.queries;
    total.pack_ms += b.pack_ms;
    total.h2d_ms += b.h2d_ms;
    total.kernel_ms += b.kernel_ms;
    total.d2h_ms += b.d2h_ms;
    total.unpack_ms += b.unpack_ms;
    total.h2d_bytes += b.h2d_bytes;
    total.d2h_bytes += b.d2h_bytes;
    total.postings_bytes_read += b.postings_bytes_read;
    total.postings_decoded += b.postings_decoded;
    total.early_termination_rounds_saved += b.early_termination_rounds_saved;
  }
  cudaDeviceProp prop{};
  std::string device_name = "?";
  if (impl_ && cudaGetDeviceProperties(&prop, impl_->device) == cudaSuccess) device_name = prop.name;
  nlohmann::json j = {
      {"engine", "gpu"},
      {"device", impl_ ? impl_->device : -1},
      {"device_name", device_name},
      {"algorithm", impl_ ? impl_->options.algorithm : ""},
      {"batch_size", impl_ ? impl_->options.batch_size : 0},
      {"or_window", impl_ ? impl_->options.or_window : 0},
      {"bmw_threads", impl_ ? impl_->options.bmw_threads : 0},
      {"shard_image", impl_ ? impl_->image->to_json() : nlohmann::json()},
      {"batches", batches_.size()},
      {"queries", total.queries},
      {"pack_ms", total.pack_ms},
      {"h2d_ms", total.h2d_ms},
      {"kernel_ms", total.kernel_ms},
      {"d2h_ms", total.d2h_ms},
      {"unpack_ms", total.unpack_ms},
      {"h2d_bytes", total.h2d_bytes},
      {"d2h_bytes", total.d2h_bytes},
      {"postings_bytes_read", total.postings_bytes_read},
      {"postings_decoded", total.postings_decoded},
      {"early_termination_rounds_saved", total.early_termination_rounds_saved},
      {"postings_read_gb_per_s",
       total.kernel_ms > 0 ? double(total.postings_bytes_read) / (total.kernel_ms * 1e6) : 0.0}};
  nlohmann::json per_batch = nlohmann::json::array();
  for (std::size_t i = 0; i < batches_.size() && i < 256; ++i) {
    const auto& b = batches_[i];
    per_batch.push_back({{"queries", b.queries}, {"pack_ms", b.pack_ms}, {"h2d_ms", b.h2d_ms},
                         {"kernel_ms", b.kernel_ms}, {"d2h_ms", b.d2h_ms},
                         {"unpack_ms", b.unpack_ms}, {"h2d_bytes", b.h2d_bytes},
                         {"d2h_bytes", b.d2h_bytes},
                         {"postings_bytes_read", b.postings_bytes_read}});
  }
  j["per_batch"] = std::move(per_batch);
  return j;
}

}  // namespace gpusearch::gpu
