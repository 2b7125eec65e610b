// The GPU engine's construction (options checked, the shard or the list cache uploaded, the
// threshold seeds built), its setters and its statistics; the pipeline is in gpu_engine.cpp.
#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "gpu/gpu_engine_impl.hpp"
#include "gpu/kernel_limits.hpp"
#include "gpu/query_kernels.hpp"

namespace gpusearch::gpu {

namespace {

// The decoded layout where asked for, or (auto) where it takes at most half of the memory the
// device has free once the compressed image is in: the rest stays for the batch buffers and
// for other ISNs sharing the device.
PostingLayout choose_posting_layout(const ShardIndex& shard, const GpuEngineOptions& options) {
  if (options.posting_layout == "compressed") return PostingLayout::kCompressed;
  if (options.posting_layout == "decoded") return PostingLayout::kDecoded;
  std::size_t free_bytes = 0, total_bytes = 0;
  GPUSEARCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::uint64_t compressed = shard.postings().size_bytes() + shard.num_docs() * 24ull;
  const std::uint64_t after = free_bytes > compressed ? free_bytes - compressed : 0;
  return decoded_layout_bytes(shard) <= after / 2 ? PostingLayout::kDecoded
                                                  : PostingLayout::kCompressed;
}
}  // namespace

std::vector<std::string> gpu_algorithms() { return {"auto", "window", "bmw", "exhaustive", "warp"}; }

bool gpu_available() { return cuda_device_count() > 0; }
int gpu_device_count() { return cuda_device_count(); }

GpuEngine::GpuEngine(const ShardIndex& shard, std::uint32_t shard_id, GpuEngineOptions options) {
  if (options.algorithm.empty()) options.algorithm = "auto";
  const auto algos = gpu_algorithms();
  if (std::find(algos.begin(), algos.end(), options.algorithm) == algos.end())
    throw InputError("--algorithm", 0,
                     fmt::format("unknown GPU algorithm '{}' (auto, window, bmw, exhaustive, warp)",
                                 options.algorithm));
  if (options.batch_size == 0) throw InputError("--gpu-batch", 0, "must be at least 1");
  if (options.bmw_threads < 32 || options.bmw_threads > 256 || options.bmw_threads % 32 != 0)
    throw InputError("--bmw-threads", 0, "must be a multiple of 32 in [32, 256]");
  if (options.or_window < 256 || options.or_window > 65536 || options.or_window % 128 != 0)
    throw InputError("--or-window", 0, "must be a multiple of 128 in [256, 65536]");
  if (options.or_warp_window < 128 || options.or_warp_window > 32768 ||
      options.or_warp_window % 128 != 0)
    throw InputError("--or-warp-window", 0, "must be a multiple of 128 in [128, 32768]");
  if (options.or_threads < 32 || options.or_threads > 1024 ||
      (options.or_threads & (options.or_threads - 1)) != 0)
    throw InputError("--or-threads", 0, "must be 32, 64, 128, 256, 512 or 1024");
  if (options.topk_memory != "auto" && options.topk_memory != "shared" &&
      options.topk_memory != "global")
    throw InputError("--topk-memory", 0,
                     fmt::format("unknown '{}' (auto, shared, global)", options.topk_memory));
  if (options.posting_layout != "auto" && options.posting_layout != "compressed" &&
      options.posting_layout != "decoded")
    throw InputError("--posting-layout", 0,
                     fmt::format("unknown '{}' (auto, compressed, decoded)", options.posting_layout));
  if (options.list_cache && options.posting_layout == "decoded")
    throw InputError("--posting-layout", 0,
                     "the decoded layout needs the whole shard resident (not with --gpu-mem)");
  if (options.max_segments_per_query < 1 || options.max_segments_per_query > kMaxSegmentsPerQuery)
    throw InputError("--gpu-max-segments", 0,
                     fmt::format("must be in [1, {}]", kMaxSegmentsPerQuery));
  if (!gpu_available()) throw CudaError("no CUDA device is available to the GPU engine");
  if (options.device >= cuda_device_count())
    throw InputError("--gpu", 0, fmt::format("device {} does not exist ({} present)",
                                             options.device, cuda_device_count()));
  if (options.doc_end == 0) options.doc_end = shard.num_docs();
  if (options.doc_begin >= options.doc_end || options.doc_end > shard.num_docs())
    throw InputError("--gpus-per-isn", 0,
                     fmt::format("docID range [{}, {}) of a shard of {} documents: each GPU's "
                                 "range must be non-empty",
                                 options.doc_begin, options.doc_end, shard.num_docs()));
  // A range engine's rows go to the NCCL merge, and a list-cache engine's truncated queries to
  // the CPU post-processor: the two paths have not been joined yet.
  if (options.list_cache && (options.doc_begin != 0 || options.doc_end != shard.num_docs()))
    throw InputError("--gpu-mem", 0,
                     "a list cache with several GPUs per ISN (--gpus-per-isn) is not supported yet");
  int device = options.device;
  if (device < 0) GPUSEARCH_CUDA_CHECK(cudaGetDevice(&device));
  // Before Impl: its lanes' streams and events belong to the device current when they are
  // created, and a stream of another device fails the lane's first copy or memset (an ISN on
  // GPU 1 built on a thread whose current device was 0: cudaErrorInvalidValue, H200 x2).
  ScopedDevice scoped(device);
  impl_ = std::make_unique<Impl>(shard, shard_id, options);
  impl_->device = device;
  impl_->doc_begin = options.doc_begin;
  impl_->doc_end = options.doc_end;
  configure_query_kernels();
  impl_->multiprocessors = device_multiprocessors();
  if (options.list_cache) {
    impl_->cache = std::make_unique<DeviceListCache>(
        shard, DeviceListCacheOptions{options.cache_bytes, options.batch_bytes});
    const unsigned hw = std::max(2u, std::thread::hardware_concurrency());
    impl_->post = std::make_unique<PostProcessingThreads>(
        options.postprocess_threads > 0 ? options.postprocess_threads : hw - 1);
  } else {
    impl_->image = std::make_unique<DeviceShard>(shard, choose_posting_layout(shard, options));
  }
  // A segment's rows of a range engine go to the NCCL merge and a list-cache engine's to the
  // post-processor's finality test: both keep the unseeded path (a seed is safe for them too,
  // but their callers have not been measured with shorter rows).
  if (options.threshold_seed && !options.list_cache && options.doc_begin == 0 &&
      options.doc_end == shard.num_docs()) {
    impl_->seeds = std::make_unique<KthImpactTable>(shard);
    impl_->annotations["threshold_seed"] = {{"table_bytes", impl_->seeds->bytes()},
                                            {"build_seconds", impl_->seeds->build_seconds()}};
  }
}

void GpuEngine::clear_stats() {
  batches_.clear();
  impl_->counters = ListCacheCounters{};
  impl_->observe_seconds = 0;
  impl_->call_plan_seconds = impl_->call_finish_seconds = 0;
  impl_->call_launch_plan_seconds = impl_->call_list_batches_seconds = 0;
  impl_->call_buffers_seconds = 0;
  if (impl_->post) impl_->post_busy_at_clear = impl_->post->busy_seconds();
}

void GpuEngine::annotate_stats(const std::string& key, nlohmann::json value) {
  impl_->annotations[key] = std::move(value);
}

bool GpuEngine::has_list_cache() const { return impl_->cache != nullptr; }

const ListCacheCounters& GpuEngine::list_cache_counters() const { return impl_->counters; }

void GpuEngine::set_post_processor(PostProcessor post_processor) {
  impl_->post_processor = std::move(post_processor);
}

CacheChange GpuEngine::apply_cache_plan(std::span<const CachedList> lists,
                                        std::uint64_t max_copy_bytes) {
  if (!impl_->cache)
    throw InputError("--cache-plan", 0, "the GPU engine runs without a list cache (--gpu-mem)");
  ScopedDevice scoped(impl_->device);
  std::lock_guard lock(impl_->call_mutex);  // not beside a call or the cache swapper
  return impl_->cache->apply(lists, max_copy_bytes);
}

void GpuEngine::set_online_policy(std::shared_ptr<OnlineCachePolicy> policy,
                                  std::uint64_t max_copy_bytes, CacheSwapTiming swap) {
  if (!impl_->cache)
    throw InputError("--cache-online", 0, "the GPU engine runs without a list cache (--gpu-mem)");
  impl_->swapper.reset();  // a previous policy's (it applies nothing more)
  impl_->online = std::move(policy);
  impl_->online_max_copy_bytes = max_copy_bytes;
  // The gate's baseline: a plan goes in only when it pays against what the cache holds.
  if (impl_->online) impl_->online->report_cache(impl_->cache->directory().held_lists());
  if (impl_->online && swap == CacheSwapTiming::kGaps) {
    Impl* m = impl_.get();
    impl_->swapper = std::make_unique<CacheSwapper>(
        *impl_->online, impl_->call_mutex, [m](std::vector<CachedList>&& plan) {
          ScopedDevice scoped(m->device);  // the swapper's own thread
          m->apply_online_plan(std::move(plan), /*in_gap=*/true);
        });
  }
}

void GpuEngine::settle_cache_swaps() const {
  if (impl_->swapper) impl_->swapper->settle();
}

GpuEngine::~GpuEngine() {
  if (!impl_) return;
  impl_->swapper.reset();  // its thread writes to the cache: stopped first
  try {
    ScopedDevice scoped(impl_->device);
    impl_.reset();  // streams, buffers and the image are freed on their device
  } catch (...) {
  }
}

void GpuEngine::set_host_engine(std::unique_ptr<QueryEngine> engine) {
  impl_->host_engine = std::move(engine);
}

const void* GpuEngine::search_into_device_rows(std::span<const Query> queries,
                                               const SearchParams& params) {
  if (queries.size() > impl_->options.batch_size || params.k == 0)
    throw Error(fmt::format("search_into_device_rows: {} queries at k {} (one launch of at most {} "
                            "queries, k > 0)",
                            queries.size(), params.k, impl_->options.batch_size));
  for (const Query& q : queries)
    if (q.terms.size() > kMaxGpuTerms)
      throw Error(fmt::format("search_into_device_rows: a query of {} terms (at most {})",
                              q.terms.size(), kMaxGpuTerms));
  std::vector<ShardResult> unused(queries.size());  // the answers stay on the device
  impl_->rows_on_device = true;
  impl_->device_rows = nullptr;
  try {
    search(queries, params, unused);
  } catch (...) {
    impl_->rows_on_device = false;
    throw;
  }
  impl_->rows_on_device = false;
  return impl_->device_rows;
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
    total.and_segments += b.and_segments;
    total.or_segments += b.or_segments;
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
      {"or_threads", impl_ ? impl_->options.or_threads : 0},
      {"or_warp_window", impl_ ? impl_->options.or_warp_window : 0},
      {"topk_memory", impl_ ? impl_->options.topk_memory : std::string("auto")},
      {"or_stage_blocks", impl_ ? impl_->options.or_stage_blocks : false},
      {"bmw_threads", impl_ ? impl_->options.bmw_threads : 0},
      {"blocks_per_sm", impl_ ? impl_->options.blocks_per_sm : 0},
      {"max_segments_per_query", impl_ ? impl_->options.max_segments_per_query : 0},
      {"and_segments", total.and_segments},
      {"or_segments", total.or_segments},
      {"shard_image", impl_ && impl_->image ? impl_->image->to_json() : nlohmann::json()},
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
      {"call_plan_seconds", impl_ ? impl_->call_plan_seconds : 0.0},
      {"call_finish_seconds", impl_ ? impl_->call_finish_seconds : 0.0},
      {"call_launch_plan_seconds", impl_ ? impl_->call_launch_plan_seconds : 0.0},
      {"call_list_batches_seconds", impl_ ? impl_->call_list_batches_seconds : 0.0},
      {"call_buffers_seconds", impl_ ? impl_->call_buffers_seconds : 0.0},
      {"postings_read_gb_per_s",
       total.kernel_ms > 0 ? double(total.postings_bytes_read) / (total.kernel_ms * 1e6) : 0.0}};
  nlohmann::json per_batch = nlohmann::json::array();
  for (std::size_t i = 0; i < batches_.size() && i < 256; ++i) {
    const auto& b = batches_[i];
    per_batch.push_back({{"queries", b.queries}, {"pack_ms", b.pack_ms}, {"h2d_ms", b.h2d_ms},
                         {"kernel_ms", b.kernel_ms}, {"d2h_ms", b.d2h_ms},
                         {"unpack_ms", b.unpack_ms}, {"h2d_bytes", b.h2d_bytes},
                         {"d2h_bytes", b.d2h_bytes},
                         {"and_segments", b.and_segments}, {"or_segments", b.or_segments},
                         {"shipped_bytes", b.shipped_bytes}, {"post_processed", b.post_processed},
                         {"postings_bytes_read", b.postings_bytes_read},
                         {"or_window", b.or_window}, {"or_threads", b.or_threads}, {"or_warp_window", b.or_warp_window},
                         {"timeline_ms",
                          {{"host_pack_begin", b.timeline.host_pack_begin},
                           {"host_launched", b.timeline.host_launched},
                           {"device_h2d_begin", b.timeline.device_h2d_begin},
                           {"device_kernels_begin", b.timeline.device_kernels_begin},
                           {"device_kernels_end", b.timeline.device_kernels_end},
                           {"device_d2h_end", b.timeline.device_d2h_end},
                           {"host_wait_begin", b.timeline.host_wait_begin},
                           {"host_wait_end", b.timeline.host_wait_end},
                           {"host_unpack_end", b.timeline.host_unpack_end}}}});
  }
  j["per_batch"] = std::move(per_batch);
  if (impl_)
    for (const auto& [key, value] : impl_->annotations.items()) j[key] = value;
  if (impl_ && impl_->cache) {
    // The cache swapper changes the device cache and appends to online_changes under it.
    std::lock_guard lock(impl_->call_mutex);
    ListCacheCounters c = impl_->counters;
    c.post_processing_seconds = impl_->post->busy_seconds() - impl_->post_busy_at_clear;
    nlohmann::json lc = c.to_json();
    lc["device"] = impl_->cache->to_json();
    lc["postprocess_threads"] = impl_->post->threads();
    if (impl_->online) {
      lc["online_policy"] = impl_->online->stats();
      lc["online_changes"] = impl_->online_changes;
      lc["online_swaps"] = impl_->swapper ? impl_->swapper->stats()
                                          : nlohmann::json{{"swap", "calls"}};
      lc["online_swaps"]["calls_waited"] = impl_->calls_waited_for_swap;
      lc["online_swaps"]["call_wait_seconds"] = impl_->call_wait_seconds;
      lc["online_observe_seconds"] = impl_->observe_seconds;
    }
    j["list_cache"] = std::move(lc);
  }
  return j;
}

}  // namespace gpusearch::gpu
