// What the driver keeps per host thread: the context stack (cuCtxPush/Pop, cuCtxSetCurrent
// replaces the top), and the thread's virtual CPU clock. A new thread starts with an empty
// stack; cudart then binds its device's primary context, exactly as with the real driver.
#pragma once

#include <vector>

#include "driver/cuda_api.h"

namespace vgpu {

struct ThreadState {
  std::vector<CUcontext> context_stack;
  double virtual_now = 0;       // the thread's virtual CPU clock, seconds
  double last_real_cpu = -1;    // thread CPU time at the last driver call, seconds

  CUcontext current() const { return context_stack.empty() ? nullptr : context_stack.back(); }
};

ThreadState& this_thread();

}  // namespace vgpu
