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

nlohmann::json CacheChange::to_json() const {
  return {{"lists_added", lists_added},       {"lists_removed", lists_removed},
          {"lists_shrunk", lists_shrunk},     {"lists_skipped", lists_skipped},
          {"bytes_copied", words_copied * 4}, {"lists_relocated", lists_relocated},
          {"bytes_relocated", words_relocated * 4}, {"rebuilt", rebuilt}};
}

std::vector<std::vector<RelocationPiece>> relocation_groups(
    std::span<const WordRelocation> relocations, std::uint64_t scratch_words,
    std::uint64_t max_piece_words, std::size_t max_pieces) {
  if (scratch_words == 0 || max_piece_words == 0 || max_pieces == 0)
    throw Error("list cache: relocation groups need a scratch region, pieces and a group size");
  std::vector<std::vector<RelocationPiece>> groups;
  std::vector<RelocationPiece> group;
  std::uint64_t used = 0;
  for (const WordRelocation& r : relocations) {
    if (r.from == r.to) continue;
    for (std::uint64_t done = 0; done < r.words;) {
      const std::uint64_t n = std::min({r.words - done, max_piece_words, scratch_words});
      if (used + n > scratch_words || group.size() == max_pieces) {
        groups.push_back(std::move(group));
        group.clear();
        used = 0;
      }
      group.push_back({r.from + done, r.to + done, used, n});
      used += n;
      done += n;
    }
  }
  if (!group.empty()) groups.push_back(std::move(group));
  return groups;
}

namespace {

std::uint64_t prefix_words(const ShardIndex& shard, TermId t, std::uint32_t blocks) {
  const TermInfo& ti = shard.term(t);
  const auto offsets = shard.block_offsets();
  return offsets[ti.first_block + blocks] - offsets[ti.first_block];
}

// Table entries of a list prefix placed at `offset`: its blocks' starts and the end of its last
// block (the next slot: a later block of the list, or the spare slot).
void append_prefix_entries(const ShardIndex& shard, const DeviceBlockNumbering& numbering, TermId t,
                           std::uint32_t blocks, std::uint64_t offset,
                           std::vector<OffsetPatch>& out) {
  const TermInfo& ti = shard.term(t);
  const auto offsets = shard.block_offsets();
  const std::uint64_t base = offsets[ti.first_block];
  const std::uint64_t slot = numbering.first_slot(t);
  for (std::uint32_t j = 0; j <= blocks; ++j)
    out.push_back({slot + j, offset + (offsets[ti.first_block + j] - base)});
}

}  // namespace

ListCacheDirectory::ListCacheDirectory(const ShardIndex& shard,
                                       const DeviceBlockNumbering& numbering,
                                       std::uint64_t capacity_bytes)
    : shard_(shard),
      numbering_(numbering),
      capacity_words_(capacity_bytes / 4),
      blocks_by_term_(shard.num_terms(), 0) {
  clear();
}

void ListCacheDirectory::refresh_blocks_by_term() {
  for (TermId t : terms_held_) blocks_by_term_[t] = 0;
  terms_held_.clear();
  terms_held_.reserve(entries_.size());
  for (const auto& [t, e] : entries_) {
    blocks_by_term_[t] = e.blocks;
    terms_held_.push_back(t);
  }
}

void ListCacheDirectory::clear() {
  entries_.clear();
  free_.clear();
  if (capacity_words_ > 0) free_[0] = capacity_words_;
  used_words_ = 0;
  cached_blocks_total_ = 0;
}

bool ListCacheDirectory::allocate(std::uint64_t words, std::uint64_t& offset) {
  if (words == 0) {
    offset = 0;
    return true;
  }
  for (auto it = free_.begin(); it != free_.end(); ++it) {  // first fit
    if (it->second < words) continue;
    offset = it->first;
    const std::uint64_t rest = it->second - words;
    free_.erase(it);
    if (rest > 0) free_[offset + words] = rest;
    used_words_ += words;
    return true;
  }
  return false;
}

