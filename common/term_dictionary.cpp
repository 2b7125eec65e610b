#include "common/term_dictionary.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include <xxhash.h>

#include "common/error.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

namespace {

constexpr std::size_t kRecordHeader = sizeof(TermId) + sizeof(std::uint32_t);  // ID, length

std::uint64_t hash_term(std::string_view term) {
  return XXH3_64bits(term.data(), term.size());
}

}  // namespace

TermDictionary::TermDictionary(const ShardIndex& shard) {
  const TermId n = shard.num_terms();
  if (n == std::numeric_limits<TermId>::max())
    throw Error("TermDictionary: the vocabulary has too many terms");
  std::uint64_t record_bytes = 0;
  for (TermId t = 0; t < n; ++t) record_bytes += kRecordHeader + shard.term_string(t).size();
  if (record_bytes >= std::numeric_limits<std::uint32_t>::max())
    throw Error("TermDictionary: the vocabulary's strings exceed 4 GiB");
  records_ = HugePageArray<char>(record_bytes);
  dfs_ = HugePageArray<std::uint32_t>(n);
  for (TermId t = 0; t < n; ++t) dfs_[t] = shard.term(t).df_global;
  slots_ = HugePageArray<std::uint64_t>(
      std::bit_ceil(std::max<std::uint64_t>(16, 2 * std::uint64_t(n))));
  mask_ = slots_.size() - 1;
  std::uint64_t offset = 0;
  for (TermId t = 0; t < n; ++t) {
    const std::string_view term = shard.term_string(t);
    const auto length = std::uint32_t(term.size());
    char* record = records_.data() + offset;
    std::memcpy(record, &t, sizeof t);
    std::memcpy(record + sizeof t, &length, sizeof length);
    std::memcpy(record + kRecordHeader, term.data(), term.size());
    const std::uint64_t h = hash_term(term);
    std::uint64_t i = h & mask_;
    while (slots_[i] != 0) i = (i + 1) & mask_;
    slots_[i] = (h >> 32) << 32 | (offset + 1);
    offset += kRecordHeader + term.size();
  }
  size_ = n;
}

std::uint64_t TermDictionary::hash(std::string_view term) { return hash_term(term); }

void TermDictionary::prefetch_hashed(std::uint64_t h, int stage) const {
  const std::uint64_t i = h & mask_;
  if (stage <= 0) {
    __builtin_prefetch(&slots_[i]);
    return;
  }
  // The first probe's slot only (most terms sit there).
  const std::uint64_t slot = slots_[i];
  if (slot == 0 || slot >> 32 != h >> 32) return;
  const char* record = records_.data() + ((slot & 0xffffffffu) - 1);
  if (stage == 1) {
    __builtin_prefetch(record);
    __builtin_prefetch(record + kRecordHeader + 15);  // the same line for most records
    return;
  }
  TermId t = 0;  // a fingerprint's namesake: the hint may be for another term, never wrong
  std::memcpy(&t, record, sizeof t);
  __builtin_prefetch(&dfs_[t]);
}

std::optional<TermId> TermDictionary::find(std::string_view term) const {
  const std::uint64_t h = hash_term(term);
  const std::uint64_t fingerprint = h >> 32;
  for (std::uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const std::uint64_t slot = slots_[i];
    if (slot == 0) return std::nullopt;
    if (slot >> 32 == fingerprint) {
      const char* record = records_.data() + ((slot & 0xffffffffu) - 1);
      TermId t = 0;
      std::uint32_t length = 0;
      std::memcpy(&t, record, sizeof t);
      std::memcpy(&length, record + sizeof t, sizeof length);
      if (length == term.size() && std::memcmp(record + kRecordHeader, term.data(), length) == 0)
        return t;
    }
  }
}

}  // namespace gpusearch
