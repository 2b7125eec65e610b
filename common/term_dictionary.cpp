#include "common/term_dictionary.hpp"

#include "common/shard_index.hpp"

namespace gpusearch {

TermDictionary::TermDictionary(const ShardIndex& shard) {
  const TermId n = shard.num_terms();
  ids_.reserve(n);
  for (TermId t = 0; t < n; ++t) ids_.emplace(shard.term_string(t), t);
}

}  // namespace gpusearch
