// LogPool (simcore/src/log_pool.h): where a flow group's members and dependencies live, handed
// out in submission order, a slab reused once every block in it was released.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "log_pool.h"
#include "pool_array.h"

namespace simcore::detail {
namespace {

TEST(LogPool, BlocksFollowOneAnotherInTheOrderAskedFor) {
  LogPool pool;
  auto* a = static_cast<std::byte*>(pool.allocate(176));
  auto* b = static_cast<std::byte*>(pool.allocate(176));
  auto* c = static_cast<std::byte*>(pool.allocate(22));  // rounded up to 32
  auto* d = static_cast<std::byte*>(pool.allocate(8));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 16, 0u);
  EXPECT_EQ(b, a + 176);
  EXPECT_EQ(c, b + 176);
  EXPECT_EQ(d, c + 32);
  EXPECT_EQ(pool.slabs(), 1u);
}

// A free list would write its link into the released block, a cold line on a large ring.
TEST(LogPool, ReleasingWritesNothingInTheBlock) {
  LogPool pool;
  auto* a = static_cast<unsigned char*>(pool.allocate(176));
  auto* keep = pool.allocate(64);  // the slab stays in use
  std::memset(a, 0xAB, 176);
  pool.deallocate(a, 176);
  for (int i = 0; i < 176; ++i) ASSERT_EQ(a[i], 0xAB) << i;
  pool.deallocate(keep, 64);
}

// Blocks released in about the order they were made (a ring's groups retire so): the slabs
// come back, and the pool holds the window's worth, not everything ever asked for.
TEST(LogPool, SlabsComeBackOnceTheirBlocksAreReleased) {
  LogPool pool;
  void* straggler = pool.allocate(48);  // never released before the end: keeps one slab
  std::deque<std::pair<void*, size_t>> window;
  for (int i = 0; i < 200000; ++i) {
    const size_t bytes = 16 + 16 * static_cast<size_t>(i % 12);
    window.emplace_back(pool.allocate(bytes), bytes);
    if (window.size() > 2000) {  // ~200 KB live: four slabs, and the one being filled
      pool.deallocate(window.front().first, window.front().second);
      window.pop_front();
    }
  }
  EXPECT_LE(pool.slabs(), 7u);  // (200,000 blocks: 330 slabs if none came back)
  EXPECT_LE(pool.bytes(), 7u * (64u << 10) + 1024u);
  for (auto& [p, bytes] : window) pool.deallocate(p, bytes);
  pool.deallocate(straggler, 48);
}

TEST(LogPool, LargeBlocksAreTheirOwn) {
  LogPool pool;
  void* big = pool.allocate(5000);
  EXPECT_EQ(pool.slabs(), 0u);
  std::memset(big, 1, 5000);
  pool.deallocate(big, 5000);
  EXPECT_EQ(pool.slabs(), 0u);
}

TEST(LogPool, APoolArrayGrowsThere) {
  LogPool pool;
  PoolArray<uint64_t> a;
  for (uint64_t i = 0; i < 300; ++i) a.push_back(pool, i);
  ASSERT_EQ(a.size(), 300u);
  for (uint64_t i = 0; i < 300; ++i) ASSERT_EQ(a[i], i);
  a.release(pool);
  EXPECT_EQ(a.capacity(), 0u);
  EXPECT_EQ(pool.slabs(), 1u);  // every growth step came from the same slab
}

}  // namespace
}  // namespace simcore::detail
