// Measuring a launch "as if it ran alone" when several virtual devices share one physical GPU
// (DESIGN.md, "Time"): while vgpu measures a launch (the first launches of each signature,
// launch_policy.h), it holds the physical GPU's measurement lock, shared by every vgpu process
// and thread of the user on that GPU, and waits for the measured launch to finish before
// letting go. Measurements then do not overlap one another; work whose duration is already
// known runs concurrently as before.
//
// Never a deadlock: NCCL kernels are never measured under the lock (their ranks wait on each
// other), and both the wait for the lock and the wait for the launch give up after a bound
// (kWaitSeconds): the measurement then simply happens without exclusivity.
//
// VGPU_MEASURE=concurrent turns it off.
#pragma once

#include <map>
#include <mutex>

namespace vgpu::pt {

class MeasureLock {
 public:
  static constexpr double kWaitSeconds = 0.02;

  // The lock of physical GPU `physical` (the backend root's MeasureLocks); nullptr when
  // measurements are not serialized.
  static MeasureLock* of(int physical);

  // Tries for up to kWaitSeconds; false: go on without it.
  bool acquire();
  void release();

 private:
  friend class MeasureLocks;
  MeasureLock(int fd, std::mutex* in_process) : fd_(fd), in_process_(in_process) {}
  int fd_;
  std::mutex* in_process_;
};

// The process's measurement locks, one per physical GPU (held by the root, passthrough.h).
class MeasureLocks {
 public:
  MeasureLock* of(int physical);

 private:
  std::mutex mu_;
  std::map<int, MeasureLock*> locks_;  // never freed: measurements may run during exit
  // Threads of one process exclude each other here; processes through flock on the file. (A
  // plain mutex polled with try_lock: sanitizers do not follow timed_mutex's timed waits.)
  std::mutex in_process_;
};

}  // namespace vgpu::pt
