// FlatTermMap (common/flat_term_map.hpp), the list cache's per-batch map of shipped lists,
// against std::unordered_map under random inserts and look-ups, across its growth.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "common/flat_term_map.hpp"

using gpusearch::FlatTermMap;
using gpusearch::TermId;

TEST(FlatTermMap, AgreesWithUnorderedMapThroughGrowth) {
  std::mt19937 rng(7);
  for (TermId range : {TermId(50), TermId(5000), TermId(4000000)}) {
    SCOPED_TRACE(range);
    FlatTermMap flat;
    std::unordered_map<TermId, std::uint32_t> ref;
    EXPECT_TRUE(flat.empty());
    EXPECT_EQ(flat.find(3), nullptr);
    std::uniform_int_distribution<TermId> term(0, range - 1);
    for (int op = 0; op < 20000; ++op) {
      const TermId t = term(rng);
      if (op % 3 == 0) {
        const std::uint32_t v = std::uint32_t(rng());
        flat[t] = v;
        ref[t] = v;
      } else {
        const std::uint32_t* got = flat.find(t);
        const auto it = ref.find(t);
        ASSERT_EQ(got != nullptr, it != ref.end()) << "term " << t;
        if (got) {
          ASSERT_EQ(*got, it->second) << "term " << t;
        }
        ASSERT_EQ(flat.contains(t), it != ref.end());
      }
    }
    EXPECT_EQ(flat.size(), ref.size());
    for (const auto& [t, v] : ref) {
      ASSERT_NE(flat.find(t), nullptr) << "term " << t;
      EXPECT_EQ(*flat.find(t), v);
    }
    // operator[] on an absent term inserts 0, as std::unordered_map does.
    TermId absent = 0;
    while (ref.count(absent)) ++absent;
    EXPECT_EQ(flat[absent], 0u);
    EXPECT_EQ(flat.size(), ref.size() + 1);
  }
}
