#include "common/list_cache.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include <nlohmann/json.hpp>

#include "common/scoring.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

DeviceBlockNumbering::DeviceBlockNumbering(const ShardIndex& shard)
    : first_slot_(shard.num_terms(), 0) {
  const std::uint32_t n = shard.num_terms();
  std::vector<TermId> by_first(n);
  std::iota(by_first.begin(), by_first.end(), TermId(0));
  bool sorted = true;
  for (TermId t = 1; t < n && sorted; ++t)
    sorted = shard.term(t - 1).first_block <= shard.term(t).first_block;
  if (!sorted)
    std::stable_sort(by_first.begin(), by_first.end(), [&](TermId a, TermId b) {
      return shard.term(a).first_block < shard.term(b).first_block;
    });
  std::uint64_t slot = 0;
  for (TermId t : by_first) {
    first_slot_[t] = slot;
    slot += std::uint64_t(shard.term(t).num_blocks) + 1;  // its blocks and the spare slot
  }
  num_slots_ = slot;
}

std::vector<DocId> DeviceBlockNumbering::slot_last_docid(const ShardIndex& shard) const {
  std::vector<DocId> out(num_slots_, 0);
  const auto last = shard.block_last_docid();
  for (TermId t = 0; t < shard.num_terms(); ++t) {
    const TermInfo& ti = shard.term(t);
    if (ti.num_blocks == 0) continue;
    std::copy_n(last.begin() + std::ptrdiff_t(ti.first_block), ti.num_blocks,
                out.begin() + std::ptrdiff_t(first_slot_[t]));
    out[first_slot_[t] + ti.num_blocks] = last[ti.first_block + ti.num_blocks - 1];
  }
  return out;
}

std::vector<float> DeviceBlockNumbering::slot_block_max(const ShardIndex& shard) const {
  std::vector<float> out(num_slots_, 0.0f);
  const auto max = shard.block_max_impact();
  for (TermId t = 0; t < shard.num_terms(); ++t) {
    const TermInfo& ti = shard.term(t);
    if (ti.num_blocks == 0) continue;
    std::copy_n(max.begin() + std::ptrdiff_t(ti.first_block), ti.num_blocks,
                out.begin() + std::ptrdiff_t(first_slot_[t]));
    out[first_slot_[t] + ti.num_blocks] = max[ti.first_block + ti.num_blocks - 1];
  }
  return out;
}

std::uint64_t list_prefix_words(const ShardIndex& shard, TermId t, std::uint32_t blocks) {
  const TermInfo& ti = shard.term(t);
  const auto offsets = shard.block_offsets();
  return offsets[ti.first_block + blocks] - offsets[ti.first_block];
}

void append_prefix_table_entries(const ShardIndex& shard, const DeviceBlockNumbering& numbering,
                                 TermId t, std::uint32_t blocks, std::uint64_t offset,
                                 std::vector<OffsetPatch>& out) {
  const TermInfo& ti = shard.term(t);
  const auto offsets = shard.block_offsets();
  const std::uint64_t base = offsets[ti.first_block];
  const std::uint64_t slot = numbering.first_slot(t);
  for (std::uint32_t j = 0; j <= blocks; ++j)
    out.push_back({slot + j, offset + (offsets[ti.first_block + j] - base)});
}

std::uint32_t ListBatch::available_blocks(const ListCacheDirectory& cache, TermId t) const {
  const std::uint32_t* shipped = shipped_blocks.find(t);
  return shipped ? *shipped : cache.cached_blocks(t);
}

DocId list_prefix_end(const ShardIndex& shard, TermId t, std::uint32_t available) {
  const TermInfo& ti = shard.term(t);
  if (available >= ti.num_blocks) return shard.num_docs();
  if (available == 0) return 0;
  return shard.block_last_docid()[ti.first_block + available - 1] + 1;
}

std::uint64_t ListBatch::region_bytes() const {
  if (shipped.empty()) return 0;
  return 4 * shipped_words + sizeof(OffsetPatch) * (patches.size() + restores.size()) +
         kShipAlignmentBytes;
}

