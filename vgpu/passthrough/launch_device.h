// What a launch needs of its virtual device that does not change once the backend is up, kept
// for a launching thread's last device (launch_api.cpp).
//
// Why: a settled launch asked, every time, for its device's physical GPU, the job's shared table
// of durations for that GPU (SharedDurationTables::of: opened on first use and kept) and whether
// another virtual device shares that GPU, each a lookup through the backend's root: ~80
// instructions of a ~2,100-instruction settled launch (issue 21). The virtual devices and their
// GPUs are fixed at cuInit, so the answers for one owner and device stand for good; a thread
// mostly launches on one device. Not thread-safe: one per thread.
#pragma once

#include "passthrough/last_answer.h"

namespace vgpu::pt {

class SharedDurations;

struct LaunchDevice {
  int physical = -1;                 // PassState::physical
  SharedDurations* shared = nullptr;  // SharedDurationTables::of(physical)
  bool shares_physical = false;      // PassState::shares_physical
};

class LastLaunchDevice {
 public:
  // The facts of `device` of `owner` (the backend's state): the last ones if they are this
  // device's, else `describe()`'s, kept.
  template <class Describe>
  const LaunchDevice& of(const void* owner, int device, Describe&& describe) {
    return last_.of(Which{owner, device}, describe);
  }

 private:
  struct Which {
    const void* owner = nullptr;
    int device = -1;
    bool operator==(const Which&) const = default;
  };
  LastAnswer<Which, LaunchDevice> last_;
};

}  // namespace vgpu::pt
