// Recording kernel durations on the real GPU into the kernel-time database (VGPU_KERNEL_DB),
// which the sim backend replays: each forwarded launch gets a launch signature
// (exec/launch_signature.h, the same bytes the sim backend computes) and a CUPTI tag; the
// CUPTI duration of the tagged kernel is then recorded under the signature and the physical
// GPU's name.
#pragma once

#include <cstdint>

#include "driver/cuda_api.h"
#include "exec/launch_signature.h"

namespace vgpu::pt {

class KernelRecording {
 public:
  // The process's recorder; nullptr unless VGPU_KERNEL_DB is set and CUPTI could be started.
  static KernelRecording* get();

  // Brackets one forwarded launch on the calling thread (begin returns false when the launch
  // cannot be described: it is then forwarded unrecorded).
  virtual bool begin(CUfunction f, const LaunchShape& shape, void** params, void** extra) = 0;
  virtual void end() = 0;

  // Hands every completed measurement to the database now (also done at exit).
  virtual void flush() = 0;

  virtual ~KernelRecording() = default;
};

}  // namespace vgpu::pt
