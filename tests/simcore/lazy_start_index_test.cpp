// LazyStartIndex (simcore/src/lazy_start_index.h): entries are appended unsorted and removals
// only counted; the owner tells live entries from stale ones. Whatever the order of inserts,
// removals and searches, sorted() must give exactly the live entries, sorted, each once (a slot
// reused at the same start makes a stale entry equal to a live one), and memory must stay within
// about twice the live entries.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "lazy_start_index.h"

namespace simcore::detail {
namespace {

using Entry = LazyStartIndex::Entry;

TEST(LazyStartIndex, SortedGivesTheLiveEntriesOnce) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 50; ++round) {
    LazyStartIndex index;
    std::set<Entry> live;  // the model, and the owner's record of what is live
    auto is_live = [&](const Entry& e) { return live.count(e) != 0; };
    // Odd rounds search rarely, so that removals pile up and compact without a search between.
    const int searches = round % 2 == 0 ? 10 : 2000;
    for (int step = 0; step < 20000; ++step) {
      const int what = static_cast<int>(rng() % searches);
      if (what == 0) {
        const auto got = index.sorted(is_live);
        ASSERT_EQ(std::vector<Entry>(got.begin(), got.end()), std::vector<Entry>(live.begin(), live.end()))
            << round << " " << step;
      } else if (what % 2 == 1 || live.size() < 8) {
        // Few distinct times and slots: equal entries (a slot reused at the same start) occur.
        const Entry e{static_cast<double>(rng() % 60), static_cast<uint32_t>(rng() % 60)};
        if (live.insert(e).second) index.insert(e);
      } else {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        live.erase(it);
        index.erase(is_live);
      }
    }
    const auto got = index.sorted(is_live);
    ASSERT_EQ(std::vector<Entry>(got.begin(), got.end()), std::vector<Entry>(live.begin(), live.end()));
  }
}

// A large ring's pattern: a group added and an old one removed, over and over, never searched.
TEST(LazyStartIndex, StaleEntriesDoNotPileUp) {
  LazyStartIndex index;
  std::set<Entry> live;
  auto is_live = [&](const Entry& e) { return live.count(e) != 0; };
  for (uint32_t k = 0; k < 200000; ++k) {
    const Entry e{static_cast<double>(k), k};
    live.insert(e);
    index.insert(e);
    if (live.size() > 300) {
      live.erase(live.begin());
      index.erase(is_live);
    }
  }
  EXPECT_LE(index.memory_bytes(), 4 * (300 + 1024) * sizeof(Entry));
  const auto got = index.sorted(is_live);
  EXPECT_EQ(std::vector<Entry>(got.begin(), got.end()), std::vector<Entry>(live.begin(), live.end()));
}

}  // namespace
}  // namespace simcore::detail
