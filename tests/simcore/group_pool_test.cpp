// GroupPool (simcore/src/group_pool.h): the blocks a flow group's arrays live in; PoolArray
// (pool_array.h): those arrays.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <algorithm>
#include <vector>

#include "flow_group.h"
#include "group_pool.h"
#include "log_pool.h"
#include "pool_array.h"

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

// A group's arrays (pool_array.h) hold what a std::vector would after the same calls, with
// the same capacities (so blocks and memory figures stay as they were), through pooled sizes
// and past them.
TEST(PoolArray, HoldsWhatAVectorHoldsWithItsCapacities) {
  GroupPool pool;
  PoolArray<uint64_t> a;
  std::vector<uint64_t> v;
  std::mt19937_64 rng(11);
  std::vector<uint64_t> src(700);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 1000000 + i;
  for (int round = 0; round < 4000; ++round) {
    const uint64_t x = rng();
    switch (rng() % 8) {
      case 0: case 1: case 2:
        a.push_back(pool, x);
        v.push_back(x);
        break;
      case 3: {
        const size_t n = rng() % 600;
        a.resize(pool, n);
        v.resize(n);
        break;
      }
      case 4: {
        const size_t n = rng() % 900;
        a.reserve(pool, n);
        v.reserve(n);
        break;
      }
      case 5: {
        const size_t at = v.empty() ? 0 : rng() % (v.size() + 1), n = rng() % 40;
        a.insert(pool, at, src.data(), src.data() + n);
        v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n));
        break;
      }
      case 6:
        if (!v.empty()) {
          const size_t at = rng() % v.size();
          a.erase(at);
          v.erase(v.begin() + static_cast<std::ptrdiff_t>(at));
        }
        break;
      default: {
        const size_t n = rng() % 700;
        a.assign(pool, src.data(), src.data() + n);
        v.assign(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n));
        break;
      }
    }
    ASSERT_EQ(a.size(), v.size());
    ASSERT_EQ(a.capacity(), v.capacity());
    ASSERT_TRUE(std::equal(a.begin(), a.end(), v.begin()));
  }
  a.release(pool);
  EXPECT_EQ(a.capacity(), 0u);
  EXPECT_EQ(a.data(), nullptr);
}

// What a group entry is read and written as: two cache lines (its state beside, GroupSide,
// only for rollbacks and timelines), and 16 bytes a member.
TEST(PoolArray, AGroupEntryIsTwoCacheLines) {
  EXPECT_EQ(sizeof(PoolArray<uint64_t>), 16u);
  EXPECT_EQ(sizeof(FlowGroup), 128u);
  EXPECT_EQ(alignof(FlowGroup), 64u);
  EXPECT_EQ(sizeof(FlowGroup::Member), 16u);
}

// A member's id is kept as its distance from the group record's id, either way (a group made
// of members taken out in the order they got ready starts with any of them).
TEST(PoolArray, AMembersIdIsItsDistanceFromTheGroupsFirst) {
  const EventId first = 5000000000ull;
  for (EventId id : {first, first + 1, first + 8191, first - 1, first - 4096}) {
    FlowGroup::Member mb;
    EXPECT_FALSE(mb.present());
    mb.off = FlowGroup::Member::offset(id, first);
    EXPECT_TRUE(mb.present());
    EXPECT_EQ(mb.id(first), id);
  }
}

// A group that starts gives its scheduling arrays back (FlowGroup::release_schedule()) and its
// members stay; the group scheduled next writes its own right after them (log_pool.h: in the
// order asked for, where the hardware's prefetcher finds them). A retired group's entry keeps
// no array for its next group (FlowGroup::reset()): its members, dependencies and their links
// go back untouched, and the next group's are written where the pool's order puts them.
TEST(FlowGroup, AStartedGroupsScheduleGoesBackAndTheNextFollows) {
  GroupPool dependents_pool;
  LogPool pool, sched_pool;
  FlowGroup started, next;
  started.members.resize(pool, 16);
  started.sched.resize(sched_pool, 16);
  started.ready.reserve(sched_pool, 16);
  const auto* ready = reinterpret_cast<const std::byte*>(started.ready.data());
  started.release_schedule(sched_pool);
  EXPECT_EQ(started.sched.capacity(), 0u);
  EXPECT_EQ(started.ready.capacity(), 0u);
  EXPECT_EQ(started.members.size(), 16u);
  next.sched.resize(sched_pool, 16);
  EXPECT_EQ(reinterpret_cast<const std::byte*>(next.sched.data()), ready + 16 * sizeof(uint32_t));

  const auto* members = reinterpret_cast<const std::byte*>(started.members.data());
  started.deps.reserve(pool, 32);
  started.reset(dependents_pool, pool, sched_pool);
  EXPECT_EQ(started.members.capacity(), 0u);
  EXPECT_EQ(started.deps.capacity(), 0u);
  started.members.resize(pool, 16);  // the entry's next group
  EXPECT_EQ(reinterpret_cast<const std::byte*>(started.members.data()),
            members + 16 * sizeof(FlowGroup::Member) + 32 * sizeof(EventId));
}

}  // namespace
}  // namespace simcore::detail
