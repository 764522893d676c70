// VGPU_QUERY_TRACE under the passthrough for the private slots the sim backend answers by guess
// or not at all: library_1734dc26[4] (cuBLAS calls it, the sim answers as an H200 did) and [13]
// (called after [4], refused by the sim)
// and context_info[39] / [51] (the sim answers as another clean-room driver does). With the
// trace on, cuGetExportTable hands out copies of those two tables whose traced slots call the
// real driver's and write what it answered (front/driver/query_lines.h, private_slot: the same
// words as the sim's lines), so that the two backends' answers compare. Trace off: the real
// tables are handed out untouched, as before.
#pragma once

#include "front/export_tables/catalog.h"

namespace vgpu::pt {

// Slot 0 of a real table holds its size in bytes: trusted within reason, else the catalog's count.
size_t real_table_slots(const void* const* real, darkapi::TableId id);

// The copy of `real` to hand out for table `id`, or nullptr when the trace is off or the table
// has no traced slot.
const void* const* traced_table(darkapi::TableId id, const void* const* real);

}  // namespace vgpu::pt