void ListBatch::reset() {
  begin = end = 0;
  horizon.clear();
  shipped.clear();
  patches.clear();
  restores.clear();
  shipped_words = 0;
  blocks_hit = blocks_shipped = blocks_unavailable = 0;
  bytes_hit = bytes_shipped = bytes_unavailable = 0;
  truncated_queries = 0;
  shipped_blocks.clear();
}

std::vector<ListBatch> plan_list_batches(const ListCacheDirectory& cache,
                                         std::span<const Query> queries,
                                         std::span<const std::size_t> order,
                                         const ListBatchOptions& options,
                                         std::vector<ListBatch>* storage) {
  const ShardIndex& shard = cache.shard();
  const auto offsets = shard.block_offsets();
  const std::uint64_t capacity = options.ship_capacity_bytes;
  const std::size_t max_queries = std::max<std::size_t>(1, options.max_queries);
  std::vector<ListBatch> batches;
  auto fresh = [&] {
    if (!storage || storage->empty()) return ListBatch{};
    ListBatch b = std::move(storage->back());
    storage->pop_back();
    b.reset();
    return b;
  };
  ListBatch cur = fresh();
  std::vector<TermId> need;
  auto words_of = [&](TermId t, std::uint32_t blocks) -> std::uint64_t {
    return blocks == 0 ? 0 : list_prefix_words(shard, t, blocks);
  };
  // A shipped prefix costs its words and its table entries (the blocks and the end); a list
  // cached in part and shipped whole also the cache's entries written back after the batch.
  auto cost_of = [&](TermId t, std::uint32_t blocks) {
    const std::uint32_t cached = cache.cached_blocks(t);
    return 4 * words_of(t, blocks) +
           sizeof(OffsetPatch) * (std::uint64_t(blocks) + 1 + (cached > 0 ? cached + 1 : 0));
  };
  auto ship = [&](TermId t, std::uint32_t blocks) {
    const std::uint64_t words = words_of(t, blocks);
    const TermInfo& ti = shard.term(t);
    ShippedList s{t, blocks, {offsets[ti.first_block], words, cur.shipped_words}};
    append_prefix_table_entries(shard, cache.numbering(), t, blocks, cur.shipped_words, cur.patches);
    if (cache.cached_blocks(t) > 0)  // shipped whole over its cached prefix (ship_tails)
      if (const CacheEntry* e = cache.find(t))
        append_prefix_table_entries(shard, cache.numbering(), t, e->blocks, e->word_offset, cur.restores);
    cur.shipped.push_back(s);
    cur.shipped_blocks[t] = blocks;
    cur.shipped_words += words;
  };
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const Query& q = queries[order[pos]];
    auto lists_to_ship = [&] {
      need.clear();
      std::uint64_t bytes = 0;
      for (TermId t : q.terms) {
        const TermInfo& ti = shard.term(t);
        const std::uint32_t cached = cache.cached_blocks(t);
        if (ti.num_blocks == 0 || cur.shipped_blocks.contains(t)) continue;
        // Cached in part: the prefix as it is (paper 000), or the whole list with ship_tails.
        if (cached > 0 && (!options.ship_tails || cached >= ti.num_blocks)) continue;
        if (std::find(need.begin(), need.end(), t) != need.end()) continue;
        need.push_back(t);
        bytes += cost_of(t, ti.num_blocks);
      }
      return bytes;
    };
    // The region's bytes once `need` more bytes of lists are in (the alignment comes with the
    // first list).
    auto after = [&](std::uint64_t need) {
      if (need == 0) return cur.region_bytes();
      return cur.region_bytes() + need + (cur.shipped.empty() ? kShipAlignmentBytes : 0);
    };
    std::uint64_t need_bytes = lists_to_ship();
    const std::size_t in_batch = pos - cur.begin;
    if (in_batch > 0 && (in_batch >= max_queries || after(need_bytes) > capacity)) {
      cur.end = pos;
      batches.push_back(std::move(cur));
      cur = fresh();
      cur.begin = pos;
      need_bytes = lists_to_ship();
    }
    if (after(need_bytes) <= capacity) {
      for (TermId t : need) ship(t, shard.term(t).num_blocks);
    } else {
      // Alone in its batch and still too large: shorter lists whole, then what fits.
      std::stable_sort(need.begin(), need.end(), [&](TermId a, TermId b) {
        return shard.term(a).num_blocks < shard.term(b).num_blocks;
      });
      for (TermId t : need) {
        const std::uint64_t used = after(0) + (cur.shipped.empty() ? kShipAlignmentBytes : 0);
        const std::uint64_t room = capacity > used ? capacity - used : 0;
        // The longest prefix whose cost fits the room (cost grows with the blocks).
        std::uint32_t lo = 0, hi = shard.term(t).num_blocks;
        while (lo < hi) {
          const std::uint32_t mid = lo + (hi - lo + 1) / 2;
          if (cost_of(t, mid) <= room)
            lo = mid;
          else
            hi = mid - 1;
        }
        const std::uint32_t cached = cache.cached_blocks(t);
        if (lo > cached)
          ship(t, lo);
        else if (cached == 0)
          cur.shipped_blocks[t] = 0;  // nothing of it on the GPU: horizon 0
        // else: the cached prefix serves, as without ship_tails
      }
    }
    // The query's horizon and its hit counts.
    DocId horizon = shard.num_docs();
    for (TermId t : q.terms) {
      const TermInfo& ti = shard.term(t);
      if (ti.num_blocks == 0) continue;
      const bool shipped_here = cur.shipped_blocks.contains(t);
      const std::uint32_t available = cur.available_blocks(cache, t);
      const std::uint32_t cached = shipped_here ? 0 : cache.cached_blocks(t);
      const std::uint32_t shipped = shipped_here ? available : 0;
      horizon = std::min(horizon, list_prefix_end(shard, t, available));
      const std::uint64_t hit_words = words_of(t, cached);
      const std::uint64_t shipped_words = words_of(t, shipped);
      const std::uint64_t all_words =
          available >= ti.num_blocks ? hit_words + shipped_words : words_of(t, ti.num_blocks);
      cur.blocks_hit += cached;
      cur.blocks_shipped += shipped;
      cur.blocks_unavailable += ti.num_blocks - available;
      cur.bytes_hit += 4 * hit_words;
      cur.bytes_shipped += 4 * shipped_words;
      cur.bytes_unavailable += 4 * (all_words - hit_words - shipped_words);
    }
    cur.horizon.push_back(horizon);
    if (horizon < shard.num_docs()) ++cur.truncated_queries;
  }
  if (order.size() > cur.begin) {
    cur.end = order.size();
    batches.push_back(std::move(cur));
  } else if (storage) {
    storage->push_back(std::move(cur));
  }
  return batches;
}

