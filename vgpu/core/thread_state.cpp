#include "core/thread_state.h"

namespace vgpu {
ThreadState& this_thread() {
  thread_local ThreadState state;
  return state;
}
}  // namespace vgpu
