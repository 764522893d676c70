// Memory taken from the system in aligned mappings, for the engine's stores that grow with the
// flows a caller keeps (the id table, the group logs' slabs): pages count only once written,
// and a mapping of 2 MiB or more is advised for transparent huge pages.
//
// Why huge pages: on the virtual machines the engine runs on (the 2-core build container, the
// device hosts) each first touch of a 4 KiB page costs ~20 us, so a 4096-GPU ring that kept
// 255 MB faulted ~63 k pages, about a fifth of its run; a 2 MiB page takes one fault for 512
// of them (256 MB in 0.65 s against 1.4-1.5 s, measured here 2026-11-29). Where the system
// has them off (`transparent_hugepage` = never) the advice is ignored and nothing changes.
#pragma once

#include <cstddef>

namespace simcore::detail {

inline constexpr size_t kHugePage = size_t{2} << 20;

// `bytes` (a multiple of `align`, a power of two of at least 4 KiB) of zeroed memory aligned
// to `align`; throws std::bad_alloc when the system has none.
void* map_aligned(size_t bytes, size_t align);
// A mapping of map_aligned(), whole.
void unmap(void* p, size_t bytes);

}  // namespace simcore::detail
