#include "isn/range_split_engine.hpp"

#include <cstring>

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include "common/error.hpp"
#include "gpu/topk_rows.hpp"

namespace gpusearch {

using gpu::RangeHit;
using gpu::RowMeta;

RangeSplitEngine::RangeSplitEngine(const ShardIndex& shard, std::uint32_t shard_id, unsigned ranges)
    : shard_(shard), shard_id_(shard_id), engine_(shard, shard_id) {
  if (ranges == 0 || ranges > gpu::kMaxRangesPerIsn)
    throw InputError(
        "--gpus-per-isn", 0,
        fmt::format("{} docID ranges: between 1 and {}", ranges, gpu::kMaxRangesPerIsn));
  first_doc_ = gpu::split_doc_ranges(shard.num_docs(), ranges);
  name_ = fmt::format("cpu-ranges{}", ranges);
}

void RangeSplitEngine::search(std::span<const Query> queries, const SearchParams& params,
                              std::span<ShardResult> out) {
  const unsigned g = ranges(), k = params.k;
  const unsigned nq = unsigned(queries.size());
  if (nq == 0) return;
  if (k == 0) {
    for (ShardResult& r : out) r = ShardResult{};
    return;
  }
  // Per range, two row sets as the GPUs would hold them: the mode's (and-or: AND) top-k, and
  // and-or's OR top-k (count 0 where the range did not need it).
  const std::uint64_t bytes = gpu::range_rows_bytes(nq, k);
  std::vector<std::vector<char>> rows(g, std::vector<char>(bytes)),
      or_rows(g, std::vector<char>(bytes));
  std::vector<std::vector<QueryCounters>> counters(g, std::vector<QueryCounters>(nq));
  std::vector<std::vector<std::uint8_t>> early(g, std::vector<std::uint8_t>(nq));
  auto pack = [&](char* base, unsigned q, const std::vector<RankedDoc>& hits,
                  std::uint64_t and_matches, std::uint32_t first) {
    auto* h = reinterpret_cast<RangeHit*>(base) + std::uint64_t(q) * k;
    const unsigned n = unsigned(std::min<std::size_t>(hits.size(), k));
    for (unsigned i = 0; i < n; ++i) h[i] = RangeHit{hits[i].score, hits[i].doc - first, 0};
    reinterpret_cast<RowMeta*>(base + std::uint64_t(nq) * k * sizeof(RangeHit))[q] =
        RowMeta{n, 0, and_matches};
  };
  // Each range is one GPU's work: the ranges, and the queries within each, run in parallel.
  tbb::parallel_for(std::size_t(0), std::size_t(g) * nq, [&](std::size_t i) {
    const unsigned r = unsigned(i / nq), q = unsigned(i % nq);
    const ShardResult res =
        engine_.search_range(queries[q], params, first_doc_[r], first_doc_[r + 1]);
    pack(rows[r].data(), q, res.hits, res.and_matches, first_doc_[r]);
    pack(or_rows[r].data(), q, res.or_hits, 0, first_doc_[r]);
    counters[r][q] = res.counters;
    early[r][q] = res.counters.early_terminations > 0;
  });
  // The lead's merge, one query at a time (a thread per query on the GPU).
  std::vector<const char*> row_ptrs(g), or_ptrs(g);
  for (unsigned r = 0; r < g; ++r) row_ptrs[r] = rows[r].data(), or_ptrs[r] = or_rows[r].data();
  std::vector<RangeHit> merged(k);
  auto unpack = [&](unsigned n, std::vector<RankedDoc>& into) {
    into.resize(n);
    for (unsigned i = 0; i < n; ++i)
      into[i] = RankedDoc{merged[i].score, shard_.global_ranks()[merged[i].doc], shard_id_,
                          merged[i].doc};
  };
  for (unsigned q = 0; q < nq; ++q) {
    ShardResult& r = out[q];
    r = ShardResult{};
    RowMeta meta{};
    gpu::merge_range_rows(row_ptrs.data(), first_doc_.data(), g, nq, k, q, merged.data(), &meta);
    unpack(meta.count, r.hits);
    if (params.mode == Mode::kAndOr) {
      r.and_matches = meta.and_matches;
      // Below k in total, every range was below k too, so each computed its OR rows.
      if (r.and_matches < k) {
        gpu::merge_range_rows(or_ptrs.data(), first_doc_.data(), g, nq, k, q, merged.data(), &meta);
        unpack(meta.count, r.or_hits);
      }
    }
    bool any_early = false;
    for (unsigned s = 0; s < g; ++s) {
      QueryCounters c = counters[s][q];
      c.early_terminations = 0;
      r.counters.add(c);
      any_early = any_early || early[s][q];
    }
    r.counters.early_terminations = any_early ? 1 : 0;
  }
}

}  // namespace gpusearch
