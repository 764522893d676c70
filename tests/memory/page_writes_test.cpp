// The writes that leave zeros unbacked (vgpu/sim/memory/page_writes.h), on their own, over the two
// backings the sim backend gives device memory: a private anonymous mapping and a shared memfd
// mapping. Every byte must end as memset / memmove would leave it; whole pages of zeros must be
// released (not resident afterwards), partial ones written.
#include "sim/memory/page_writes.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace vgpu {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// A mapping of `pages` pages, private anonymous or shared over a memfd of its own.
struct Mapping {
  char* p = nullptr;
  size_t bytes = 0;
  int fd = -1;
  Mapping(size_t pages, bool shared) : bytes(pages * kPage) {
    if (shared) {
      fd = memfd_create("page-writes-test", MFD_CLOEXEC);
      if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return;
    }
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS,
                   fd, 0);
    p = m == MAP_FAILED ? nullptr : static_cast<char*>(m);
  }
  ~Mapping() {
    if (p) munmap(p, bytes);
    if (fd >= 0) close(fd);
  }
  // Pages of [at, at + n) resident (for a memfd: in the file).
  size_t resident(size_t at, size_t n) const {
    std::vector<unsigned char> v(n / kPage);
    if (mincore(p + at, n, v.data()) != 0) return SIZE_MAX;
    size_t count = 0;
    for (unsigned char c : v) count += c & 1;
    return count;
  }
};

uint8_t byte_at(size_t i) { return static_cast<uint8_t>(i * 131 + 7) | 1; }

void fill(char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(byte_at(i));
}

TEST(PageWrites, AllZero) {
  std::vector<char> b(3 * kPage + 5, 0);
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, kPage, b.size()})
    EXPECT_TRUE(all_zero(b.data(), n)) << n;
  for (size_t at : {size_t{0}, size_t{7}, size_t{15}, size_t{16}, size_t{31}, kPage - 1, kPage, b.size() - 1}) {
    b[at] = 1;
    EXPECT_FALSE(all_zero(b.data(), b.size())) << "a non-zero byte at " << at;
    EXPECT_TRUE(at == 0 || all_zero(b.data(), at)) << "zeros before " << at;
    b[at] = 0;
  }
}

class Backing : public ::testing::TestWithParam<bool> {
 protected:
  bool shared() const { return GetParam(); }
  PageRelease how() const { return shared() ? PageRelease::shared_pages : PageRelease::private_pages; }
};

TEST_P(Backing, WriteZerosReleasesWholePagesAndWritesTheEnds) {
  Mapping m(16, shared());
  ASSERT_NE(m.p, nullptr);
  fill(m.p, m.bytes);
  const size_t at = kPage + 100, n = 10 * kPage;  // pages 1 (part), 2-10 (whole), 11 (part)
  const PageWriteResult r = write_zeros(m.p + at, n, how());
  EXPECT_EQ(r.released, 9 * kPage);
  EXPECT_EQ(r.written, n - 9 * kPage);
  // (Checked before reading them back: a page only read maps the zero page, which mincore
  // counts, and a memfd hole read is given a page by the kernel.)
  EXPECT_EQ(m.resident(2 * kPage, 9 * kPage), 0u) << "the whole pages were given back";
  for (size_t i = 0; i < m.bytes; ++i)
    ASSERT_EQ(static_cast<uint8_t>(m.p[i]), i >= at && i < at + n ? 0 : byte_at(i)) << "byte " << i;
}

TEST_P(Backing, WriteZerosWithoutReleaseWrites) {
  Mapping m(4, shared());
  ASSERT_NE(m.p, nullptr);
  fill(m.p, m.bytes);
  const PageWriteResult r = write_zeros(m.p, m.bytes, PageRelease::none);
  EXPECT_EQ(r.released, 0u);
  EXPECT_EQ(r.written, m.bytes);
  EXPECT_TRUE(all_zero(m.p, m.bytes));
  EXPECT_EQ(m.resident(0, m.bytes), 4u);
}

