// Memory taken from the system in aligned mappings, for the engine's stores that grow with the
// flows a caller keeps (the id table, the group logs' slabs): pages count only once written.
// Transparent huge pages only when the engine owns its process (EngineOptions::huge_pages).
#pragma once

#include <cstddef>

namespace simcore::detail {

inline constexpr size_t kMappingAlign = size_t{2} << 20;  // the mappings' alignment and least size

// `bytes` (a multiple of `align`, a power of two of at least 4 KiB) of zeroed memory aligned
// to `align`, advised for transparent huge pages when `huge_pages`; throws std::bad_alloc when
// the system has none.
void* map_aligned(size_t bytes, size_t align, bool huge_pages = false);
// A mapping of map_aligned(), whole.
void unmap(void* p, size_t bytes);
// The pages holding [p, p + bytes) (in a mapping of map_aligned() or a heap block: every one of
// them is mapped and writable, and being made present changes no byte) made present now, in one
// call (MADV_POPULATE_WRITE; nothing where the kernel has no such advice), for a store about to
// be written through: each page's first write otherwise took a fault of its own, and a fault cost
// ~7 us on the virtual machines the benchmarks ran on (a whole 1024-GPU ring submitted before
// one query took 56 k of them, a third of its time). Not for a mapping on huge pages: its first
// write brings in 2 MiB at once already.
void populate(void* p, size_t bytes);

}  // namespace simcore::detail
