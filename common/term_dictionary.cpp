#include "common/term_dictionary.hpp"

#include <algorithm>
#include <bit>
#include <limits>

#include <xxhash.h>

#include "common/error.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

namespace {

std::uint64_t hash_term(std::string_view term) {
  return XXH3_64bits(term.data(), term.size());
}

}  // namespace

TermDictionary::TermDictionary(const ShardIndex& shard) : shard_(shard) {
  const TermId n = shard.num_terms();
  if (n == std::numeric_limits<TermId>::max())
    throw Error("TermDictionary: the vocabulary has too many terms");
  slots_.assign(std::bit_ceil(std::max<std::uint64_t>(16, 2 * std::uint64_t(n))), 0);
  mask_ = slots_.size() - 1;
  for (TermId t = 0; t < n; ++t) {
    const std::uint64_t h = hash_term(shard.term_string(t));
    std::uint64_t i = h & mask_;
    while (slots_[i] != 0) i = (i + 1) & mask_;
    slots_[i] = (h >> 32) << 32 | (std::uint64_t(t) + 1);
  }
  size_ = n;
}

void TermDictionary::prefetch(std::string_view term, int stage) const {
  const std::uint64_t h = hash_term(term);
  const std::uint64_t i = h & mask_;
  if (stage <= 0) {
    __builtin_prefetch(&slots_[i]);
    return;
  }
  // The first probe's slot only (most terms sit there).
  const std::uint64_t slot = slots_[i];
  if (slot == 0 || slot >> 32 != h >> 32) return;
  shard_.prefetch_term(TermId((slot & 0xffffffffu) - 1), stage);
}

std::optional<TermId> TermDictionary::find(std::string_view term) const {
  const std::uint64_t h = hash_term(term);
  const std::uint64_t fingerprint = h >> 32;
  for (std::uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const std::uint64_t slot = slots_[i];
    if (slot == 0) return std::nullopt;
    if (slot >> 32 == fingerprint) {
      const TermId t = TermId((slot & 0xffffffffu) - 1);
      if (shard_.term_string(t) == term) return t;
    }
  }
}

}  // namespace gpusearch