void ListCacheCounters::add(const ListBatch& b) {
  queries += b.end - b.begin;
  truncated += b.truncated_queries;
  ++batches;
  blocks_hit += b.blocks_hit;
  blocks_shipped += b.blocks_shipped;
  blocks_unavailable += b.blocks_unavailable;
  bytes_hit += b.bytes_hit;
  bytes_shipped += b.bytes_shipped;
  bytes_unavailable += b.bytes_unavailable;
  bytes_shipped_deduplicated += 4 * b.shipped_words;
}

void ListCacheCounters::add(const ListCacheCounters& o) {
  queries += o.queries;
  truncated += o.truncated;
  post_processed += o.post_processed;
  cpu_only += o.cpu_only;
  batches += o.batches;
  blocks_hit += o.blocks_hit;
  blocks_shipped += o.blocks_shipped;
  blocks_unavailable += o.blocks_unavailable;
  bytes_hit += o.bytes_hit;
  bytes_shipped += o.bytes_shipped;
  bytes_unavailable += o.bytes_unavailable;
  bytes_shipped_deduplicated += o.bytes_shipped_deduplicated;
  post_processing_seconds += o.post_processing_seconds;
}

nlohmann::json ListCacheCounters::to_json() const {
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  return {{"queries", queries},
          {"batches", batches},
          {"truncated_queries", truncated},
          {"post_processed_queries", post_processed},
          {"post_processed_fraction", ratio(double(post_processed), double(queries))},
          {"cpu_only_queries", cpu_only},
          {"post_processing_seconds", post_processing_seconds},
          {"hit_rate_blocks", ratio(double(blocks_hit), double(blocks_hit + blocks_shipped))},
          {"hit_rate_bytes", ratio(double(bytes_hit), double(bytes_hit + bytes_shipped))},
          {"blocks_hit", blocks_hit},
          {"blocks_shipped", blocks_shipped},
          {"blocks_unavailable", blocks_unavailable},
          {"bytes_hit", bytes_hit},
          {"bytes_shipped", bytes_shipped},
          {"bytes_unavailable", bytes_unavailable},
          {"bytes_shipped_per_batch", ratio(double(bytes_shipped_deduplicated), double(batches))},
          {"bytes_shipped_total", bytes_shipped_deduplicated}};
}

