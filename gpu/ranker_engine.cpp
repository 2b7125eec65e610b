#include "gpu/ranker_engine.hpp"

#include <cublas_v2.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "gpu/cuda_util.hpp"
#include "gpu/ranker_kernels.hpp"

namespace gpusearch::gpu {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void cublas_check(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(fmt::format("{} failed at {}:{}: {} ({})", what, file, line,
                              cublasGetStatusString(status), int(status)));
}
#define GPUSEARCH_CUBLAS_CHECK(call) cublas_check((call), #call, __FILE__, __LINE__)

class CublasHandle {
 public:
  CublasHandle() { GPUSEARCH_CUBLAS_CHECK(cublasCreate(&h_)); }
  ~CublasHandle() {
    if (h_) cublasDestroy(h_);
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

constexpr std::size_t kSectionAlign = 256;
std::size_t align_up(std::size_t n) {
  return (n + kSectionAlign - 1) / kSectionAlign * kSectionAlign;
}

// Where each part of a feature-extraction request lies in the one buffer that is copied. With
// the streams resident on the device, the request carries none.
// The feature walk's units: a warp per stream, or per segment of a stream longer than
// segment_bytes (those units also listed apart, for the second launch).
struct FeatureUnits {
  std::vector<FeatureUnit> all, segmented;
  std::uint32_t states = 0, segmented_streams = 0;
  void plan(const ranker::FeatureBatch& b, std::uint32_t segment_bytes) {
    all.clear(), segmented.clear();
    states = 0, segmented_streams = 0;
    for (std::uint32_t d = 0; d < b.docs.size(); ++d) {
      const std::uint32_t bytes = b.docs[d].stream_bytes;
      const std::uint32_t n = bytes > segment_bytes ? (bytes + segment_bytes - 1) / segment_bytes : 1;
      if (n == 1) {
        all.push_back({d, 0, 1, 0});
        continue;
      }
      for (std::uint32_t s = 0; s < n; ++s) {
        all.push_back({d, s, n, states + s});
        segmented.push_back(all.back());
      }
      states += n;
      ++segmented_streams;
    }
  }
};

struct RequestLayout {
  std::size_t queries = 0, terms = 0, idf = 0, docs = 0, units = 0, segmented = 0, streams = 0,
              bytes = 0;
  RequestLayout(const ranker::FeatureBatch& b, const FeatureUnits& u, bool streams_resident) {
    terms = align_up(queries + b.queries.size() * sizeof(ranker::FeatureQuery));
    idf = align_up(terms + b.terms.size() * sizeof(std::uint32_t));
    docs = align_up(idf + b.idf.size() * sizeof(float));
    units = align_up(docs + b.docs.size() * sizeof(ranker::FeatureDoc));
    segmented = align_up(units + u.all.size() * sizeof(FeatureUnit));
    streams = align_up(segmented + u.segmented.size() * sizeof(FeatureUnit));
    bytes = streams + (streams_resident             ? 0
                       : b.external_streams == nullptr ? b.streams.size()
                                                       : b.stream_bytes());
  }
};

// A forward index kept on the device.
struct AttachedStreams {
  const std::uint8_t* host = nullptr;
  std::size_t bytes = 0;
  DeviceBuffer<std::uint8_t> device;
};

template <typename T>
void upload_vector(DeviceBuffer<T>& d, const std::vector<T>& h) {
  d.resize(h.size());
  if (!h.empty()) {
    GPUSEARCH_CUDA_CHECK(
        cudaMemcpy(d.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    // A pageable cudaMemcpy may return before its DMA lands; the kernels run on non-blocking
    // streams, not ordered after it.
    GPUSEARCH_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  }
}

}  // namespace

struct DeviceRanker::Buffers {
  DeviceBuffer<ranker::ModelInputTransform> transforms;
  DeviceBuffer<ranker::TreeNode> nodes;
  // Per layer: weights [outputs][inputs] in double (the products sum in double: see model()),
  // bias in float.
  std::vector<DeviceBuffer<double>> weights;
  std::vector<DeviceBuffer<float>> bias;
};

DeviceRanker::DeviceRanker() : buffers_(std::make_unique<Buffers>()) {}
DeviceRanker::~DeviceRanker() = default;

std::uint64_t DeviceRanker::device_bytes() const {
  std::uint64_t b = buffers_->transforms.bytes() + buffers_->nodes.bytes();
  for (const auto& w : buffers_->weights) b += w.bytes();
  for (const auto& w : buffers_->bias) b += w.bytes();
  return b;
}

struct GpuRankerEngine::Impl {
  int device = 0;
  std::string device_name;
  CudaStream stream;
  CublasHandle blas;
  CudaEvent start, copied_in, features_done, transforms_done, net_done, copied_out;
  PinnedBuffer<std::uint8_t> request;
  DeviceBuffer<std::uint8_t> d_request;
  DeviceBuffer<float> rows, inputs, scores;
  DeviceBuffer<double> inputs_d, h[2];
  PinnedBuffer<float> host_out;
  std::vector<AttachedStreams> attached;
  FeatureOptions feature_options;
  FeatureUnits units;
  DeviceBuffer<std::uint8_t> segment_states;
  DeviceBuffer<std::uint32_t> segment_sync;
  // Totals for stats().
  std::uint64_t calls = 0, docs = 0, uploads = 0, upload_bytes = 0;
  RankerTimings total;

  void add(const RankerTimings& t) {
    total.wall_ms += t.wall_ms, total.pack_ms += t.pack_ms, total.copy_in_ms += t.copy_in_ms,
        total.features_ms += t.features_ms, total.transforms_ms += t.transforms_ms,
        total.net_ms += t.net_ms, total.copy_out_ms += t.copy_out_ms, total.bytes_in += t.bytes_in,
        total.bytes_out += t.bytes_out;
  }

  // The device copy of the batch's referenced streams, or null.
  const AttachedStreams* resident(const ranker::FeatureBatch& b) const {
    if (!b.external_streams) return nullptr;
    for (const AttachedStreams& a : attached)
      if (a.host == b.external_streams && a.bytes == b.external_bytes) return &a;
    return nullptr;
  }

  // The request into pinned memory (referenced streams that are not resident gathered into it,
  // their offsets rewritten), then one copy to the device.
  void copy_request(const ranker::FeatureBatch& b, const RequestLayout& L, bool streams_resident,
                    RankerTimings& t) {
    const auto t0 = Clock::now();
    request.reserve(L.bytes);
    std::uint8_t* p = request.data();
    const auto put = [&](std::size_t at, const void* src, std::size_t n) {
      if (n) std::memcpy(p + at, src, n);
    };
    put(L.queries, b.queries.data(), b.queries.size() * sizeof(ranker::FeatureQuery));
    put(L.terms, b.terms.data(), b.terms.size() * sizeof(std::uint32_t));
    put(L.idf, b.idf.data(), b.idf.size() * sizeof(float));
    put(L.units, units.all.data(), units.all.size() * sizeof(FeatureUnit));
    put(L.segmented, units.segmented.data(), units.segmented.size() * sizeof(FeatureUnit));
    if (streams_resident || !b.external_streams) {
      put(L.docs, b.docs.data(), b.docs.size() * sizeof(ranker::FeatureDoc));
      if (!streams_resident) put(L.streams, b.streams.data(), b.streams.size());
    } else {
      auto* docs = reinterpret_cast<ranker::FeatureDoc*>(p + L.docs);
      std::size_t at = 0;
      for (std::size_t i = 0; i < b.docs.size(); ++i) {
        docs[i] = b.docs[i];
        docs[i].stream_offset = at;
        put(L.streams + at, b.external_streams + b.docs[i].stream_offset, b.docs[i].stream_bytes);
        at += b.docs[i].stream_bytes;
      }
    }
    t.pack_ms = ms_since(t0);
    t.streams_resident = streams_resident;
    d_request.reserve(L.bytes);
    start.record(stream.get());
    if (L.bytes > 0)
      GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(d_request.data(), request.data(), L.bytes,
                                           cudaMemcpyHostToDevice, stream.get()));
    copied_in.record(stream.get());
    t.bytes_in = L.bytes;
  }

  void extract(const ranker::FeatureBatch& b, const RequestLayout& L,
               const AttachedStreams* on_device, RankerTimings& t) {
    const std::uint8_t* base = d_request.data();
    rows.reserve(b.docs.size() * ranker::kFeatureStride);
    FeatureLaunch f;
    f.params = b.params;
    f.queries = reinterpret_cast<const ranker::FeatureQuery*>(base + L.queries);
    f.terms = reinterpret_cast<const std::uint32_t*>(base + L.terms);
    f.idf = reinterpret_cast<const float*>(base + L.idf);
    f.docs = reinterpret_cast<const ranker::FeatureDoc*>(base + L.docs);
    f.streams = on_device ? on_device->device.data() : base + L.streams;
    f.rows = rows.data();
    f.units = reinterpret_cast<const FeatureUnit*>(base + L.units);
    f.num_units = std::uint32_t(units.all.size());
    f.segmented_units = reinterpret_cast<const FeatureUnit*>(base + L.segmented);
    f.num_segmented_units = std::uint32_t(units.segmented.size());
    f.segment_bytes = feature_options.segment_bytes;
    if (units.states > 0) {
      segment_states.reserve(std::size_t(units.states) * feature_segment_state_bytes());
      segment_sync.reserve(2 * std::size_t(units.states));
      GPUSEARCH_CUDA_CHECK(cudaMemsetAsync(segment_sync.data(), 0,
                                           2 * std::size_t(units.states) * sizeof(std::uint32_t),
                                           stream.get()));
      f.segment_states = segment_states.data();
      f.segment_sync = segment_sync.data();
    }
    launch_extract_features(f, feature_options.shuffle_decode, stream.get());
    features_done.record(stream.get());
    t.feature_units = units.all.size();
    t.segmented_streams = units.segmented_streams;
  }

  // Transforms, then each layer: H = X W^T as one GEMM over every row (3.5.1, Figure 3.12),
  // then bias and activation. Row-major X (n x in) is column-major in x n with ld in, and W
  // (out x in, row-major) column-major in x out: H^T = W X^T is gemm(T, N) with m = out, n = n
  // and k = in, written column-major out x n, which is row-major H (n x out) again.
  // The products are double (cublasDgemm; Hopper's FP64 tensor cores), each sum rounded to float
  // before its activation, as the CPU twin does: float sums in two different orders differ by
  // float rounding of the summands, which is far beyond 1e-5 of a score where they cancel.
  const float* model(const DeviceRanker& r, const float* d_rows, std::size_t stride,
                     std::uint32_t n) {
    const ranker::CompiledRanker& c = r.compiled();
    const std::uint32_t padded = c.padded_inputs();
    if (n == 0) {  // nothing to rank; the events still mark the (empty) stages
      transforms_done.record(stream.get());
      net_done.record(stream.get());
      return nullptr;
    }
    inputs_d.reserve(std::size_t(n) * padded);
    launch_transforms(r.buffers().transforms.data(), padded, r.buffers().nodes.data(), d_rows,
                      stride, n, inputs_d.data(), stream.get());
    transforms_done.record(stream.get());
    const double* x = inputs_d.data();
    scores.reserve(n);
    for (std::size_t l = 0; l < c.layers.size(); ++l) {
      const ranker::NetLayer& layer = c.layers[l];
      DeviceBuffer<double>& out = h[l % 2];
      out.reserve(std::size_t(n) * layer.outputs);
      const double one = 1.0, zero = 0.0;
      GPUSEARCH_CUBLAS_CHECK(cublasDgemm(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(layer.outputs),
                                         int(n), int(layer.inputs), &one,
                                         r.buffers().weights[l].data(), int(layer.inputs), x,
                                         int(layer.inputs), &zero, out.data(), int(layer.outputs)));
      const bool last = l + 1 == c.layers.size();
      launch_bias_activation(out.data(), r.buffers().bias[l].data(), layer.outputs, n,
                             layer.activation, last ? scores.data() : nullptr, stream.get());
      x = out.data();
    }
    net_done.record(stream.get());
    return scores.data();
  }

  void fill_gpu_times(RankerTimings& t, bool features, bool with_model) const {
    t.copy_in_ms = copied_in.ms_since(start);
    const CudaEvent* before_model = &copied_in;
    if (features) {
      t.features_ms = features_done.ms_since(copied_in);
      before_model = &features_done;
    }
    const CudaEvent* last = before_model;
    if (with_model) {
      t.transforms_ms = transforms_done.ms_since(*before_model);
      t.net_ms = net_done.ms_since(transforms_done);
      last = &net_done;
    }
    t.copy_out_ms = copied_out.ms_since(*last);
  }

  void copy_back(const float* d, std::size_t count, RankerTimings& t) {
    host_out.reserve(count);
    if (count)
      GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(host_out.data(), d, count * sizeof(float),
                                           cudaMemcpyDeviceToHost, stream.get()));
    copied_out.record(stream.get());
    copied_out.synchronize();
    t.bytes_out = count * sizeof(float);
  }
};

GpuRankerEngine::GpuRankerEngine(int device) {
  if (device >= 0) {
    const int n = cuda_device_count();
    if (device >= n)
      throw CudaError(fmt::format("GPU ranker: device {} requested, {} present", device, n));
    GPUSEARCH_CUDA_CHECK(cudaSetDevice(device));
  }
  impl_ = std::make_unique<Impl>();
  GPUSEARCH_CUDA_CHECK(cudaGetDevice(&impl_->device));
  cudaDeviceProp prop{};
  GPUSEARCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, impl_->device));
  impl_->device_name = prop.name;
  GPUSEARCH_CUBLAS_CHECK(cublasSetStream(impl_->blas.get(), impl_->stream.get()));
  // No TF32 or other reduced-precision modes.
  GPUSEARCH_CUBLAS_CHECK(cublasSetMathMode(impl_->blas.get(), CUBLAS_DEFAULT_MATH));
}

