// The handles the program holds for virtual primary contexts that have no real context yet
// (VGPU_LAZY_CONTEXTS). cudart asks for the primary context of every device at start-up
// (6bd5fb6c[2]) and keeps the answers; a real context made for each would cost every process
// one real context per virtual GPU (72 for 8 ranks on one GPU), while a rank uses one. So the
// answer is a stub: an address inside one block vgpu owns, one per virtual device, which the
// passthrough turns into the real context (made then) wherever the program hands it to the real
// driver, and which it gives back wherever the real driver hands that real context out.
//
// The block is made once per process and never freed (runtimes keep the handles), so a handle
// stays a stub for the life of the process and telling one apart is two compares: the private
// slots' trampolines (context_slots.h) make them in assembly on every call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "front/driver/cuda_api.h"
#include "front/export_tables/register_trampolines.h"

// The block is the range the private slots' trampolines watch (front/export_tables/
// register_trampolines.h): vgpu_trampoline_watch_base and _span hold its first address and its size
// in bytes (0: no stubs), set once, before the first handle is handed out.

namespace vgpu::pt::context_stubs {

// Makes the block for `devices` virtual devices (PassState's constructor, once per process; a
// later call keeps the first block).
void create(int devices);
// Virtual device v's stub; nullptr before create() or for a device past the block.
CUcontext stub(int v);
// The virtual device whose stub `ctx` is; -1 for any other handle (a real context, null).
inline int device_of(CUcontext ctx) {
  const uintptr_t span = __atomic_load_n(&vgpu_trampoline_watch_span, __ATOMIC_ACQUIRE);  // 0 until create()
  const uintptr_t off = reinterpret_cast<uintptr_t>(ctx) - __atomic_load_n(&vgpu_trampoline_watch_base, __ATOMIC_RELAXED);
  if (off >= span) return -1;
  return static_cast<int>(off / 64);  // each stub is a 64-byte slot (context_stubs.cpp)
}
inline bool is_stub(CUcontext ctx) { return device_of(ctx) >= 0; }
// Whether create() made the block (VGPU_LAZY_CONTEXTS is on).
inline bool active() { return __atomic_load_n(&vgpu_trampoline_watch_span, __ATOMIC_ACQUIRE) != 0; }

}  // namespace vgpu::pt::context_stubs
