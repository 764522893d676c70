// BlockPool (simcore/src/block_pool.h) and ChunkedStore (chunked_store.h) on top of it.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

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

// Whether the kernel populates pages on advice (MADV_POPULATE_WRITE, Linux 5.14).
bool kernel_populates() {
#ifdef MADV_POPULATE_WRITE
  void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  const bool ok = madvise(m, 4096, MADV_POPULATE_WRITE) == 0;
  munmap(m, 4096);
  return ok;
#else
  return false;
#endif
}

// How many of the pages of [p, p + bytes) (page-aligned p) are resident.
size_t resident_pages(const void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  if (mincore(const_cast<void*>(p), bytes, v.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

// A block is handed out with its pages already present (one call made them, mapped_region.h:
// populate), not one fault per page at its first writes; the blocks after it stay untouched
// until they are handed out. Not on huge pages (their first write brings 2 MiB in).
TEST(BlockPool, ABlockIsPresentWhenHandedOutAndOnlyIt) {
  if (!kernel_populates()) GTEST_SKIP() << "the kernel does not populate on advice";
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  BlockPool pool(16 * page);
  void* a = pool.allocate();
  EXPECT_EQ(resident_pages(a, 16 * page), 16u);
  EXPECT_EQ(resident_pages(static_cast<char*>(a) + 16 * page, 16 * page), 0u);  // the next block
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
