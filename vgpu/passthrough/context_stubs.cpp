#include "passthrough/context_stubs.h"

#include <cstdlib>
#include <cstring>

namespace vgpu::pt::context_stubs {
namespace {

// A stub's 64 bytes: a text that says what it is for whoever finds one in a debugger or a core
// dump, and the device it stands for. The real driver never reads them (it never sees a stub).
struct alignas(64) Stub {
  char what[48];
  int32_t device;
};
static_assert(sizeof(Stub) == 64);

}  // namespace

void create(int devices) {
  // Called once, by the backend's state (made once per process, before any handle is handed out).
  if (devices <= 0 || active()) return;
  // Never freed: the program keeps the handles until it exits.
  auto* block = static_cast<Stub*>(std::aligned_alloc(64, sizeof(Stub) * static_cast<size_t>(devices)));
  if (block == nullptr) return;
  for (int v = 0; v < devices; ++v) {
    std::memset(&block[v], 0, sizeof(Stub));
    std::strncpy(block[v].what, "vgpu: virtual primary context, no real one yet", sizeof(block[v].what) - 1);
    block[v].device = v;
  }
  __atomic_store_n(&vgpu_trampoline_watch_base, reinterpret_cast<uintptr_t>(block), __ATOMIC_RELAXED);
  __atomic_store_n(&vgpu_trampoline_watch_span, sizeof(Stub) * static_cast<size_t>(devices), __ATOMIC_RELEASE);
}

CUcontext stub(int v) {
  if (v < 0 || static_cast<uintptr_t>(v) >= __atomic_load_n(&vgpu_trampoline_watch_span, __ATOMIC_ACQUIRE) / sizeof(Stub))
    return nullptr;
  return reinterpret_cast<CUcontext>(__atomic_load_n(&vgpu_trampoline_watch_base, __ATOMIC_RELAXED) + 64 * static_cast<uintptr_t>(v));
}

}  // namespace vgpu::pt::context_stubs
