// GrowArray (simcore/src/grow_array.h), the radix queue's buckets and the group index: entries
// survive every growth and every stretch brought in, clear() and resize() only shorten, and a
// large block's pages that no append reached are not made resident (the unused half of a
// doubled block, which `new T[cap]` wrote whole when an entry type had member initializers).
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "grow_array.h"

namespace simcore::detail {
namespace {

// An entry as the finish order's: a default member initializer makes `new T[n]` write each.
struct Entry {
  double t = 0;
  uint64_t stamp = 0;
  uint32_t slot = 0;
  uint8_t kind = 7;
};

// Resident pages among the whole pages of [from, to).
size_t resident_pages(const void* from, const void* to) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = (reinterpret_cast<uintptr_t>(from) + page - 1) & ~(page - 1);
  const uintptr_t b = reinterpret_cast<uintptr_t>(to) & ~(page - 1);
  if (b <= a) return 0;
  std::vector<unsigned char> v((b - a) / page);
  if (mincore(reinterpret_cast<void*>(a), b - a, v.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

TEST(GrowArray, EntriesSurviveGrowthAndStretches) {
  GrowArray<Entry> a;
  constexpr uint32_t kCount = 300000;  // ~7 MB: past kLargeBlock, many stretches
  for (uint32_t i = 0; i < kCount; ++i) a.push_back(Entry{i * 0.5, i, i ^ 0x5a5a5u, static_cast<uint8_t>(i)});
  ASSERT_EQ(a.size(), kCount);
  ASSERT_GE(a.capacity(), kCount);
  for (uint32_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(a[i].t, i * 0.5);
    ASSERT_EQ(a[i].stamp, i);
    ASSERT_EQ(a[i].slot, i ^ 0x5a5a5u);
    ASSERT_EQ(a[i].kind, static_cast<uint8_t>(i));
  }
  // Shortening keeps the prefix; appends after it overwrite what was past it.
  a.resize(1000);
  a.resize(5000);  // never longer than it is
  ASSERT_EQ(a.size(), 1000u);
  a.push_back(Entry{-1, 99, 98, 97});
  ASSERT_EQ(a.size(), 1001u);
  EXPECT_EQ(a[999].stamp, 999u);
  EXPECT_EQ(a[1000].stamp, 99u);
  const size_t cap = a.capacity();
  a.clear();
  EXPECT_TRUE(a.empty());
  for (uint32_t i = 0; i < kCount; ++i) a.push_back(Entry{0, i, 0, 0});
  EXPECT_EQ(a.capacity(), cap);  // the block is kept
  for (uint32_t i = 0; i < kCount; i += 997) ASSERT_EQ(a[i].stamp, i);
}

// A moved-from array is empty and takes appends again (its block went with the move).
TEST(GrowArray, AMovedFromArrayIsEmptyAndGrowsAnew) {
  GrowArray<Entry> a;
  for (uint32_t i = 0; i < 1000; ++i) a.push_back(Entry{0, i, 0, 0});
  GrowArray<Entry> b(std::move(a));
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_EQ(b[999].stamp, 999u);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.capacity(), 0u);
  for (uint32_t i = 0; i < 100; ++i) a.push_back(Entry{0, i, 0, 0});
  EXPECT_EQ(a[99].stamp, 99u);
  a = std::move(b);
  EXPECT_EQ(a.size(), 1000u);
  EXPECT_EQ(b.size(), 0u);
  b.push_back(Entry{0, 7, 0, 0});
  EXPECT_EQ(b[0].stamp, 7u);
}

TEST(GrowArray, PagesNoAppendReachedStayOut) {
  // meson test sets MALLOC_PERTURB_, with which glibc fills every block it hands out.
  mallopt(M_PERTURB, 0);
  GrowArray<Entry> a;
  // Just past a doubling: the block holds twice what was appended.
  uint32_t n = 0;
  while (a.capacity() * sizeof(Entry) < (size_t{16} << 20) || n < a.capacity() / 2 + 1) a.push_back(Entry{0, n++, 0, 0});
  ASSERT_GT(a.capacity(), a.size());
  const Entry* base = a.begin();
  const size_t past = static_cast<size_t>(a.size()) + 2 * GrowArray<Entry>::kStretch / sizeof(Entry);
  ASSERT_LT(past, a.capacity());
  const size_t unused = resident_pages(base + past, base + a.capacity());
  const size_t used = resident_pages(base, base + a.size());
  // What was appended is there; at most a stretch beyond it was brought in.
  EXPECT_GT(used, 0u);
  EXPECT_EQ(unused, 0u) << "pages past every append were made resident";
}

}  // namespace
}  // namespace simcore::detail
