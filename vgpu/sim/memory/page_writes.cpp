// Writes that leave zeros unbacked (see page_writes.h).
#include "sim/memory/page_writes.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace vgpu {
namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// Gives the whole pages [p, p + n) back so that they read zeros; false when the kernel refused
// (the caller then writes the zeros). A private anonymous page dropped by MADV_DONTNEED reads
// from the zero page again; a memfd page must leave the file itself (MADV_REMOVE punches the
// hole), since MADV_DONTNEED would only drop this process's view of it.
bool release(char* p, size_t n, PageRelease how) {
  if (n == 0) return true;
  const int advice = how == PageRelease::private_pages ? MADV_DONTNEED : MADV_REMOVE;
  return how != PageRelease::none && madvise(p, n, advice) == 0;
}

// Zeros [p, p + n) of whole pages: released, or written when that fails.
void zero_whole_pages(char* p, size_t n, PageRelease how, PageWriteResult* r) {
  if (release(p, n, how)) {
    r->released += n;
  } else {
    std::memset(p, 0, n);
    r->written += n;
  }
}

// Bytes from `to` up to its next page boundary.
size_t to_boundary(const char* to) {
  const size_t page = page_size();
  return (page - reinterpret_cast<uintptr_t>(to) % page) % page;
}

}  // namespace

bool all_zero(const char* p, size_t n) {
  // Zero in its first 16 bytes and equal to itself shifted by 16: zero throughout (memcmp is
  // the vectorised loop glibc already has).
  constexpr size_t kHead = 16;
  for (size_t i = 0; i < n && i < kHead; ++i)
    if (p[i] != 0) return false;
  return n <= kHead || std::memcmp(p, p + kHead, n - kHead) == 0;
}

PageWriteResult write_zeros(char* to, size_t n, PageRelease how) {
  PageWriteResult r;
  const size_t page = page_size(), head = to_boundary(to);
  if (how == PageRelease::none || n < head + page) {
    std::memset(to, 0, n);
    r.written = n;
    return r;
  }
  const size_t body = (n - head) / page * page;
  std::memset(to, 0, head);
  zero_whole_pages(to + head, body, how, &r);
  std::memset(to + head + body, 0, n - head - body);
  r.written += n - body;
  return r;
}

PageWriteResult copy_pages(char* to, const char* from, size_t n, PageRelease how) {
  PageWriteResult r;
  const size_t page = page_size(), head = to_boundary(to);
  const auto t = reinterpret_cast<uintptr_t>(to), f = reinterpret_cast<uintptr_t>(from);
  const bool overlap = t < f + n && f < t + n;
  if (how == PageRelease::none || overlap || n < head + page) {
    std::memmove(to, from, n);
    r.written = n;
    return r;
  }
  const size_t end = head + (n - head) / page * page;  // the whole destination pages: [head, end)
  std::memcpy(to, from, head);
  // Runs of pages alike (all zero, or not) are released or copied together; a copied run stays
  // short enough to still be in cache from its check.
  constexpr size_t kCopyRunPages = 64;
  size_t run = head;
  bool run_zero = false;
  auto flush = [&](size_t at) {
    if (at == run) return;
    if (run_zero) {
      zero_whole_pages(to + run, at - run, how, &r);
    } else {
      std::memcpy(to + run, from + run, at - run);
      r.written += at - run;
    }
    run = at;
  };
  for (size_t at = head; at < end; at += page) {
    const bool zero = all_zero(from + at, page);
    if (zero != run_zero || (!zero && at - run >= kCopyRunPages * page)) {
      flush(at);
      run_zero = zero;
    }
  }
  flush(end);
  std::memcpy(to + end, from + end, n - end);
  r.written += head + (n - end);
  return r;
}

}  // namespace vgpu
