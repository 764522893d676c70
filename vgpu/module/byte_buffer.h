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
  // Below this, operator new (a page-sized mapping each would waste more than it saves).
  static constexpr size_t kMapFrom = size_t{64} << 10;

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

// What a decompressor reserves for output of at most `limit` bytes that the input could
// plausibly fill up to `plausible`. All of `limit` when it would be mapped (pages never written
// cost no memory, so a lying size field costs nothing) and is at most 512 MiB: the buffer then
// never grows, which would copy it and for a moment hold it twice (the peak of a parse was 3
// times the largest entry). Else what the input could fill, grown as needed.
inline uint64_t reserve_for_output(uint64_t limit, uint64_t plausible) {
  constexpr uint64_t kMaxMappedReserve = uint64_t{512} << 20;
  if (limit >= MappedAllocator<uint8_t>::kMapFrom && limit <= kMaxMappedReserve) return limit;
  return limit < plausible ? limit : plausible;
}

}  // namespace vgpu::module