void ListCacheDirectory::release(std::uint64_t offset, std::uint64_t words) {
  if (words == 0) return;
  used_words_ -= words;
  auto [it, inserted] = free_.emplace(offset, words);
  if (!inserted) throw Error("list cache: a region was freed twice");
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

void ListCacheDirectory::place(TermId t, std::uint32_t blocks, std::uint64_t offset,
                               CacheChange& change) {
  const std::uint64_t words = prefix_words(shard_, t, blocks);
  entries_[t] = CacheEntry{blocks, offset, words};
  cached_blocks_total_ += blocks;
  const auto offsets = shard_.block_offsets();
  change.copies.push_back({offsets[shard_.term(t).first_block], words, offset});
  change.words_copied += words;
  append_prefix_entries(shard_, numbering_, t, blocks, offset, change.patches);
}

CacheChange ListCacheDirectory::apply(std::span<const CachedList> target,
                                      std::uint64_t max_copy_bytes) {
  CacheChange change = apply_entries(target, max_copy_bytes);
  refresh_blocks_by_term();
  return change;
}

CacheChange ListCacheDirectory::apply_entries(std::span<const CachedList> target,
                                              std::uint64_t max_copy_bytes) {
  CacheChange change;
  // Where the region's lists sit on the device now: a rebuild moves them from there.
  const std::unordered_map<TermId, CacheEntry> held_before = entries_;
  std::unordered_map<TermId, std::uint32_t> want;
  for (const CachedList& l : target) {
    if (l.term >= shard_.num_terms())
      throw InputError("cache plan", 0, "term " + std::to_string(l.term) + " is not in the shard");
    const std::uint32_t blocks = std::min(l.blocks, shard_.term(l.term).num_blocks);
    if (blocks > 0) want[l.term] = blocks;
  }
  // Lists that left the plan (evicted below only for room), and prefixes that shrink in place
  // (their end entry stays right: the blocks are contiguous, so the next block's start is the
  // new last block's end).
  std::vector<TermId> stale;
  std::uint64_t stale_words = 0;
  for (auto& [t, e] : entries_) {
    const auto w = want.find(t);
    if (w == want.end()) {
      stale.push_back(t);
      stale_words += e.words;
      continue;
    }
    if (w->second < e.blocks) {
      const std::uint64_t words = prefix_words(shard_, t, w->second);
      release(e.word_offset + words, e.words - words);
      cached_blocks_total_ -= e.blocks - w->second;
      e.blocks = w->second;
      e.words = words;
      ++change.lists_shrunk;
    }
  }
  // The worst-ranked last: evicted first.
  std::sort(stale.begin(), stale.end(), [&](TermId a, TermId b) {
    const std::uint32_t ra = entries_.at(a).rank, rb = entries_.at(b).rank;
    return ra != rb ? ra < rb : a < b;
  });
  auto evict_last_stale = [&] {
    const auto it = entries_.find(stale.back());
    stale.pop_back();
    release(it->second.word_offset, it->second.words);
    cached_blocks_total_ -= it->second.blocks;
    stale_words -= it->second.words;
    entries_.erase(it);
    ++change.lists_removed;
  };
  // First fit, evicting stale lists until it fits (none where all of them would not do).
  auto allocate_evicting = [&](std::uint64_t words, std::uint64_t& offset) {
    if (allocate(words, offset)) return true;
    if (capacity_words_ - used_words_ + stale_words < words) return false;
    while (!stale.empty()) {
      evict_last_stale();
      if (allocate(words, offset)) return true;
    }
    return false;
  };
  // New and longer prefixes, most valuable first.
  std::uint64_t copy_words_left = max_copy_bytes / 4;
  std::uint64_t fragmented_words = 0;
  for (std::size_t rank = 0; rank < target.size(); ++rank) {
    const CachedList& l = target[rank];
    const auto w = want.find(l.term);
    if (w == want.end()) continue;
    const std::uint32_t blocks = w->second;
    const auto cur = entries_.find(l.term);
    const std::uint32_t have = cur == entries_.end() ? 0 : cur->second.blocks;
    if (cur != entries_.end()) cur->second.rank = std::uint32_t(rank);
    if (blocks <= have) continue;
    const std::uint64_t words = prefix_words(shard_, l.term, blocks);
    // The copy limit bounds a change's copies, but a change copies at least one list: a list
    // over the limit (at 1/50 of the postings, a sixteenth of the region is less than many a
    // frequent list) would otherwise never come in.
    if (words > copy_words_left && change.words_copied > 0) {
      ++change.lists_skipped;
      continue;
    }
    std::uint64_t offset = 0;
    bool placed = allocate_evicting(words, offset);
    if (!placed && have > 0) {
      // Room may open where the shorter prefix sits; if not, the shorter prefix comes back.
      const CacheEntry old = cur->second;
      release(old.word_offset, old.words);
      cached_blocks_total_ -= old.blocks;
      entries_.erase(cur);
      placed = allocate(words, offset);
      if (!placed) {
        std::uint64_t back = 0;
        allocate(old.words, back);  // the space just freed holds it
        if (back == old.word_offset) {
          entries_[l.term] = old;
          cached_blocks_total_ += old.blocks;
        } else {
          place(l.term, old.blocks, back, change);
          entries_[l.term].rank = std::uint32_t(rank);
        }
      }
    }
    if (!placed) {
      if (capacity_words_ - used_words_ >= words) fragmented_words += words;
      ++change.lists_skipped;
      continue;
    }
    if (have > 0 && entries_.count(l.term)) {
      const CacheEntry old = entries_[l.term];
      release(old.word_offset, old.words);
      cached_blocks_total_ -= old.blocks;
    }
    place(l.term, blocks, offset, change);
    entries_[l.term].rank = std::uint32_t(rank);
    copy_words_left -= std::min(copy_words_left, words);
    ++change.lists_added;
  }
  if (fragmented_words > capacity_words_ / 32)
    change = compact(target, want, held_before, max_copy_bytes);
  return change;
}

CacheChange ListCacheDirectory::compact(
    std::span<const CachedList> target, const std::unordered_map<TermId, std::uint32_t>& want,
    const std::unordered_map<TermId, CacheEntry>& held_before, std::uint64_t max_copy_bytes) {
  // What the compacted region holds: the wanted lists by priority while they fit, a list held
  // before (a prefix at least as long) kept, one not held copied while the copy limit lasts;
  // then, while room is left, lists held before that the plan left out, best ranked first.
  CacheChange change;
  change.rebuilt = true;
  struct Kept {
    TermId term;
    std::uint32_t blocks, rank;
    std::uint64_t old_offset;
  };
  std::vector<Kept> kept;
  std::vector<std::pair<TermId, std::uint32_t>> fresh;  // term, rank
  std::unordered_map<TermId, bool> decided;
  std::uint64_t total = 0, copy_words_left = max_copy_bytes / 4;
  const bool limit_copies = compaction_copy_limit_;
  for (std::size_t rank = 0; rank < target.size(); ++rank) {
    const TermId t = target[rank].term;
    const auto w = want.find(t);
    if (w == want.end() || decided[t]) continue;
    decided[t] = true;
    const std::uint64_t words = prefix_words(shard_, t, w->second);
    const auto old = held_before.find(t);
    const std::uint32_t held = old == held_before.end() ? 0 : old->second.blocks;
    if (held >= w->second && total + words <= capacity_words_) {
      kept.push_back({t, w->second, std::uint32_t(rank), old->second.word_offset});
      total += words;
      continue;
    }
    if (held < w->second && total + words <= capacity_words_ &&
        (words <= copy_words_left || fresh.empty() || !limit_copies)) {
      fresh.emplace_back(t, std::uint32_t(rank));
      total += words;
      copy_words_left -= std::min(copy_words_left, words);
      continue;
    }
    ++change.lists_skipped;
    // A longer prefix that cannot come in leaves the shorter one it had, where that fits.
    const std::uint32_t keep = std::min(held, w->second);
    if (keep > 0 && total + prefix_words(shard_, t, keep) <= capacity_words_) {
      kept.push_back({t, keep, std::uint32_t(rank), old->second.word_offset});
      total += prefix_words(shard_, t, keep);
    }
  }
  std::vector<std::pair<std::uint32_t, TermId>> left_out;  // rank, term
  for (const auto& [t, e] : held_before)
    if (!want.count(t)) left_out.emplace_back(e.rank, t);
  std::sort(left_out.begin(), left_out.end());
  for (const auto& [rank, t] : left_out) {
    const CacheEntry& e = held_before.at(t);
    if (total + e.words > capacity_words_) continue;
    kept.push_back({t, e.blocks, rank, e.word_offset});
    total += e.words;
  }
  // The kept lists slide down in their order (each lands at or below where it was, and ends at
  // or before where the next one starts); the fresh ones follow.
  std::sort(kept.begin(), kept.end(),
            [](const Kept& a, const Kept& b) { return a.old_offset < b.old_offset; });
  clear();
  const auto offsets = shard_.block_offsets();
  std::uint64_t at = 0;
  for (const Kept& k : kept) {
    const std::uint64_t words = prefix_words(shard_, k.term, k.blocks);
    entries_[k.term] = CacheEntry{k.blocks, at, words, k.rank};
    cached_blocks_total_ += k.blocks;
    if (at != k.old_offset) {
      change.relocations.push_back(
          {k.old_offset, at, words, offsets[shard_.term(k.term).first_block]});
      change.words_relocated += words;
      ++change.lists_relocated;
      change.shifts.push_back(
          {numbering_.first_slot(k.term), std::uint64_t(k.blocks) + 1, at - k.old_offset});
    }
    at += words;
  }
  used_words_ = at;
  free_.clear();
  if (at < capacity_words_) free_[at] = capacity_words_ - at;
  for (const auto& [t, rank] : fresh) {
    std::uint64_t offset = 0;
    if (!allocate(prefix_words(shard_, t, want.at(t)), offset))
      throw Error("list cache: a compaction's list did not fit its own tally");
    place(t, want.at(t), offset, change);
    entries_[t].rank = rank;
    ++change.lists_added;
  }
  for (const auto& [t, e] : held_before)
    if (!entries_.count(t)) ++change.lists_removed;
  return change;
}

const CacheEntry* ListCacheDirectory::find(TermId t) const {
  const auto it = entries_.find(t);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<OffsetPatch> ListCacheDirectory::table_entries() const {
  std::vector<OffsetPatch> out;
  for (const auto& [t, e] : entries_)
    append_prefix_entries(shard_, numbering_, t, e.blocks, e.word_offset, out);
  return out;
}

std::vector<CachedList> ListCacheDirectory::held_lists() const {
  std::vector<CachedList> out;
  out.reserve(entries_.size());
  for (const auto& [t, e] : entries_) out.push_back({t, e.blocks, cached_block_bytes(e.words)});
  return out;
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

std::vector<ListBatch> plan_list_batches(const ListCacheDirectory& cache,
                                         std::span<const Query> queries,
                                         std::span<const std::size_t> order,
                                         const ListBatchOptions& options) {
  const ShardIndex& shard = cache.shard();
  const auto offsets = shard.block_offsets();
  const std::uint64_t capacity = options.ship_capacity_bytes;
  const std::size_t max_queries = std::max<std::size_t>(1, options.max_queries);
  std::vector<ListBatch> batches;
  ListBatch cur;
  std::vector<TermId> need;
  auto words_of = [&](TermId t, std::uint32_t blocks) -> std::uint64_t {
    return blocks == 0 ? 0 : prefix_words(shard, t, blocks);
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
    append_prefix_entries(shard, cache.numbering(), t, blocks, cur.shipped_words, cur.patches);
    if (cache.cached_blocks(t) > 0)  // shipped whole over its cached prefix (ship_tails)
      if (const CacheEntry* e = cache.find(t))
        append_prefix_entries(shard, cache.numbering(), t, e->blocks, e->word_offset, cur.restores);
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
      cur = ListBatch{};
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
