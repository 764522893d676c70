// StartIndex (simcore/src/start_index.h): its searches probe the ends first and fall back to a
// binary search; whatever the entries and the wanted value, they must answer as std::upper_bound,
// std::lower_bound and a find over the sorted entries would, also after removals at the front,
// the back and the middle.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "start_index.h"

namespace simcore::detail {
namespace {

using Entry = StartIndex::Entry;

TEST(StartIndex, SearchesAnswerAsTheStandardAlgorithms) {
  std::mt19937_64 rng(3);
  for (int round = 0; round < 200; ++round) {
    StartIndex index;
    std::vector<Entry> model;
    const int n = static_cast<int>(rng() % 300);
    // Few distinct times, so that equal starts (ordered by slot) are common.
    for (int k = 0; k < n; ++k) {
      const Entry e{static_cast<double>(rng() % 50), static_cast<uint32_t>(rng() % 1000)};
      if (std::find(model.begin(), model.end(), e) != model.end()) continue;
      model.insert(std::upper_bound(model.begin(), model.end(), e), e);
      index.insert(index.upper_bound(e), e);
    }
    // Removals in every region (the front ones shift the head, the others the tail).
    for (int k = 0; k < n / 3 && !model.empty(); ++k) {
      const size_t at = rng() % 3 == 0 ? 0 : rng() % model.size();
      const Entry e = model[at];
      Entry* it = index.find(e);
      ASSERT_NE(it, index.end());
      index.erase(it);
      model.erase(model.begin() + static_cast<long>(at));
    }
    ASSERT_EQ(std::vector<Entry>(index.begin(), index.end()), model);
    for (int q = 0; q < 100; ++q) {
      const Entry e{static_cast<double>(rng() % 52) - 1, static_cast<uint32_t>(rng() % 1002)};
      EXPECT_EQ(index.upper_bound(e) - index.begin(),
                std::upper_bound(model.begin(), model.end(), e) - model.begin());
      EXPECT_EQ(index.lower_bound(e) - index.begin(),
                std::lower_bound(model.begin(), model.end(), e) - model.begin());
      const bool present = std::binary_search(model.begin(), model.end(), e);
      Entry* found = index.find(e);
      EXPECT_EQ(found != index.end(), present);
      if (present) {
        EXPECT_EQ(*found, e);
      }
    }
  }
}

}  // namespace
}  // namespace simcore::detail
