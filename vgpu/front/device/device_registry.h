// The virtual devices as the backend-neutral entry points see them (front/driver/device_api.cpp:
// enumeration, identity, attributes, peers). Each backend provides the three functions below
// once; the same device queries then serve both, so every answer agrees with the config.
#pragma once

#include "front/device/device.h"
#include "front/driver/cuda_api.h"

namespace vgpu {

class DeviceRegistry {
 public:
  virtual ~DeviceRegistry() = default;
  virtual int device_count() const = 0;
  virtual Device* device(int ordinal) const = 0;  // nullptr when out of range
  virtual bool nvlink() const = 0;                // GPUs of one node reach each other directly
};

// The backend's devices; nullptr before a successful cuInit.
const DeviceRegistry* device_registry();
// cuInit of the backend.
CUresult backend_initialize(unsigned int flags);
// cuDriverGetVersion of the backend.
int backend_driver_version();
// The calling thread's virtual clock in seconds, for vgpu's clock table
// (contracts/vgpu_clock_table.h, `vgpu-run --virtual-clock`): true and *seconds when the thread
// has one, false when its timing must stay real. Called from inside clock_gettime on any
// thread: must not throw, log, or block on anything but the backend's own short locks.
bool backend_thread_virtual_now(double* seconds);
// The calling thread goes on from work another thread handed it when that thread's virtual
// clock read `seconds` (vgpu's clock table, slot 3): a thread with a virtual clock moves there
// (never back) and answers true; one without keeps real time and answers false. Same
// constraints as backend_thread_virtual_now.
bool backend_thread_handoff(double seconds);
// Whether the calling thread is inside a driver call that vgpu times (its clock is paused):
// its clock reads then stay real (the clock table answers kClockRealForNow), so that vgpu's and
// the real driver's own timeouts keep real time.
bool backend_thread_in_call();

}  // namespace vgpu
