// The clock table (vgpu_clock_table.h), shared by both backends: its slots only ask the
// backend's backend_thread_virtual_now and backend_thread_handoff.
#include "contracts/vgpu_clock_table.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>

#include "front/device/device_registry.h"
#include "front/export_tables/trace.h"
#include "front/driver/cuda_api.h"

namespace vgpu::darkapi {
namespace {

// Called by the shim from inside clock_gettime on any thread of the process, so nothing here
// may throw, log or take a lock the backend does not already take for it.
int thread_virtual_now(double* seconds) noexcept {
  if (seconds == nullptr) return kClockNone;
  try {
    double now = 0;
    if (backend_thread_in_call()) return kClockRealForNow;
    if (!backend_thread_virtual_now(&now)) return kClockNone;
    *seconds = now;
    return kClockVirtual;
  } catch (...) {
    return kClockNone;
  }
}

int thread_handoff(double seconds) noexcept {
  try {
    if (backend_thread_in_call()) return kClockNone;  // the driver's own waits hand nothing over
    return backend_thread_handoff(seconds) ? kClockVirtual : kClockNone;
  } catch (...) {
    return kClockNone;
  }
}

int version() noexcept { return kVgpuClockTableVersion; }

const void* const kTable[kClockTableSlots] = {
    reinterpret_cast<const void*>(static_cast<uintptr_t>(kClockTableSlots * sizeof(void*))),
    reinterpret_cast<const void*>(&thread_virtual_now),
    reinterpret_cast<const void*>(&version),
    reinterpret_cast<const void*>(&thread_handoff),
};

// When the driver is loaded into a process that preloads the clock shim (libvgpu-vclock.so,
// vgpu/vclock/driver_clock.h), hand it the table at once: the shim would otherwise find the
// driver only at its next look, up to 50 ms later, and a program's first timings after loading
// the driver would still read real time. Without the shim nothing is found and nothing happens.
__attribute__((constructor)) void announce_to_clock_shim() {
  using Attach = void (*)(const void* table);
  if (auto attach = reinterpret_cast<Attach>(dlsym(RTLD_DEFAULT, "vgpu_vclock_attach")))
    attach(kTable);
  else
    dlerror();  // leave no "undefined symbol" behind for the program's own dlerror() checks
}

}  // namespace

bool serve_vgpu_clock_table(const CUuuid_st* id, const void** table) {
  if (id == nullptr || table == nullptr) return false;
  if (std::memcmp(id->bytes, kVgpuClockTableUuid, sizeof kVgpuClockTableUuid) != 0) return false;
  *table = kTable;
  if (trace_enabled()) trace_line(fmt::format("cuGetExportTable(vgpu clock table) at {} -> 0",
                                              static_cast<const void*>(kTable)));
  return true;
}

}  // namespace vgpu::darkapi
