// The virtual duration of NCCL's kernels under the passthrough backend. An NCCL kernel mostly
// waits for its transfers, which the vgpu NCCL net plugin moves and simcore times; its real
// duration says nothing about the virtual network. So an NCCL kernel's virtual finish is the
// latest virtual finish of the transfers it waited for (read back through the plugin contract,
// contracts/nccl_plugin.h), and never less than kMinSeconds after its start.
// The plugin in turn starts each transfer no earlier than the virtual start of its kernel,
// which it asks through the clock hooks installed here.
//
// Attribution, exact: with vgpu's NCCL profiler loaded (it ships in the plugin's library, where
// NCCL finds it), every transfer carries the tag of its kernel launch, and the driver reads the
// tag from inside the launch (nccl_plugin/profiler/launch_tags.h).
// Attribution by launch order, the fallback (another profiler loaded, NCCL older than 2.28):
// the transfers of a kernel are those the plugin logged after the kernel was launched and
// before the next NCCL kernel of the same GPU was launched. The host runs ahead of the GPU, so
// in a loop every kernel but the last gets few or none of its own transfers and the last gets
// them all: a loop's total is right only where the host does not outrun the transfers.
// Without the plugin (NCCL's own transports) NCCL kernels are timed like any other kernel, by
// their real duration.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

#include "contracts/nccl_plugin.h"
#include "passthrough/virtual_timeline.h"

namespace vgpu::pt::nccl_timing {

inline constexpr double kMinSeconds = 5e-6;  // an NCCL kernel's own launch and setup

bool is_nccl_kernel(std::string_view name);

// The global GPU (the plugin's numbering: node * GPUs per node + device) of virtual device v.
int global_gpu(int v);

// Whether the plugin's contract is in place (the first call after NCCL loaded the plugin makes
// the handshake, which installs the clock hooks).
bool plugin_present();

// Which transfers are one NCCL kernel's.
struct Attribution {
  uint64_t launch = 0;  // the kernel's launch tag; 0: attributed by launch order (below)
  // The kernel's window of the plugin's completion log: opened at its launch, closed by the
  // next NCCL launch on the same GPU.
  uint64_t since = 0;
  std::shared_ptr<std::atomic<uint64_t>> until;  // 0: still open
};
// What NCCL's profiler told the plugin launch `launch` does (its communicator, this rank, its
// operations); false when the plugin is absent or does not know the launch.
bool describe(uint64_t launch, vgpu_nccl_launch* out);
// How many ranks of communicator `comm` this process holds (the plugin's count; 0: not known).
int local_ranks(uint64_t comm);

// The attribution of an NCCL kernel of `gpu` being launched now (call from inside the launch).
Attribution attribute(int gpu);
// The kernel is on its stream's virtual timeline as `op`: the plugin's transfers of its launch
// may now ask for its virtual start.
void launched(const Attribution& a, const OpRef& op);

// The virtual finish of the NCCL kernel of `gpu` with attribution `a`, started at `start`. Call
// once its real execution is complete, and once only.
double finish(int gpu, const Attribution& a, double start, double* sync = nullptr);

// The virtual start of the NCCL kernel now running on `gpu` (the GPU clock the plugin uses for
// transfers whose launch is unknown): set by the launch path once known.
void set_kernel_start(int gpu, double start);

}  // namespace vgpu::pt::nccl_timing