GpuRankerEngine::~GpuRankerEngine() = default;

int GpuRankerEngine::device() const {
  return impl_->device;
}

void GpuRankerEngine::set_feature_options(const FeatureOptions& options) {
  if (options.segment_bytes < FeatureOptions::kMinSegmentBytes)
    throw Error(fmt::format("GPU ranker: feature segments of {} bytes (at least {})",
                            options.segment_bytes, FeatureOptions::kMinSegmentBytes));
  impl_->feature_options = options;
}

const FeatureOptions& GpuRankerEngine::feature_options() const {
  return impl_->feature_options;
}

void GpuRankerEngine::attach_streams(const std::uint8_t* host, std::size_t bytes) {
  if (streams_attached(host, bytes) || bytes == 0) return;
  ScopedDevice on(impl_->device);
  AttachedStreams a;
  a.host = host;
  a.bytes = bytes;
  a.device.resize(bytes);  // throws CudaError when it does not fit
  GPUSEARCH_CUDA_CHECK(cudaMemcpy(a.device.data(), host, bytes, cudaMemcpyHostToDevice));
  GPUSEARCH_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));  // the DMA landed (as above)
  impl_->attached.push_back(std::move(a));
}

bool GpuRankerEngine::streams_attached(const std::uint8_t* host, std::size_t bytes) const {
  for (const AttachedStreams& a : impl_->attached)
    if (a.host == host && a.bytes == bytes) return true;
  return false;
}

