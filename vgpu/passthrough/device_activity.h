// What the passthrough tells the status region (vgpu-smi, vgpu-run's summary) of each virtual
// device's work, cheaply enough for every launch: each op's busy time, kernel count and the
// device's clock, and its interval into the device's utilization window merged with the
// intervals it touches. Back-to-back work (a GPU-bound stream of kernels) then costs the window
// one interval per kMaxSpan of virtual time instead of one per op: the window's ordered
// insertion was a seventh of a settled cuLaunchKernel's own cost (issue 21).
//
// Work that does not continue a stretch goes to the window at once (the window is recomputed
// at the device's new clock, so an idle device's utilization falls); work that continues it is
// merged, and the stretch goes to the window once it spans kMaxSpan or work arrives that does
// not touch it. The counts (kernels, busy time) and the clock go to the region with the stretch
// they belong to, not op by op: three atomic read-modify-writes on the shared page per op were
// a tenth of a settled launch's own time (issue 21). So the region lags the device by less than
// kMaxSpan of work (0.1% of the 1 s utilization window), until flush(): the passthrough flushes
// at every synchronization and at exit, so a program that synchronized reads all its work.
// Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "passthrough/spin_lock.h"

namespace vgpu::status {
class Writer;
}

namespace vgpu::pt {

class DeviceActivity {
 public:
  static constexpr double kMaxSpan = 1e-3;  // virtual seconds a merged stretch may cover

  // `writer` may be null (no status region): nothing is reported.
  DeviceActivity(status::Writer* writer, int devices);

  // Virtual device `device` ran work (a kernel or a copy/memset) over [start, finish].
  void report(int device, double start, double finish, bool kernel);
  // Everything reported so far goes to the region: the open stretches, the counts, the clock.
  void flush();

 private:
  struct Stretch {
    double start = 0, finish = -1;  // finish < start: none
    bool open() const { return finish >= start; }
  };
  // What was reported since the device's counts last went to the region.
  struct Counts {
    uint64_t kernels = 0, busy_ns = 0;
    double clock = 0;  // the latest finish
  };
  void flush(int device, bool kernel, Stretch& s);  // the stretch to the window
  void push(int device);                            // the counts and the clock to the region

  status::Writer* writer_;
  // Held for a few comparisons (and, once per stretch, the window's insertion): a spin lock, as
  // a mutex's lock and unlock were a third of a settled launch's report (spin_lock.h).
  SpinLock mu_;
  std::vector<std::array<Stretch, 2>> stretches_;  // per device: copies, kernels
  std::vector<Counts> counts_;                     // per device
};

}  // namespace vgpu::pt
