#include "isn/ranker/gpu_ranker_backend.hpp"

#if defined(GPUSEARCH_HAVE_CUDA)

#include "common/error.hpp"
#include "gpu/ranker_engine.hpp"

namespace gpusearch::ranker {

namespace {

class GpuResident final : public ResidentRanker {
 public:
  explicit GpuResident(std::unique_ptr<gpu::DeviceRanker> d) : d_(std::move(d)) {}
  const CompiledRanker& compiled() const override { return d_->compiled(); }
  const gpu::DeviceRanker& device() const { return *d_; }

 private:
  std::unique_ptr<gpu::DeviceRanker> d_;
};

RankingTimes convert(const gpu::RankerTimings& t) {
  RankingTimes r;
  r.total_ms = t.wall_ms;
  r.copy_ms = t.copy_ms();
  r.features_ms = t.features_ms;
  r.model_ms = t.transforms_ms + t.net_ms;
  r.bytes_to_device = t.bytes_in;
  return r;
}

class GpuBackend final : public RankerBackend {
 public:
  explicit GpuBackend(int device) : engine_(device) {}
  std::string_view name() const override { return "gpu"; }
  std::unique_ptr<ResidentRanker> make_resident(std::shared_ptr<const CompiledRanker> r) override {
    return std::make_unique<GpuResident>(engine_.upload(std::move(r)));
  }
  RankingTimes rank(const ResidentRanker& r, const FeatureBatch& batch,
                    std::span<float> scores) override {
    return convert(engine_.rank(static_cast<const GpuResident&>(r).device(), batch, scores));
  }
  RankingTimes score_rows(const ResidentRanker& r, std::span<const float> rows, std::size_t stride,
                          std::span<float> scores) override {
    return convert(
        engine_.score_rows(static_cast<const GpuResident&>(r).device(), rows, stride, scores));
  }
  bool attach_streams(std::span<const std::uint8_t> data) override {
    try {
      engine_.attach_streams(data.data(), data.size());
      return true;
    } catch (const Error& e) {  // no room: requests carry their streams instead
      attach_failure_ = e.what();
      return false;
    }
  }
  nlohmann::json stats() const override {
    nlohmann::json j = engine_.stats();
    if (!attach_failure_.empty()) j["attach_streams_failure"] = attach_failure_;
    return j;
  }

 private:
  gpu::GpuRankerEngine engine_;
  std::string attach_failure_;
};

}  // namespace

bool gpu_ranker_device_present() {
  return gpu::ranker_device_count() > 0;
}

std::unique_ptr<RankerBackend> make_gpu_ranker_backend(int device) {
  if (!gpu_ranker_device_present()) throw Error("--ranker-backend gpu: no CUDA device is present");
  return std::make_unique<GpuBackend>(device);
}

}  // namespace gpusearch::ranker

#endif  // GPUSEARCH_HAVE_CUDA
