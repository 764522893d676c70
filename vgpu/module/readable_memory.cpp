#include "module/readable_memory.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace vgpu::module {
namespace {

constexpr uint64_t kPage = 4096;  // probing at 4 KiB steps is right for any larger page size too
constexpr size_t kBatch = 512;     // pages probed per system call (IOV_MAX is 1024)

}  // namespace

bool readable(const void* p, uint64_t n) noexcept {
  if (n == 0) return true;
  const auto start = reinterpret_cast<uintptr_t>(p);
  if (start + n < start) return false;  // wraps around the address space
  const uintptr_t last = start + n - 1;
  // One byte of each page the range touches: the first byte of the range, then each page start.
  uintptr_t at = start;
  bool done = false;
  char sink[kBatch];
  iovec local[kBatch], remote[kBatch];
  while (!done) {
    size_t k = 0;
    while (k < kBatch && !done) {
      local[k] = {&sink[k], 1};
      remote[k] = {reinterpret_cast<void*>(at), 1};
      ++k;
      const uintptr_t next = (at / kPage + 1) * kPage;
      done = next > last || next < at;
      at = next;
    }
    const ssize_t got = process_vm_readv(getpid(), local, k, remote, k, 0);
    if (got < 0) return errno == ENOSYS || errno == EPERM;  // cannot ask: as before, trust it
    if (static_cast<size_t>(got) != k) return false;
  }
  return true;
}

uint64_t readable_strnlen(const char* p, uint64_t cap, bool* unreadable) noexcept {
  *unreadable = false;
  uint64_t n = 0;
  while (n < cap) {
    const uintptr_t here = reinterpret_cast<uintptr_t>(p + n);
    const uint64_t in_page = std::min<uint64_t>(kPage - here % kPage, cap - n);
    if (!readable(p + n, 1)) {
      *unreadable = true;
      return n;
    }
    const void* nul = std::memchr(p + n, 0, static_cast<size_t>(in_page));
    if (nul != nullptr) return n + static_cast<uint64_t>(static_cast<const char*>(nul) - (p + n));
    n += in_page;
  }
  return cap;
}

}  // namespace vgpu::module
