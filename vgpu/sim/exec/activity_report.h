// Reports the sim backend's work to the job's status region (vgpu-smi, NVML, nvtop, vgpu-run's
// summary): each kernel, copy and memset with its virtual interval, so that every monitor shows
// a live job's utilization, SM clock, busy time, kernel count and virtual clock.
//
// A submission only notes the op (its device and simulator event): where it lands in virtual
// time is known once the simulator has placed it, and asking on every launch would make the
// engine simulate at every launch. The notes are turned into intervals in batches: at every
// synchronization (the engine has just placed the work anyway), every kBatch notes, every
// kPeriod of real time, and at exit.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "simcore/engine.h"

namespace vgpu::status { class Writer; }

namespace vgpu {

class ActivityReport {
 public:
  static constexpr size_t kBatch = 4096;
  static constexpr int64_t kPeriodNs = 20'000'000;  // 20 ms of real time

  // `status` may be null (no region): then nothing is noted.
  ActivityReport(simcore::Engine& engine, status::Writer* status) : engine_(engine), status_(status) {}

  // An op of `device` was submitted as simulator event `vid`. Cheap (no simulator call); true
  // when a batch is due: the caller then calls flush() once it holds no lock of its own.
  bool note(int device, simcore::EventId vid, bool kernel);
  // Whether a batch is due by time (for callers that noted nothing).
  bool due() const;
  // Turns every note into an interval in the status region, and republishes utilization.
  void flush();

 private:
  struct Noted {
    simcore::EventId vid;
    int device;
    bool kernel;
  };
  static int64_t now_ns();
  simcore::Engine& engine_;
  status::Writer* status_;
  std::mutex mu_;             // guards pending_
  std::vector<Noted> pending_;
  std::mutex flush_mu_;       // one flush at a time, in note order
  std::atomic<int64_t> next_due_ns_{0};
};

}  // namespace vgpu
