// Recording kernel durations on the real GPU into the kernel-time database (VGPU_KERNEL_DB),
// which the sim backend replays, under the launch signature (exec/launch_signature.h, the same
// bytes the sim backend computes) and the physical GPU's name.
//
// By default the database gets the measurements of the virtual timeline (launch_api.cpp: each
// signature's first launches, measured alone). With VGPU_MEASURE=cupti (or serialize) it gets
// instead CUPTI's duration of every executed launch, found again in CUPTI's records by stream
// order: that is what KernelRecording does.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "front/driver/cuda_api.h"
#include "front/launch/launch_signature.h"

namespace vgpu {
class KernelTimeDb;
}

namespace vgpu::pt {

// The database of physical GPU `physical`'s model; nullptr when VGPU_KERNEL_DB is unset.
KernelTimeDb* physical_kernel_db(int physical);

// A launch was measured (launch_api.cpp); `settled`: the duration this sample settled its
// signature at, within what the job's ranks measured of the same work (what the signature's
// launches take from now on). A settled signature gets its exact row (the least of what the
// job's ranks and earlier recordings settled, as the passthrough's timeline takes across
// processes) and its settling group, at most as long
// (front/launch/signature_settling.h: which by-value words stopped keying, the ranges measured),
// so that a replay whose launches carry other stack garbage finds it (kernel_time_db.h). The
// first call also has every group recorded again at exit, with the ranges grown since, and
// the groups still measuring at their smallest learnable sample: a short recording covers
// every launch it measured. (A process driving GPUs of several models records only what
// settled: its groups do not say which GPU measured them.)
void record_measured(KernelTimeDb& db, const LaunchSignature& signature, std::optional<double> settled);

class KernelRecording {
 public:
  // The process's recorder (the backend root's, passthrough.h, started on first use);
  // nullptr unless VGPU_KERNEL_DB is set and CUPTI could be started.
  static KernelRecording* get();
  // Starts the recorder as get() describes; for the root.
  static KernelRecording* start();

  // Brackets one forwarded launch on the calling thread (begin returns false when the launch
  // is not recorded: it is then forwarded as is). The launch is found again in CUPTI's records
  // by its stream and place in it (Recorder::expect_kernel): kernels launched by the CUDA
  // runtime carry the runtime call's correlation id, which our tag never meets.
  struct Launch {
    CUcontext context;
    CUstream stream;
    bool per_thread;
    std::string_view name;
    LaunchShape shape;
  };
  virtual bool begin(const LaunchSignature& signature, const Launch& launch) = 0;
  // `launched`: the real driver accepted the launch.
  virtual void end(bool launched) = 0;

  // A stream or context is gone: its handle may come back as another one.
  virtual void forget_stream(CUcontext context, CUstream stream) = 0;
  virtual void forget_context(CUcontext context) = 0;

  // Hands every completed measurement to the database now (also done at exit).
  virtual void flush() = 0;

  virtual ~KernelRecording() = default;
};

}  // namespace vgpu::pt
