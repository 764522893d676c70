// The buffer a fat binary entry is decompressed into. It lives only while the image is parsed,
// and its size varies from kilobytes to tens of megabytes from one image to the next (cuBLASLt
// holds 1,600 for sm_90). From malloc, such buffers leave the heap fragmented once freed: glibc
// raises its mmap threshold to the largest block freed, later ones come from the heap, and the
// small tables kept between them pin its pages. A process loading a CUDA library's modules kept
// 3 to 4 times the driver's live bytes as RssAnon that way (issue 23, docs/results.md
// "2026-11-26 sim backend memory"). Large buffers are mapped here instead, so freeing one gives
// its pages back to the system at once.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace vgpu::module {

template <class T>
struct MappedAllocator {
  using value_type = T;
  // Below this, operator new: a small buffer leaves at most a small hole, and a mapping each
  // would cost a system call (and under the sanitizers their shadow memory) per parse.
  static constexpr size_t kMapFrom = size_t{1} << 20;

  MappedAllocator() = default;
  template <class U>
  MappedAllocator(const MappedAllocator<U>&) noexcept {}  // NOLINT: rebinding, as allocators do

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    const size_t bytes = n * sizeof(T);
    if (bytes < kMapFrom) return static_cast<T*>(::operator new(bytes));
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);  // n is what allocate() was given
    if (bytes < kMapFrom) ::operator delete(p);
    else munmap(p, bytes);
  }
  friend bool operator==(const MappedAllocator&, const MappedAllocator&) { return true; }
};

// Bytes decompressed from an image: freed pages go back to the system (see above).
using ByteBuffer = std::vector<uint8_t, MappedAllocator<uint8_t>>;

}  // namespace vgpu::module