std::unique_ptr<DeviceRanker> GpuRankerEngine::upload(
    std::shared_ptr<const ranker::CompiledRanker> ranker) {
  ScopedDevice on(impl_->device);
  std::unique_ptr<DeviceRanker> r(new DeviceRanker());
  upload_vector(r->buffers_->transforms, ranker->transforms);
  upload_vector(r->buffers_->nodes, ranker->nodes);
  for (const ranker::NetLayer& l : ranker->layers) {
    r->buffers_->weights.emplace_back();
    r->buffers_->bias.emplace_back();
    upload_vector(r->buffers_->weights.back(), std::vector<double>(l.weights.begin(), l.weights.end()));
    upload_vector(r->buffers_->bias.back(), l.bias);
  }
  r->compiled_ = std::move(ranker);
  ++impl_->uploads;
  impl_->upload_bytes += r->device_bytes();
  return r;
}

RankerTimings GpuRankerEngine::rank(const DeviceRanker& r, const ranker::FeatureBatch& batch,
                                    std::span<float> scores) {
  const auto t0 = Clock::now();
  if (scores.size() != batch.num_docs())
    throw Error(
        fmt::format("GPU rank: {} scores for {} documents", scores.size(), batch.num_docs()));
  if (r.compiled().feature_stride != ranker::kFeatureStride)
    throw Error(fmt::format("GPU rank: ranker {} is not compiled for feature-extraction rows",
                            r.compiled().name));
  ScopedDevice on(impl_->device);
  Impl& e = *impl_;
  RankerTimings t;
  const AttachedStreams* on_device = e.resident(batch);
  const auto t_plan = Clock::now();
  e.units.plan(batch, e.feature_options.segment_bytes);
  const double plan_ms = ms_since(t_plan);
  const RequestLayout layout(batch, e.units, on_device != nullptr);
  e.copy_request(batch, layout, on_device != nullptr, t);
  t.pack_ms += plan_ms;
  e.extract(batch, layout, on_device, t);
  const float* d_scores =
      e.model(r, e.rows.data(), ranker::kFeatureStride, std::uint32_t(batch.num_docs()));
  e.copy_back(d_scores, scores.size(), t);
  if (!scores.empty()) std::memcpy(scores.data(), e.host_out.data(), scores.size() * sizeof(float));
  e.fill_gpu_times(t, true, true);
  t.wall_ms = ms_since(t0);
  ++e.calls;
  e.docs += batch.num_docs();
  e.add(t);
  return t;
}

