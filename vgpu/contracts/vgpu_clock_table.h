// vgpu's own private export table: the calling thread's virtual clock, for the clock shim
// libvgpu-vclock.so (vgpu/vclock/, `vgpu-run --virtual-clock`). No real driver serves this
// UUID, so a program that asks for it learns whether it runs on vgpu.
//
//   cuGetExportTable(&table, &id) with id = 73fcef93-cbc9-45ca-8589-2a4aa99aea2c
//   (the bytes below, in order; a random UUID chosen once for vgpu, never to be changed)
//
//   slot 0  size_t  the table's size in bytes (8 x 4; 8 x 3 in version 1), as the real drivers'
//           tables start
//   slot 1  int (*thread_virtual_now)(double* seconds)
//             0 and *seconds = the calling thread's virtual clock when the thread has one,
//             -1 (and *seconds untouched) otherwise or when seconds is null,
//             1 (and *seconds untouched): the thread has a virtual clock but this reading must
//               be real (it is the driver's own, made inside a driver call): the shim answers
//               the real clock for it and leaves the thread's readings as they were.
//             Never fails hard: safe on any thread, at any time, before cuInit too.
//   slot 2  int (*version)(void)   kVgpuClockTableVersion; a new slot bumps it
//   slot 3  int (*thread_handoff)(double seconds)   (version 2)
//             the calling thread goes on from work another thread handed it (it woke from a
//             condition variable that thread signalled when its virtual clock read `seconds`):
//             its clock moves there, never back. 0 when the thread has a virtual clock (moved or
//             already past), -1 when it has none or is inside a driver call (nothing changes).
//             Same safety as slot 1.
//
// Both backends serve it, before their catalogued tables. Which threads have a clock is the
// backend's rule (backend_thread_virtual_now, front/device/device_registry.h).
//
// The constants are plain C++ with no CUDA header so that the shim, which must not depend on
// the driver, shares them.
#pragma once

#include <cstddef>

struct CUuuid_st;  // cuda.h's CUuuid, without including cuda.h

namespace vgpu::darkapi {

inline constexpr unsigned char kVgpuClockTableUuid[16] = {
    0x73, 0xfc, 0xef, 0x93, 0xcb, 0xc9, 0x45, 0xca,
    0x85, 0x89, 0x2a, 0x4a, 0xa9, 0x9a, 0xea, 0x2c};
inline constexpr int kVgpuClockTableVersion = 2;

// Slot 1's answers.
inline constexpr int kClockVirtual = 0;
inline constexpr int kClockNone = -1;
inline constexpr int kClockRealForNow = 1;

inline constexpr std::size_t kClockSlotSize = 0;
inline constexpr std::size_t kClockSlotThreadVirtualNow = 1;
inline constexpr std::size_t kClockSlotVersion = 2;
inline constexpr std::size_t kClockSlotThreadHandoff = 3;
inline constexpr std::size_t kClockTableSlotsV1 = 3;  // a version-1 driver's table
inline constexpr std::size_t kClockTableSlots = 4;

using ThreadVirtualNowFn = int (*)(double* seconds);
using ThreadHandoffFn = int (*)(double seconds);
using ClockTableVersionFn = int (*)();

// When `id` is the clock table's UUID and `table` is not null: sets *table to the table and
// returns true (cuGetExportTable then answers CUDA_SUCCESS). Otherwise false, nothing written.
bool serve_vgpu_clock_table(const CUuuid_st* id, const void** table);

}  // namespace vgpu::darkapi
