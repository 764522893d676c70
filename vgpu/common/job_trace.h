// Where a process of a job leaves its part of VGPU_TIMELINE (both backends).
//
// A job of several processes (vgpu-run sets VGPU_JOB_ID: torchrun's ranks, a launcher's children)
// names one file. Each process writes its own trace as `<file>.parts.<job>/<pid>.json` and then,
// under that folder's file lock, merges every part present into `<file>`: the last process to exit
// leaves the whole job's trace (vgpu-run removes the parts). Without a job id the process writes
// `<file>` itself. Files are written whole (a temporary file renamed), so a reader never sees half.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace vgpu::job_trace {

// Merges traces of the job's processes into one (simcore::merge_chrome_traces): passed in so that
// this layer does not depend on the simulator.
using Merge = std::function<bool(const std::vector<std::string>& parts, std::string* merged)>;

// Writes `mine` as this process's part of the job's trace at `path` (see above); false, with one
// log line, when a file cannot be written.
bool write(const std::string& path, const std::string& job, const std::string& mine, const Merge& merge);

}  // namespace vgpu::job_trace
