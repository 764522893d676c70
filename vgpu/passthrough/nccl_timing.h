// The virtual duration of NCCL's kernels under the passthrough backend. An NCCL kernel mostly
// waits for its transfers, which the vgpu NCCL net plugin moves and simcore times; its real
// duration says nothing about the virtual network. So an NCCL kernel's virtual finish is the
// latest virtual finish of the transfers its rank completed while it ran (read back through the
// plugin's small C interface, nccl_plugin/core/vtime_api.h), and never less than kMinSeconds
// after its start. The plugin in turn starts those transfers no earlier than the kernel's
// virtual start, which it reads through the clock hook installed here.
//
// Attribution: the transfers of a kernel are those the plugin logged after the kernel was
// launched and before the next NCCL kernel of the same GPU was launched (a window of the
// plugin's completion log; the last kernel's window stays open until it is timed). The host
// runs ahead of the GPU, so transfers of one kernel may fall in the next one's window: the last
// kernel of a chain ends where it should, earlier ones may end early, and no kernel is held
// back by transfers of work launched long after it. Without the plugin (NCCL's own
// transports) NCCL kernels are timed like any other kernel, by their real duration.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

namespace vgpu::pt::nccl_timing {

inline constexpr double kMinSeconds = 5e-6;  // an NCCL kernel's own launch and setup

bool is_nccl_kernel(std::string_view name);

// The global GPU (the plugin's numbering: node * GPUs per node + device) of virtual device v.
int global_gpu(int v);

// Whether the plugin's interface is there (loads it and installs the clock hook on first use).
bool plugin_present();

// The log window of one NCCL kernel: opened at its launch, closed by the next NCCL launch on
// the same GPU.
struct Window {
  uint64_t since = 0;
  std::shared_ptr<std::atomic<uint64_t>> until;  // 0: still open
};
// Opens the window of a kernel of `gpu` launched now (and closes the previous one's).
Window open_window(int gpu);

// The virtual finish of the NCCL kernel of `gpu` with log window `w`, started at `start`. Call
// once its real execution is complete.
double finish(int gpu, const Window& w, double start);

// The virtual start of the NCCL kernel now running on `gpu` (the earliest start of its
// transfers): set by the launch path once known.
void set_kernel_start(int gpu, double start);

}  // namespace vgpu::pt::nccl_timing
