#include "gpu/multi_gpu_engine.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "common/reference_engine.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/nccl_topk_merge.hpp"
#include "gpu/query_kernels.hpp"
#include "gpu/topk_rows.hpp"

namespace gpusearch::gpu {

struct MultiGpuEngine::Impl {
  Impl(const ShardIndex& s, std::uint32_t id, std::vector<int> d, unsigned batch)
      : shard(s),
        shard_id(id),
        devices(std::move(d)),
        first_doc(split_doc_ranges(s.num_docs(), unsigned(devices.size()))),
        batch_size(batch) {}
  const ShardIndex& shard;
  std::uint32_t shard_id;
  std::vector<int> devices;
  std::vector<std::uint32_t> first_doc;  // G + 1 range boundaries
  unsigned batch_size;
  std::unique_ptr<NcclTopKMerge> merge;
  std::unique_ptr<QueryEngine> host_engine;
  std::vector<RangeHit> hits;
  std::vector<RowMeta> meta;
  std::uint64_t batches = 0, queries = 0, host_queries = 0;
  double range_seconds = 0, merge_seconds = 0;
};

MultiGpuEngine::MultiGpuEngine(const ShardIndex& shard, std::uint32_t shard_id,
                               std::vector<int> devices, GpuEngineOptions options,
                               MultiGpuSplit split)
    : split_(split) {
  if (devices.empty() || devices.size() > kMaxRangesPerIsn)
    throw InputError(
        "--gpus-per-isn", 0,
        fmt::format("{} GPUs per ISN: between 1 and {}", devices.size(), kMaxRangesPerIsn));
  if (shard.num_docs() < devices.size())
    throw InputError("--gpus-per-isn", 0,
                     fmt::format("{} GPUs for a shard of {} documents: each GPU's docID range "
                                 "must hold at least one",
                                 devices.size(), shard.num_docs()));
  // The NCCL communicator checks the device set (each GPU once, present on this machine)
  // before any shard image is uploaded.
  impl_ = std::make_unique<Impl>(shard, shard_id, devices, options.batch_size);
  if (split_ == MultiGpuSplit::kQueries) {
    // Every GPU the whole shard, as the one-GPU engine; no communicator (nothing is merged), but
    // each device once all the same (two engines on one GPU would only share it), checked before
    // any shard image is uploaded.
    devices = checked_isn_devices(std::move(devices));
    for (int device : devices) {
      GpuEngineOptions o = options;
      o.device = device;
      engines_.push_back(std::make_unique<GpuEngine>(shard, shard_id, o));
    }
    name_ = fmt::format("gpu-queries{}", devices.size());
    return;
  }
  impl_->merge = std::make_unique<NcclTopKMerge>(devices);
  for (std::size_t g = 0; g < devices.size(); ++g) {
    GpuEngineOptions o = options;
    o.device = devices[g];
    o.doc_begin = impl_->first_doc[g];
    o.doc_end = impl_->first_doc[g + 1];
    engines_.push_back(std::make_unique<GpuEngine>(shard, shard_id, o));
  }
  name_ = fmt::format("gpu-ranges{}", devices.size());
}

MultiGpuEngine::~MultiGpuEngine() = default;

void MultiGpuEngine::set_host_engine(std::unique_ptr<QueryEngine> engine) {
  impl_->host_engine = std::move(engine);
}

void MultiGpuEngine::search(std::span<const Query> queries, const SearchParams& params,
                            std::span<ShardResult> out) {
  Impl& m = *impl_;
  const unsigned k = params.k;
  const ShardIndex& shard = m.shard;
  std::vector<std::size_t> gpu_queries, host_queries;
  for (std::size_t i = 0; i < queries.size(); ++i)
    (queries[i].terms.size() <= kMaxGpuTerms ? gpu_queries : host_queries).push_back(i);
  if (!host_queries.empty()) {
    std::vector<Query> batch;
    for (std::size_t i : host_queries) batch.push_back(queries[i]);
    std::vector<ShardResult> results(batch.size());
    if (m.host_engine) {
      m.host_engine->search(batch, params, results);
    } else {
      ReferenceEngine ref(shard, m.shard_id);
      ref.search(batch, params, results);
    }
    for (std::size_t j = 0; j < host_queries.size(); ++j)
      out[host_queries[j]] = std::move(results[j]);
    m.host_queries += host_queries.size();
  }
  if (k == 0) {
    for (std::size_t i : gpu_queries) out[i] = ShardResult{};
    return;
  }
  // Cost order (paper 003), as the single-GPU engine does within a call: every range's engine
  // gets the same batches in the same order, so row q of each range is the same query.
  std::vector<std::uint64_t> cost(queries.size());
  for (std::size_t i : gpu_queries) {
    std::uint64_t shortest = ~std::uint64_t(0), total = 0;
    for (TermId t : queries[i].terms) {
      shortest = std::min<std::uint64_t>(shortest, shard.term(t).df_shard);
      total += shard.term(t).df_shard;
    }
    cost[i] = queries[i].terms.empty() ? 0 : params.mode == Mode::kOr ? total : shortest;
  }
  std::stable_sort(gpu_queries.begin(), gpu_queries.end(),
                   [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
  if (split_ == MultiGpuSplit::kQueries) {
    search_split_queries(queries, params, out, gpu_queries, cost);
    return;
  }

  const unsigned g = ranges();
  const std::vector<std::uint32_t> no_offsets(g, 0);  // the engines' rows hold shard docIDs
  const auto ranks = shard.global_ranks();
  const std::optional<GlobalRank> rank_base = shard.contiguous_rank_base();  // see ShardIndex
  std::vector<Query> batch;
  std::vector<const void*> rows(g);
  std::vector<std::exception_ptr> errors(g);
  for (std::size_t begin = 0; begin < gpu_queries.size(); begin += m.batch_size) {
    const std::size_t end = std::min(gpu_queries.size(), begin + m.batch_size);
    batch.clear();
    for (std::size_t j = begin; j < end; ++j) batch.push_back(queries[gpu_queries[j]]);
    const unsigned nq = unsigned(batch.size());
    // Each GPU answers the batch over its range, at the same time; the rows stay on the GPUs.
    const auto t0 = std::chrono::steady_clock::now();
    auto run_range = [&](unsigned r) {
      try {
        rows[r] = engines_[r]->search_into_device_rows(batch, params);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    };
    if (g == 1) {
      run_range(0);
    } else {
      std::vector<std::thread> threads;
      for (unsigned r = 0; r < g; ++r) threads.emplace_back(run_range, r);
      for (std::thread& t : threads) t.join();
    }
    for (std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(std::exchange(e, nullptr));
    const auto t1 = std::chrono::steady_clock::now();
    // Gathered on the lead GPU through NCCL, merged there, one copy back: 2 rows per query.
    m.merge->merge(rows, no_offsets, 2 * nq, k, m.hits, m.meta);
    m.range_seconds += std::chrono::duration<double>(t1 - t0).count();
    m.merge_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    auto to_ranked = [&](unsigned row, std::vector<RankedDoc>& into) {
      const RowMeta& meta = m.meta[row];
      if (meta.count > k)
        throw CudaError(
            fmt::format("multi-GPU engine: corrupt merged row {} of {}: {} hits for k {}", row,
                        2 * nq, meta.count, k));
      into.resize(meta.count);
      for (unsigned i = 0; i < meta.count; ++i) {
        const RangeHit& h = m.hits[std::size_t(row) * k + i];
        if (h.doc >= shard.num_docs())
          throw CudaError(fmt::format(
              "multi-GPU engine: corrupt merged row {} of {}: hit {} has docID {} in a shard of {} "
              "documents",
              row, 2 * nq, i, h.doc, shard.num_docs()));
        into[i] = RankedDoc{h.score, rank_base ? *rank_base + h.doc : ranks[h.doc], m.shard_id,
                            h.doc};
      }
    };
    for (unsigned slot = 0; slot < nq; ++slot) {
      ShardResult& r = out[gpu_queries[begin + slot]];
      r = ShardResult{};
      to_ranked(2 * slot, r.hits);
      if (params.mode == Mode::kAndOr) {
        r.and_matches = m.meta[2 * slot].and_matches;
        // Below k in all, every range was below k too, so each computed its OR rows.
        if (r.and_matches < k) to_ranked(2 * slot + 1, r.or_hits);
      }
    }
    ++m.batches;
    m.queries += nq;
  }
}

void MultiGpuEngine::search_split_queries(std::span<const Query> queries,
                                          const SearchParams& params, std::span<ShardResult> out,
                                          const std::vector<std::size_t>& order,
                                          const std::vector<std::uint64_t>& cost) {
  Impl& m = *impl_;
  const unsigned g = ranges();
  // Longest first to the GPU with the least cost so far (LPT): the GPUs finish together.
  std::vector<std::vector<std::size_t>> share(g);
  std::vector<std::uint64_t> load(g, 0);
  for (std::size_t i : order) {
    const unsigned to = unsigned(std::min_element(load.begin(), load.end()) - load.begin());
    share[to].push_back(i);
    load[to] += cost[i] + 1;  // + 1: a query costs something even with empty lists
  }
  std::vector<std::vector<Query>> batch(g);
  std::vector<std::vector<ShardResult>> results(g);
  for (unsigned r = 0; r < g; ++r) {
    batch[r].reserve(share[r].size());
    for (std::size_t i : share[r]) batch[r].push_back(queries[i]);
    results[r].resize(share[r].size());
  }
  std::vector<std::exception_ptr> errors(g);
  const auto t0 = std::chrono::steady_clock::now();
  auto run_share = [&](unsigned r) {
    try {
      if (!batch[r].empty()) engines_[r]->search(batch[r], params, results[r]);
    } catch (...) {
      errors[r] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (unsigned r = 1; r < g; ++r) threads.emplace_back(run_share, r);
  run_share(0);
  for (std::thread& t : threads) t.join();
  for (std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(std::exchange(e, nullptr));
  m.range_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (unsigned r = 0; r < g; ++r)
    for (std::size_t j = 0; j < share[r].size(); ++j) out[share[r][j]] = std::move(results[r][j]);
  ++m.batches;
  m.queries += order.size();
}

nlohmann::json MultiGpuEngine::stats() const {
  const Impl& m = *impl_;
  nlohmann::json per_range = nlohmann::json::array();
  for (std::size_t r = 0; r < engines_.size(); ++r) {
    nlohmann::json e = engines_[r]->stats();
    e.erase("per_batch");
    const bool whole = split_ == MultiGpuSplit::kQueries;  // every GPU the whole shard
    e["doc_begin"] = whole ? 0u : m.first_doc[r];
    e["doc_end"] = whole ? m.shard.num_docs() : m.first_doc[r + 1];
    per_range.push_back(std::move(e));
  }
  return {{"engine", name_},
          {"split", split_ == MultiGpuSplit::kQueries ? "queries" : "ranges"},
          {"devices", m.devices},
          {"batches", m.batches},
          {"queries", m.queries},
          {"host_queries", m.host_queries},
          {"range_seconds", m.range_seconds},
          {"merge_seconds", m.merge_seconds},
          {"nccl_bytes_received", m.merge ? m.merge->bytes_received() : std::uint64_t{0}},
          {"ranges", std::move(per_range)}};
}

}  // namespace gpusearch::gpu
