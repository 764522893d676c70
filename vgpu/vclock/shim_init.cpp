// libvgpu-vclock.so's constructor: resolve the real definitions and register the fork handler
// before the program starts threads. (Every path also works before it ran.)
#include "vclock/job_clock.h"

namespace {

__attribute__((constructor)) void vgpu_vclock_init() { vgpu::vclock_shim::install(); }

}  // namespace
