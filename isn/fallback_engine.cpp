#include "isn/fallback_engine.hpp"

#include <iostream>

#include <fmt/format.h>

namespace gpusearch {

FallbackEngine::FallbackEngine(std::unique_ptr<QueryEngine> primary,
                               std::function<std::unique_ptr<QueryEngine>()> make_fallback,
                               std::string report_prefix)
    : primary_(std::move(primary)),
      make_fallback_(std::move(make_fallback)),
      report_prefix_(std::move(report_prefix)) {}

std::string_view FallbackEngine::name() const {
  return fallback_ ? fallback_->name() : primary_->name();
}

void FallbackEngine::search(std::span<const Query> queries, const SearchParams& params,
                            std::span<ShardResult> out) {
  if (!fallback_) {
    try {
      primary_->search(queries, params, out);
      return;
    } catch (const std::exception& e) {
      fail_over(e.what());
    }
  }
  // The primary may have written part of `out` before it threw: start clean.
  for (ShardResult& r : out) r = ShardResult{};
  fallback_->search(queries, params, out);
  ++batches_on_fallback_;
}

void FallbackEngine::prepare(const SearchParams& params) {
  if (fallback_) return;
  try {
    primary_->prepare(params);
  } catch (const std::exception& e) {
    std::cerr << fmt::format(
        "{}: engine {}: start-up preparation failed ({}); the first batch tries again\n",
        report_prefix_, primary_->name(), e.what());
  }
}

void FallbackEngine::fail_over(const std::string& reason) {
  if (fallback_) return;
  failure_ = reason;
  fallback_ = make_fallback_();
  std::cerr << fmt::format(
      "{}: engine {} failed ({}); this and every later batch runs on the "
      "{} engine\n",
      report_prefix_, primary_->name(), failure_, fallback_->name());
}

void FaultInjectingEngine::search(std::span<const Query> queries, const SearchParams& params,
                                  std::span<ShardResult> out) {
  ++batches_;
  if (fail_at_batch_ > 0 && batches_ >= fail_at_batch_)
    throw Error(
        fmt::format("injected engine fault at batch {} (--inject-engine-fault-at-batch)", batches_));
  inner_->search(queries, params, out);
}

}  // namespace gpusearch
