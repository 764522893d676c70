// Writes into the host memory behind device memory that leave zeros unbacked (issue 23: host
// memory per rank). Device memory is host memory mapped on demand; a page that is to hold only
// zeros is given back to the kernel instead of being written, since a released page of the
// backing reads zeros again. The result is exactly what writing would leave; what is saved is the
// host memory: a memset of 0 over gigabytes, or a copy from never-written memory (which reads as
// zeros), costs no pages. Partial pages at the ends of a range are written as usual.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vgpu {

// How the whole pages of a destination can be given back so that they read zeros.
enum class PageRelease : uint8_t {
  none,           // not the driver's to give back (registered or pageable host memory): written
  private_pages,  // a private anonymous mapping: madvise(MADV_DONTNEED)
  shared_pages,   // a shared mapping of a memfd (VMM, IPC-exported): madvise(MADV_REMOVE)
};

// What one write did with its destination's bytes.
struct PageWriteResult {
  uint64_t written = 0;   // bytes stored
  uint64_t released = 0;  // bytes of whole pages given back instead (they read zeros)
};

// True when all `n` bytes at `p` are zero.
bool all_zero(const char* p, size_t n);

// Sets `n` bytes at `to` to zero: the whole pages inside released as `how` says (written when
// that fails, or `how` is none), the partial ends written.
PageWriteResult write_zeros(char* to, size_t n, PageRelease how);

// memmove(to, from, n), except that each whole destination page whose source bytes are all zero
// is released as `how` says instead of written. Overlapping ranges are moved as memmove does.
PageWriteResult copy_pages(char* to, const char* from, size_t n, PageRelease how);

}  // namespace vgpu
