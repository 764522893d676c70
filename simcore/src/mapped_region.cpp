#include "mapped_region.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <new>

// LeakSanitizer scans the heap, globals and stacks, not mappings: a heap block whose only pointer
// lies in a mapping (a record's spilled rate history, in a chunk of records) would read as leaked
// at exit. The mappings are registered as roots for it to scan.
#if defined(__SANITIZE_ADDRESS__) && __has_include(<sanitizer/lsan_interface.h>)
#include <sanitizer/lsan_interface.h>
#define SIMCORE_LSAN_ROOTS 1
#endif

namespace simcore::detail {

// MADV_HUGEPAGE only when asked (EngineOptions::huge_pages: the engine owns its process). In
// process, the first touch of a 2 MiB page zeroes it inside whichever call made the record, and
// a thread's virtual clock can be charged for it (exec_graph_test's direct submission read
// 1.8-5.9 ms for 0.66 under TSan on a loaded machine with the advice for every engine, 5 of 5
// right without; 2026-11-29). It made a 4096-GPU ring 0.4 s faster (5.56-5.85 against 6.02-7.20 s).
void* map_aligned(size_t bytes, size_t align, bool huge_pages) {
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
  if (huge_pages) madvise(p, bytes, MADV_HUGEPAGE);  // (advice: refused, it changes nothing)
#ifdef SIMCORE_LSAN_ROOTS
  __lsan_register_root_region(p, bytes);
#endif
  return p;
}

void populate(void* p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  // Refused once (a kernel before 5.14: EINVAL), never asked again.
  static std::atomic<bool> refused{false};
  if (bytes == 0 || refused.load(std::memory_order_relaxed)) return;
  // Whole pages (a block need not start or end on one; the pages it touches are mapped).
  static const uintptr_t kPage = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t from = reinterpret_cast<uintptr_t>(p) & ~(kPage - 1);
  const uintptr_t to = (reinterpret_cast<uintptr_t>(p) + bytes + kPage - 1) & ~(kPage - 1);
  if (madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
    refused.store(true, std::memory_order_relaxed);
#else
  (void)p;
  (void)bytes;
#endif
}

void unmap(void* p, size_t bytes) {
#ifdef SIMCORE_LSAN_ROOTS
  __lsan_unregister_root_region(p, bytes);
#endif
  munmap(p, bytes);
}

}  // namespace simcore::detail
