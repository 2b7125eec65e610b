// ListCacheDirectory (common/list_cache.hpp): the cache region's allocation and the directory,
// moved toward a plan by apply(): shrinks in place, lazy eviction, first fit, and the
// compaction on fragmentation, with what the device must do for each change (CacheChange:
// relocations, copies, table shifts and entries).
#include "common/list_cache.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/shard_index.hpp"

namespace gpusearch {

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
  const std::uint64_t words = list_prefix_words(shard_, t, blocks);
  entries_[t] = CacheEntry{blocks, offset, words};
  cached_blocks_total_ += blocks;
  const auto offsets = shard_.block_offsets();
  change.copies.push_back({offsets[shard_.term(t).first_block], words, offset});
  change.words_copied += words;
  append_prefix_table_entries(shard_, numbering_, t, blocks, offset, change.patches);
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
      const std::uint64_t words = list_prefix_words(shard_, t, w->second);
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
    const std::uint64_t words = list_prefix_words(shard_, l.term, blocks);
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
    const std::uint64_t words = list_prefix_words(shard_, t, w->second);
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
    if (keep > 0 && total + list_prefix_words(shard_, t, keep) <= capacity_words_) {
      kept.push_back({t, keep, std::uint32_t(rank), old->second.word_offset});
      total += list_prefix_words(shard_, t, keep);
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
    const std::uint64_t words = list_prefix_words(shard_, k.term, k.blocks);
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
    if (!allocate(list_prefix_words(shard_, t, want.at(t)), offset))
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
    append_prefix_table_entries(shard_, numbering_, t, e.blocks, e.word_offset, out);
  return out;
}

std::vector<CachedList> ListCacheDirectory::held_lists() const {
  std::vector<CachedList> out;
  out.reserve(entries_.size());
  for (const auto& [t, e] : entries_) out.push_back({t, e.blocks, cached_block_bytes(e.words)});
  return out;
}

}  // namespace gpusearch
