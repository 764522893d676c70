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

// back() is a copy kept beside the vector (index_insert compares with it to append): it must be
// the last entry through appends, inserts and removals anywhere, the last one included.
TEST(StartIndex, BackIsTheLastEntryThroughEveryChange) {
  std::mt19937_64 rng(5);
  StartIndex index;
  std::vector<Entry> model;
  double t = 0;
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 4);
    if (op == 0 || model.empty()) {  // an append, as a sweep starts flows in time order
      t += static_cast<double>(rng() % 3);
      const Entry e{t, static_cast<uint32_t>(step)};
      model.push_back(e);
      index.push_back(e);
    } else if (op == 1) {  // an insert before the end (or at it)
      const Entry e{static_cast<double>(rng() % static_cast<uint64_t>(t + 2)), static_cast<uint32_t>(step)};
      model.insert(std::upper_bound(model.begin(), model.end(), e), e);
      index.insert(index.upper_bound(e), e);
    } else {  // a removal: the last entry, the first, or anywhere
      const size_t at = op == 2 ? model.size() - 1 : rng() % 2 == 0 ? 0 : rng() % model.size();
      index.erase(index.find(model[at]));
      model.erase(model.begin() + static_cast<long>(at));
    }
    ASSERT_EQ(index.empty(), model.empty());
    if (!model.empty()) {
      ASSERT_EQ(index.back(), model.back()) << "step " << step;
    }
  }
  EXPECT_EQ(std::vector<Entry>(index.begin(), index.end()), model);
}

}  // namespace
}  // namespace simcore::detail