bool prefix_answer_is_final(const ShardIndex& shard, const Query& query, const SearchParams& params,
                            DocId horizon, const ShardResult& prefix, double bound_scale) {
  if (horizon >= shard.num_docs() || query.terms.empty()) return true;
  const IndexParams& ip = shard.params();
  std::vector<std::uint32_t> dfs;
  for (TermId t : query.terms) dfs.push_back(shard.term(t).df_global);
  const QueryWeights w =
      make_query_weights(params.scoring, params.alpha, ip.bm25, ip.collection.num_docs, dfs);
  const auto factor = gs_bound_factor(w, ip.gs_alpha);
  const auto last = shard.block_last_docid();
  const auto block_max = shard.block_max_impact();
  // Block-max bound of a document at or past the horizon, per term present past it.
  bool all_have_rest = true, any_has_rest = false;
  double sum_rest = w.static_weight;  // PR' <= 1
  for (std::size_t i = 0; i < query.terms.size(); ++i) {
    const TermInfo& ti = shard.term(query.terms[i]);
    const auto* begin = last.data() + ti.first_block;
    const auto* end = begin + ti.num_blocks;
    const auto* rest = std::lower_bound(begin, end, horizon);  // first block reaching it
    if (rest == end) {
      all_have_rest = false;
      continue;
    }
    any_has_rest = true;
    float m = 0.0f;
    for (std::uint64_t b = std::uint64_t(rest - last.data()); b < ti.first_block + ti.num_blocks;
         ++b) {
      m = std::max(m, block_max[b]);
      if (m >= ti.max_impact) break;
    }
    sum_rest += w.term_weight[i] * double(m);
  }
  double bound = sum_rest;
  if (factor) bound = std::min(bound, *factor * double(shard.global_scores()[horizon]));
  bound *= (1.0 + kBoundSlack) * bound_scale;
  const double none = -std::numeric_limits<double>::infinity();
  const double and_bound = all_have_rest ? bound : none;
  const double or_bound = any_has_rest ? bound : none;
  auto beats = [&](const std::vector<RankedDoc>& hits, double later) {
    if (later == none) return true;  // no later document can match
    if (hits.size() < params.k || params.k == 0) return params.k == 0;
    double kth = std::numeric_limits<double>::infinity();
    for (const RankedDoc& h : hits) kth = std::min(kth, h.score);
    return kth > later;
  };
  switch (params.mode) {
    case Mode::kAnd:
      return beats(prefix.hits, and_bound);
    case Mode::kOr:
      return beats(prefix.hits, or_bound);
    case Mode::kAndOr:
      if (prefix.and_matches >= params.k) return beats(prefix.hits, and_bound);
      // Fewer than k AND matches so far: final only if no more can come, and then the OR
      // answer must be final too.
      return and_bound == none && beats(prefix.or_hits, or_bound);
  }
  return false;
}

}  // namespace gpusearch
