// The filling queue (share_queue.h) must pop exactly what a binary heap pops, in its sorted mode
// (small components) and its heap mode (large ones), under the filling's pattern: pop the
// smallest, sometimes push it back with a larger share.
#include "share_queue.h"

#include <gtest/gtest.h>

#include <functional>
#include <queue>
#include <random>
#include <set>
#include <vector>

namespace simcore::detail {
namespace {

void compare_with_heap(size_t sorted_limit, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 100; ++round) {
    ShareQueue q(sorted_limit);
    std::priority_queue<ShareKey, std::vector<ShareKey>, std::greater<>> ref;
    const int links = 1 + static_cast<int>(rng() % 600);
    for (int l = 0; l < links; ++l) {
      // Shares with many ties (the link breaks them).
      const ShareKey k = ShareKey::of(static_cast<double>(rng() % 40) * 1e9 / 7, l);
      q.append(k);
      ref.push(k);
    }
    q.order();
    while (!ref.empty()) {
      ASSERT_FALSE(q.empty());
      ASSERT_EQ(q.top().key, ref.top().key) << "round " << round;
      const ShareKey a = q.pop();
      const ShareKey b = ref.top();
      ref.pop();
      ASSERT_EQ(a.key, b.key) << "round " << round;
      if (rng() % 3 == 0) {  // stale: back in with a larger share
        const ShareKey again = ShareKey::of(a.share() + static_cast<double>(rng() % 10 + 1) * 1e8, a.link());
        q.push(again);
        ref.push(again);
      }
    }
    EXPECT_TRUE(q.empty());
  }
}

TEST(ShareQueue, SortedModePopsAsAHeap) { compare_with_heap(ShareQueue::kSortedLimit, 1); }
TEST(ShareQueue, HeapModePopsAsAHeap) { compare_with_heap(0, 2); }
TEST(ShareQueue, MixedSizesPopAsAHeap) { compare_with_heap(300, 3); }

}  // namespace
}  // namespace simcore::detail
