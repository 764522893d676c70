// GroupPool (simcore/src/group_pool.h): the blocks a flow group's arrays live in.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <algorithm>
#include <vector>

#include "flow_group.h"
#include "group_pool.h"

namespace simcore::detail {
namespace {

TEST(GroupPool, BlocksAreAlignedApartAndReusedBySize) {
  GroupPool pool;
  std::mt19937_64 rng(3);
  struct Block {
    std::byte* p;
    size_t bytes;
  };
  std::vector<Block> live;
  for (int round = 0; round < 20000; ++round) {
    if (live.empty() || rng() % 3 != 0) {
      const size_t bytes = 1 + rng() % 5000;  // past the largest pooled size too
      auto* p = static_cast<std::byte*>(pool.allocate(bytes));
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
      std::memset(p, static_cast<int>(live.size() & 0xff), bytes);
      live.push_back({p, bytes});
    } else {
      const size_t k = rng() % live.size();
      pool.deallocate(live[k].p, live[k].bytes);
      live[k] = live.back();
      live.pop_back();
    }
  }
  // No two live blocks overlap.
  std::vector<Block> sorted = live;
  std::sort(sorted.begin(), sorted.end(), [](const Block& a, const Block& b) { return a.p < b.p; });
  for (size_t i = 1; i < sorted.size(); ++i) ASSERT_LE(sorted[i - 1].p + sorted[i - 1].bytes, sorted[i].p);
  for (const Block& b : live) pool.deallocate(b.p, b.bytes);

  // A freed block is the next one handed out for its size (the next group of that size takes
  // the last one's arrays), and not for another size.
  void* a = pool.allocate(360);
  pool.deallocate(a, 360);
  EXPECT_NE(pool.allocate(1000), a);
  EXPECT_NE(pool.allocate(352), a);  // 337..352 bytes: the size below 353..368
  EXPECT_EQ(pool.allocate(368), a);
}

TEST(GroupPool, GrowsBySlabsAndOnlyForPooledSizes) {
  GroupPool pool;
  EXPECT_EQ(pool.bytes(), 0u);
  void* big = pool.allocate(100000);  // operator new: no slab
  EXPECT_EQ(pool.bytes(), 0u);
  pool.deallocate(big, 100000);
  std::vector<void*> blocks;
  for (int i = 0; i < 1000; ++i) blocks.push_back(pool.allocate(512));  // 512 KB: 8 slabs of 64 KiB
  EXPECT_GE(pool.bytes(), size_t{8} << 16);
  EXPECT_LT(pool.bytes(), size_t{9} << 16);
  const size_t held = pool.bytes();
  for (void* p : blocks) pool.deallocate(p, 512);
  for (int i = 0; i < 1000; ++i) blocks[static_cast<size_t>(i)] = pool.allocate(512);  // from the free list
  EXPECT_EQ(pool.bytes(), held);
  // Closed (its owner is being torn down): releases are no-ops, so a block is not handed out again.
  pool.close();
  pool.deallocate(blocks[0], 512);
  EXPECT_NE(pool.allocate(512), blocks[0]);
}

TEST(GroupPool, VectorsKeepTheirPoolThroughMovesAndGrowth) {
  GroupPool pool;
  PoolVector<uint64_t> v{PoolAllocator<uint64_t>(&pool)};
  for (uint64_t i = 0; i < 10000; ++i) v.push_back(i);  // past the pooled sizes and back
  for (uint64_t i = 0; i < 10000; ++i) ASSERT_EQ(v[i], i);
  v = PoolVector<uint64_t>(v.get_allocator());
  EXPECT_EQ(v.get_allocator().pool, &pool);
  v.push_back(7);
  EXPECT_GT(pool.bytes(), 0u);  // a small array comes from a slab
}

// A group that starts gives its scheduling arrays back (FlowGroup::release_schedule()): the
// group scheduled next takes the very blocks (warm), and its members stay.
TEST(GroupPool, AStartedGroupsScheduleGoesToTheNextGroup) {
  GroupPool pool;
  FlowGroup started, next;
  started.use(&pool);
  next.use(&pool);
  started.members.resize(16);
  started.sched.resize(16);
  started.ready.reserve(16);
  const void* sched = started.sched.data();
  const void* ready = started.ready.data();
  started.release_schedule();
  EXPECT_EQ(started.sched.capacity(), 0u);
  EXPECT_EQ(started.ready.capacity(), 0u);
  EXPECT_EQ(started.sched.get_allocator().pool, &pool);  // a rollback schedules it again from the pool
  EXPECT_EQ(started.members.size(), 16u);
  next.sched.resize(16);
  next.ready.reserve(16);
  EXPECT_EQ(next.sched.data(), sched);
  EXPECT_EQ(next.ready.data(), ready);
}

}  // namespace
}  // namespace simcore::detail
