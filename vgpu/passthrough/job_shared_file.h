// A file in /dev/shm that the processes of one job map and update together (the shared duration
// table, shared_durations.h; the NCCL gate's counts, nccl_gate.h).
#pragma once

#include <cstddef>
#include <string>

namespace vgpu::pt {

// Maps `bytes` of the file at `path`, creating it zero-filled if needed; nullptr when it is not a
// private regular file of this user of that size (another user may have made the name first in
// the shared /dev/shm: judged on the opened descriptor) or cannot be allocated or mapped. One
// warning line names `what` and says why. The mapping is MAP_SHARED and never unmapped by this.
void* map_job_shared_file(const std::string& path, size_t bytes, const char* what);

}  // namespace vgpu::pt