TEST_P(Backing, CopyReleasesThePagesOfZerosOnly) {
  // Source: pages alternately zero and not, at an offset that is no page's start; destination
  // written before, at another one.
  Mapping src(24, false), dst(24, shared());
  ASSERT_NE(src.p, nullptr);
  ASSERT_NE(dst.p, nullptr);
  const size_t from = 300, to = 2 * kPage + 1000, n = 16 * kPage;
  for (size_t pg = 0; pg < 20; ++pg) {
    if (pg % 3 == 0) fill(src.p + pg * kPage, kPage);
  }
  fill(dst.p, dst.bytes);
  std::vector<char> want(dst.p, dst.p + dst.bytes);
  std::memcpy(want.data() + to, src.p + from, n);
  const PageWriteResult r = copy_pages(dst.p + to, src.p + from, n, how());
  const size_t resident = dst.resident(0, dst.bytes);  // before reading the pages back
  EXPECT_EQ(std::memcmp(dst.p, want.data(), dst.bytes), 0) << "every byte as memmove leaves it";
  EXPECT_EQ(r.written + r.released, n);
  // The whole destination pages whose source bytes are all zero.
  size_t zero_pages = 0;
  const size_t first = (to + kPage - 1) / kPage * kPage, end = (to + n) / kPage * kPage;
  for (size_t d = first; d < end; d += kPage) zero_pages += all_zero(want.data() + d, kPage);
  EXPECT_GT(zero_pages, 4u);
  EXPECT_EQ(r.released, zero_pages * kPage);
  EXPECT_EQ(resident, 24 - zero_pages);
}

TEST_P(Backing, OverlappingCopiesMoveAsMemmove) {
  Mapping m(12, shared());
  ASSERT_NE(m.p, nullptr);
  for (long shift : {long(kPage) + 3, -long(2 * kPage) - 5}) {
    fill(m.p, m.bytes);
    std::memset(m.p + 4 * kPage, 0, 3 * kPage);  // zero pages inside the moved range
    std::vector<char> want(m.p, m.p + m.bytes);
    const size_t from = 3 * kPage, n = 6 * kPage;
    std::memmove(want.data() + from + shift, want.data() + from, n);
    copy_pages(m.p + from + shift, m.p + from, n, how());
    EXPECT_EQ(std::memcmp(m.p, want.data(), m.bytes), 0) << "shift " << shift;
  }
}

TEST_P(Backing, SmallRangesAreWritten) {
  Mapping m(2, shared());
  ASSERT_NE(m.p, nullptr);
  fill(m.p, m.bytes);
  std::vector<char> zeros(kPage, 0);
  // Less than a whole page inside: nothing to release.
  const PageWriteResult a = copy_pages(m.p + 10, zeros.data(), kPage, how());
  const PageWriteResult b = write_zeros(m.p + kPage + 1, kPage - 2, how());
  EXPECT_EQ(a.released + b.released, 0u);
  EXPECT_TRUE(all_zero(m.p + 10, kPage));
  EXPECT_TRUE(all_zero(m.p + kPage + 1, kPage - 2));
  EXPECT_EQ(static_cast<uint8_t>(m.p[2 * kPage - 1]), byte_at(2 * kPage - 1));
}

INSTANTIATE_TEST_SUITE_P(PrivateAndMemfd, Backing, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "memfd" : "private"; });

// Pages the kernel will not release (locked) are written instead: the zeros are there anyway.
TEST(PageWrites, RefusedReleaseWritesTheZeros) {
  Mapping m(4, false);
  ASSERT_NE(m.p, nullptr);
  fill(m.p, m.bytes);
  // Through syscall(): the sanitizers' mlock() does nothing.
  if (syscall(SYS_mlock, m.p, m.bytes) != 0) GTEST_SKIP() << "mlock refused (RLIMIT_MEMLOCK)";
  const PageWriteResult r = write_zeros(m.p, m.bytes, PageRelease::private_pages);
  EXPECT_EQ(r.released, 0u);
  EXPECT_EQ(r.written, m.bytes);
  EXPECT_TRUE(all_zero(m.p, m.bytes));
  syscall(SYS_munlock, m.p, m.bytes);
}

// A private mapping's release on a memfd mapping would leave the file's bytes: why the owner's
// kind is read when the write runs (an export remaps a private allocation onto a memfd).
TEST(PageWrites, MemfdPagesNeedTheirOwnRelease) {
  Mapping m(4, true);
  ASSERT_NE(m.p, nullptr);
  fill(m.p, m.bytes);
  write_zeros(m.p, m.bytes, PageRelease::private_pages);
  EXPECT_FALSE(all_zero(m.p, m.bytes)) << "MADV_DONTNEED dropped only this process's view";
  write_zeros(m.p, m.bytes, PageRelease::shared_pages);
  EXPECT_TRUE(all_zero(m.p, m.bytes));
}

}  // namespace
}  // namespace vgpu