RankerTimings GpuRankerEngine::score_rows(const DeviceRanker& r, std::span<const float> rows,
                                          std::size_t stride, std::span<float> scores) {
  const auto t0 = Clock::now();
  if (stride < r.compiled().feature_stride || rows.size() != scores.size() * stride)
    throw Error(fmt::format("GPU score_rows: {} floats for {} rows of {} (ranker {} reads {})",
                            rows.size(), scores.size(), stride, r.compiled().name,
                            r.compiled().feature_stride));
  ScopedDevice on(impl_->device);
  Impl& e = *impl_;
  RankerTimings t;
  const auto t_pack = Clock::now();
  e.request.reserve(rows.size() * sizeof(float));
  if (!rows.empty()) std::memcpy(e.request.data(), rows.data(), rows.size() * sizeof(float));
  t.pack_ms = ms_since(t_pack);
  e.rows.reserve(rows.size());
  e.start.record(e.stream.get());
  if (!rows.empty())
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(e.rows.data(), e.request.data(),
                                         rows.size() * sizeof(float), cudaMemcpyHostToDevice,
                                         e.stream.get()));
  e.copied_in.record(e.stream.get());
  t.bytes_in = rows.size() * sizeof(float);
  const float* d_scores = e.model(r, e.rows.data(), stride, std::uint32_t(scores.size()));
  e.copy_back(d_scores, scores.size(), t);
  if (!scores.empty()) std::memcpy(scores.data(), e.host_out.data(), scores.size() * sizeof(float));
  e.fill_gpu_times(t, false, true);
  t.wall_ms = ms_since(t0);
  ++e.calls;
  e.docs += scores.size();
  e.add(t);
  return t;
}

