#include "mapped_region.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace simcore::detail {

void* map_aligned(size_t bytes, size_t align) {
  // Aligned by trimming a larger mapping: through malloc an aligned block left a gap of up to
  // `align` before it, partly written.
  const size_t want = bytes + align;
  void* m = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t from = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (from + align - 1) & ~(uintptr_t{align} - 1);
  const uintptr_t end = from + want, keep_end = aligned + bytes;
  if (aligned > from) munmap(m, aligned - from);
  if (end > keep_end) munmap(reinterpret_cast<void*>(keep_end), end - keep_end);
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  if (bytes >= kHugePage && align >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // advice only
#endif
  return p;
}

void unmap(void* p, size_t bytes) { munmap(p, bytes); }

}  // namespace simcore::detail
