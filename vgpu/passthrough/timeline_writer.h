// VGPU_TIMELINE under the passthrough backend: every op of the streams' virtual timelines
// (kernels by name, copies, NCCL kernels, graph launches) as it resolves, written at exit in the
// trace format the sim backend writes (simcore/chrome_trace.h), one trace process per global GPU
// and one lane per stream.
//
// A job of several processes (vgpu-run sets VGPU_JOB_ID) leaves one merged trace
// (common/job_trace.h, as the sim backend's processes do).
//
// Only when VGPU_TIMELINE names a file: otherwise nothing is recorded and get() is null. The
// trace keeps every op, so its memory grows with the run (as the sim backend's does).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "passthrough/virtual_timeline.h"
#include "simcore/chrome_trace.h"

namespace vgpu::pt {

class TimelineWriter {
 public:
  // The process's writer, or null when no timeline is asked for.
  static TimelineWriter* get();

  // A resolved op of virtual device `op.device` (called under the timeline's lock: short).
  void add(const TimedOp& op);
  // Writes the trace (and merges the job's parts). Called once at exit; tests may call it.
  void write();

  const std::string& path() const { return path_; }

 private:
  TimelineWriter(std::string path, std::string job);

  std::string path_, job_;  // job_: VGPU_JOB_ID, empty outside vgpu-run
  std::mutex mu_;
  std::vector<simcore::TimelineEntry> entries_;
};

}  // namespace vgpu::pt
