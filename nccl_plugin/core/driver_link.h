// The driver's side of the contract (contracts/nccl_plugin.h) as the plugin holds it: the
// clock hooks and the current device the vgpu driver handed over, and the knock by which the
// plugin asks a loaded driver to hand them over before the driver met any NCCL kernel.
#pragma once

#include <cstdint>

#include "contracts/nccl_plugin.h"

namespace vgpu::nccl {

// Keeps the driver's table (called by the handshake, after its checks); nullptr forgets it.
void install_driver(const vgpu_nccl_driver_side* driver);

// The plugin's own work on the calling thread, bracketed for the driver (contracts/nccl_plugin.h
// own_work_begin/end): the thread's virtual clock is not charged for it. Without a driver's
// hooks, nothing; the end is called only when the begin was.
class OwnWork {
 public:
  OwnWork();
  ~OwnWork();
  OwnWork(const OwnWork&) = delete;
  OwnWork& operator=(const OwnWork&) = delete;

 private:
  void (*end_)(void);
};

// NCCL's host cost model on the calling thread (contracts/nccl_plugin.h nccl_group_*): what the
// profiler saw of a group of NCCL calls, told to the driver. Without the driver's hooks, nothing.
namespace nccl_group {
void begin();
void operation(uint64_t rank_comm, bool all_reduce);  // rank_comm: the rank's ncclComm_t, as an id
void launch();
void end();
}  // namespace nccl_group

// Tells the driver that every task of launch `launch` was started (contracts/nccl_plugin.h
// launch_tasks_done); call with no lock held. Without the driver's hook, nothing.
void launch_tasks_done(uint64_t launch);

// The driver's hooks, null while none was handed over.
using GpuClockFn = double (*)(int);
using LaunchClockFn = double (*)(int, uint64_t);
GpuClockFn driver_gpu_clock();
LaunchClockFn driver_launch_clock();
// The driver's promise for a GPU (contracts/nccl_plugin.h gpu_floor); null without one.
GpuClockFn driver_gpu_floor();

// The calling thread's current device, from the driver's table; without one, the loaded driver
// is first asked to hand it over (the knock). False when no driver answers.
bool driver_current_device(int* device);
// The cluster's GPU of the calling thread's current device, when the driver tells it
// (contracts/nccl_plugin.h current_global_gpu). False when it does not.
bool driver_current_global_gpu(int* gpu);

}  // namespace vgpu::nccl
