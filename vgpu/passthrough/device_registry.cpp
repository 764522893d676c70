// The passthrough backend's answers to core/device_registry.h.
#include "front/device/device_registry.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/thread_clock.h"
#include "passthrough/real_driver.h"

namespace vgpu {

const DeviceRegistry* device_registry() { return pt::PassState::get(); }

CUresult backend_initialize(unsigned int flags) { return pt::PassState::initialize(flags); }

// The real driver's version: the runtime's integrity hash covers it, and a program must see the
// driver it really runs on.
int backend_driver_version() {
  int v = CUDA_VERSION;
  if (auto get = VGPU_REAL("cuDriverGetVersion", CUresult (*)(int*))) get(&v);
  return v;
}

// vgpu's clock table (darkapi/vgpu_clock_table.h): a thread has a virtual clock once it has
// submitted or synchronized work on a virtual device (passthrough/thread_clock.h); threads
// that never did (NCCL's watchdog, rendezvous) keep real time.
bool backend_thread_virtual_now(double* seconds) {
  if (seconds == nullptr || !pt::thread_clock::has_clock()) return false;
  *seconds = pt::thread_clock::now();
  return true;
}

bool backend_thread_handoff(double seconds) {
  if (!pt::thread_clock::has_clock()) return false;
  pt::thread_clock::handoff(seconds);
  return true;
}

bool backend_thread_in_call() { return pt::thread_clock::paused(); }

}  // namespace vgpu
