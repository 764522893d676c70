// BlockPool (simcore/src/block_pool.h) and ChunkedStore (chunked_store.h) on top of it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "block_pool.h"
#include "chunked_store.h"

namespace simcore::detail {
namespace {

// Blocks are distinct, 64-byte aligned, writable whole, and keep what was written while held,
// across the mappings (a 2 MiB mapping holds 124 blocks of 16,912 bytes: 300 span three).
TEST(BlockPool, BlocksAreDistinctAlignedAndKeepTheirBytes) {
  BlockPool pool(16912);
  EXPECT_EQ(pool.block_bytes(), 16960u);  // rounded up to 64
  std::vector<unsigned char*> blocks;
  std::set<uintptr_t> seen;
  for (int i = 0; i < 300; ++i) {
    auto* p = static_cast<unsigned char*>(pool.allocate());
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    std::memset(p, i & 0xFF, pool.block_bytes());
    ASSERT_TRUE(seen.insert(reinterpret_cast<uintptr_t>(p)).second) << i;
    blocks.push_back(p);
  }
  EXPECT_EQ(pool.blocks_made(), 300u);
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(blocks[i][0], i & 0xFF) << i;
    ASSERT_EQ(blocks[i][pool.block_bytes() - 1], i & 0xFF) << i;
  }
}

// A freed block is the next one handed out (last freed first), and the pool makes no new one
// while freed ones are there: what keeps a releasing caller's table from touching new pages.
TEST(BlockPool, FreedBlocksAreReusedLastFreedFirst) {
  BlockPool pool(4096);
  void* a = pool.allocate();
  void* b = pool.allocate();
  void* c = pool.allocate();
  pool.deallocate(a);
  pool.deallocate(c);
  EXPECT_EQ(pool.allocate(), c);
  EXPECT_EQ(pool.allocate(), a);
  EXPECT_EQ(pool.blocks_made(), 3u);
  void* d = pool.allocate();
  EXPECT_NE(d, a);
  EXPECT_NE(d, b);
  EXPECT_NE(d, c);
  EXPECT_EQ(pool.blocks_made(), 4u);
}

// Elements are value-initialized, never move, and are destroyed with the store.
struct Counted {
  static int live;
  uint64_t v = 7;
  Counted() { ++live; }
  ~Counted() { --live; }
};
int Counted::live = 0;

TEST(ChunkedStore, ElementsAreValueInitializedStayPutAndAreDestroyed) {
  {
    ChunkedStore<Counted, 4> s;  // chunks of 16
    std::vector<Counted*> where;
    for (int i = 0; i < 100; ++i) {
      Counted& e = s.emplace_back();
      EXPECT_EQ(e.v, 7u);
      e.v = static_cast<uint64_t>(i);
      where.push_back(&e);
    }
    EXPECT_EQ(s.size(), 100u);
    EXPECT_EQ(s.capacity(), 112u);
    for (int i = 0; i < 100; ++i) {
      EXPECT_EQ(&s[i], where[i]);
      EXPECT_EQ(s[i].v, static_cast<uint64_t>(i));
    }
    EXPECT_EQ(Counted::live, 112);  // whole chunks are made
  }
  EXPECT_EQ(Counted::live, 0);
}

}  // namespace
}  // namespace simcore::detail
