// The calling thread's virtual clock, from vgpu's driver through its clock table
// (contracts/vgpu_clock_table.h).
//
// The driver may be loaded late (PyTorch dlopens libcuda.so.1 on first use, with RTLD_LOCAL),
// so the table is found in two ways:
//  - pushed: vgpu's driver, when it is loaded, looks for the shim's exported
//    vgpu_vclock_attach() and hands it the table (darkapi/vgpu_clock_table.cpp). Immediate,
//    and costs the shim nothing.
//  - looked for, as a fallback (a driver that does not push): among the loaded objects
//    (dl_iterate_phdr) one whose file is named libcuda.so*, asked with its own
//    cuGetExportTable. Looking takes the dynamic loader's lock, so it happens at most once
//    every kRetryNs for the whole process, by one thread at a time; a thread that submitted work
//    meanwhile switches at its next reading (readings stay monotonic either way). When every
//    loaded libcuda declines the table (a real NVIDIA driver, not vgpu's), it stops looking.
// Once found, the table is kept for good, its library pinned with a dlopen reference so that it
// can never be unloaded under the pointer.
//
// The caller must hold the shim's recursion guard: the driver reads clocks itself.
#pragma once

#include <cstdint>

namespace vgpu::vclock_shim {

inline constexpr int64_t kRetryNs = 50'000'000;  // 50 ms

// The driver's answer for the calling thread (darkapi::kClockVirtual with *seconds,
// kClockNone, or kClockRealForNow); kClockNone while no vgpu driver is known.
// `real_monotonic_ns`: the real CLOCK_MONOTONIC now, which paces the lookups.
int driver_virtual_now(int64_t real_monotonic_ns, double* seconds);

// The calling thread goes on from work handed over at the virtual time `seconds` (the driver's
// clock table, slot 3): true when the driver moved the thread's clock (or it was already past).
// False, nothing done, while no driver of version 2 or later is known or the thread has no clock.
bool driver_handoff(double seconds);

// In a forked child: the parent's driver state was copied, not inherited; every thread of the
// child keeps real time (from where its readings were).
void forget_driver_after_fork();

}  // namespace vgpu::vclock_shim

// The push (see above): `table` is the clock table of the driver being loaded. The first valid
// table wins. Exported by name; the driver finds it with dlsym(RTLD_DEFAULT).
extern "C" __attribute__((visibility("default"))) void vgpu_vclock_attach(const void* table);
