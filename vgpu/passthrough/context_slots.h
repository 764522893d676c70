// The private tables' slots under VGPU_LAZY_CONTEXTS: the program may hold a stub where the real
// driver expects a context (context_stubs.h), and the private tables take contexts too: cudart
// checks a device's primary context through 263e8860[2] when it first uses the device, cuBLAS
// asks 21318c60[51] and [39] about the current context, cuFFT passes one to 6e163fbe[7], and the
// context-local storage (c693336e) is keyed by them. Most slots' signatures are not known, so
// every slot of those tables goes through a trampoline (front/export_tables/register_trampolines.h)
// that replaces any of the six integer argument registers holding a stub by its real context
// (made then) and jumps to the real slot with everything else as it came: other registers, the
// stack, the return registers. What slots
// write back is left as the real driver wrote it: the one known to give a context out (42d85a81[2],
// the calling thread's current one) is the tools' (cudart was not seen calling it), and a tool
// that got a stub from it would hand it on to tables vgpu does not know.
#pragma once

#include <cstddef>

#include "front/export_tables/catalog.h"

namespace vgpu::pt {

// (The tables above have 227 slots in the catalog, within the 512 trampolines; a real driver's
// header may name more: the slots past the last trampoline are handed out as they are.)

// The table to hand out in place of `real` for table `id` (built once: a copy whose slots
// translate stubs); nullptr when VGPU_LAZY_CONTEXTS is off or the table takes no context.
const void* const* context_translating_table(darkapi::TableId id, const void* const* real);

}  // namespace vgpu::pt