RankerTimings GpuRankerEngine::extract_features(const ranker::FeatureBatch& batch,
                                                std::span<float> rows) {
  const auto t0 = Clock::now();
  if (rows.size() != batch.num_docs() * ranker::kFeatureStride)
    throw Error("GPU extract_features: the output does not hold a row per candidate");
  ScopedDevice on(impl_->device);
  Impl& e = *impl_;
  RankerTimings t;
  const AttachedStreams* on_device = e.resident(batch);
  const auto t_plan = Clock::now();
  e.units.plan(batch, e.feature_options.segment_bytes);
  const double plan_ms = ms_since(t_plan);
  const RequestLayout layout(batch, e.units, on_device != nullptr);
  e.copy_request(batch, layout, on_device != nullptr, t);
  t.pack_ms += plan_ms;
  e.extract(batch, layout, on_device, t);
  e.copy_back(e.rows.data(), rows.size(), t);
  if (!rows.empty()) std::memcpy(rows.data(), e.host_out.data(), rows.size() * sizeof(float));
  e.fill_gpu_times(t, true, false);
  t.wall_ms = ms_since(t0);
  return t;
}

void GpuRankerEngine::transform_rows(const DeviceRanker& r, std::span<const float> rows,
                                     std::size_t stride, std::span<float> inputs) {
  const std::size_t n = stride ? rows.size() / stride : 0;
  if (stride < r.compiled().feature_stride || rows.size() != n * stride ||
      inputs.size() != n * r.compiled().padded_inputs())
    throw Error("GPU transform_rows: buffer sizes do not match");
  ScopedDevice on(impl_->device);
  Impl& e = *impl_;
  e.rows.reserve(rows.size());
  e.inputs.reserve(inputs.size());
  if (!rows.empty())
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(e.rows.data(), rows.data(), rows.size() * sizeof(float),
                                         cudaMemcpyHostToDevice, e.stream.get()));
  launch_transforms(r.buffers().transforms.data(), r.compiled().padded_inputs(),
                    r.buffers().nodes.data(), e.rows.data(), stride, std::uint32_t(n),
                    e.inputs.data(), e.stream.get());
  if (!inputs.empty())
    GPUSEARCH_CUDA_CHECK(cudaMemcpyAsync(inputs.data(), e.inputs.data(),
                                         inputs.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                         e.stream.get()));
  e.stream.synchronize();
}

nlohmann::json GpuRankerEngine::stats() const {
  const Impl& e = *impl_;
  const RankerTimings& t = e.total;
  const double gpu = t.gpu_ms();
  std::uint64_t attached_bytes = 0;
  for (const AttachedStreams& a : e.attached) attached_bytes += a.bytes;
  return {{"device", e.device},
          {"device_name", e.device_name},
          {"resident_stream_bytes", attached_bytes},
          {"calls", e.calls},
          {"docs", e.docs},
          {"uploads", e.uploads},
          {"upload_bytes", e.upload_bytes},
          {"wall_ms", t.wall_ms},
          {"pack_ms", t.pack_ms},
          {"copy_in_ms", t.copy_in_ms},
          {"features_ms", t.features_ms},
          {"transforms_ms", t.transforms_ms},
          {"net_ms", t.net_ms},
          {"copy_out_ms", t.copy_out_ms},
          {"copy_share_of_gpu_time", gpu > 0 ? t.copy_ms() / gpu : 0.0},
          {"bytes_in", t.bytes_in},
          {"bytes_out", t.bytes_out}};
}

int ranker_device_count() {
  return cuda_device_count();
}

}  // namespace gpusearch::gpu
