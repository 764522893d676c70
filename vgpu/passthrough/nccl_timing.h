// The virtual duration of NCCL's kernels under the passthrough backend. An NCCL kernel mostly
// waits for its transfers, which the vgpu NCCL net plugin moves and simcore times; its real
// duration says nothing about the virtual network. So an NCCL kernel's virtual finish is the
// latest virtual finish of the transfers its rank completed while it ran (read back through the
// plugin's small C interface, nccl_plugin/core/vtime_api.h), and never less than kMinSeconds
// after its start. The plugin in turn starts those transfers no earlier than the kernel's
// virtual start, which it reads through the clock hook installed here.
//
// Attribution: the transfers of a kernel are those the plugin logged after the kernel was
// launched. Transfers of one kernel still running when the next NCCL kernel of the same GPU is
// launched count for the later one: the last kernel of a chain ends where it should, earlier
// ones may end early. Without the plugin (NCCL's own transports) NCCL kernels are timed like
// any other kernel, by their real duration.
#pragma once

#include <cstdint>
#include <string_view>

namespace vgpu::pt::nccl_timing {

inline constexpr double kMinSeconds = 5e-6;  // an NCCL kernel's own launch and setup

bool is_nccl_kernel(std::string_view name);

// The global GPU (the plugin's numbering: node * GPUs per node + device) of virtual device v.
int global_gpu(int v);

// Whether the plugin's interface is there (loads it and installs the clock hook on first use).
bool plugin_present();

// The plugin's completion log position now: transfers logged later belong to kernels launched
// from now on.
uint64_t log_position();

// The virtual finish of the NCCL kernel of `gpu` launched at log position `since` and started
// at `start`. Call once its real execution is complete.
double finish(int gpu, uint64_t since, double start);

// The virtual start of the NCCL kernel now running on `gpu` (the earliest start of its
// transfers): set by the launch path once known.
void set_kernel_start(int gpu, double start);

}  // namespace vgpu::pt::nccl_timing
