// GPU failure falls back to the CPU (paper 004): if the primary engine throws, the batch is
// answered again by the fallback engine, and so is every later batch. No query is lost; the
// switch is reported once (stderr) and visible in stats.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/query_engine.hpp"

namespace gpusearch {

class FallbackEngine final : public QueryEngine {
 public:
  // make_fallback is called once, at the first failure (so a CPU engine is only built if needed).
  FallbackEngine(std::unique_ptr<QueryEngine> primary,
                 std::function<std::unique_ptr<QueryEngine>()> make_fallback,
                 std::string report_prefix = "gpusearch");
  std::string_view name() const override;
  bool runs_batch_in_parallel() const override {
    return (fallback_ ? fallback_ : primary_)->runs_batch_in_parallel();
  }
  nlohmann::json stats() const override { return (fallback_ ? fallback_ : primary_)->stats(); }
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;
  // The primary's start-up work; a failure is reported and left to the first batch (which then
  // fails over as any failing batch does).
  void prepare(const SearchParams& params) override;

  bool fallback_active() const { return fallback_ != nullptr; }
  // The primary engine until a failure switched to the fallback; nullptr after.
  QueryEngine* active_primary() { return fallback_ ? nullptr : primary_.get(); }
  // Switches to the fallback engine, as a throw from the primary's search() does: for failures
  // reported outside search() (the ISN's batches pipelined through its scheduler).
  void fail_over(const std::string& reason);
  const std::string& failure() const { return failure_; }  // what the primary threw
  std::uint64_t batches_on_fallback() const { return batches_on_fallback_; }

 private:
  std::unique_ptr<QueryEngine> primary_, fallback_;
  std::function<std::unique_ptr<QueryEngine>()> make_fallback_;
  std::string report_prefix_, failure_;
  std::uint64_t batches_on_fallback_ = 0;
};

// Test hook (--inject-engine-fault-at-batch): makes any engine fail, as a failing GPU would:
// throws on the n-th batch it runs, counting from 1, and on every later one; 0 never throws.
// (The GPU engine fails for real instead, through a failing CUDA call.)
class FaultInjectingEngine final : public QueryEngine {
 public:
  FaultInjectingEngine(std::unique_ptr<QueryEngine> inner, std::uint64_t fail_at_batch)
      : inner_(std::move(inner)), fail_at_batch_(fail_at_batch) {}
  std::string_view name() const override { return inner_->name(); }
  bool runs_batch_in_parallel() const override { return inner_->runs_batch_in_parallel(); }
  void search(std::span<const Query> queries, const SearchParams& params,
              std::span<ShardResult> out) override;
  void prepare(const SearchParams& params) override { inner_->prepare(params); }

 private:
  std::unique_ptr<QueryEngine> inner_;
  std::uint64_t fail_at_batch_;
  std::uint64_t batches_ = 0;
};

}  // namespace gpusearch
