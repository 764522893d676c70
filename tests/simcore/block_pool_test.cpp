// BlockPool (simcore/src/block_pool.h) and ChunkedStore (chunked_store.h) on top of it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
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

// The VmFlags of the mapping holding `p` in /proc/self/smaps ("" when not found).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    unsigned long from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &from, &to) == 2) {  // a mapping's first line
      in = from <= a && a < to;
      continue;
    }
    if (in && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

// EngineOptions::huge_pages reaches the pools: their mappings carry the kernel's huge-page
// advice (VmFlags "hg") only when asked. Skipped where the kernel has no transparent huge pages.
TEST(BlockPool, MappingsAreAdvisedForHugePagesOnlyWhenAsked) {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(thp, modes) || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "no transparent huge pages here";
  BlockPool plain(4096), huge(4096);
  huge.set_huge_pages(true);
  void* a = plain.allocate();
  void* b = huge.allocate();
  const std::string plain_flags = vm_flags_of(a), huge_flags = vm_flags_of(b);
  ASSERT_FALSE(plain_flags.empty());
  ASSERT_FALSE(huge_flags.empty());
  EXPECT_EQ(plain_flags.find(" hg"), std::string::npos) << plain_flags;
  EXPECT_NE(huge_flags.find(" hg"), std::string::npos) << huge_flags;
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
