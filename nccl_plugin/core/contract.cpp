// The plugin's half of the contract with the vgpu driver (contracts/nccl_plugin.h): its one
// exported symbol, the handshake, and the functions of the table it hands over, over the core's
// VirtualTime and the profiler's LaunchTags.
#include <atomic>
#include <cstring>

#include "common/log.h"
#include "contracts/nccl_plugin.h"
#include "driver_link.h"
#include "net_core.h"
#include "profiler/launch_tags.h"

namespace vgpu::nccl {
namespace {

uint64_t current_launch() { return prof::LaunchTags::current_launch(); }

int local_ranks(uint64_t comm_id) { return prof::LaunchTags::get().local_ranks(comm_id); }
int launch_tasks(uint64_t launch, vgpu_nccl_task* out, int max, int* count) {
  return prof::LaunchTags::get().tasks(launch, out, max, count);
}

int describe_launch(uint64_t launch, vgpu_nccl_launch* out) {
  return prof::LaunchTags::get().describe(launch, out) ? 0 : -1;
}

int launch_window(uint64_t launch, double* ready, double* last_finish, uint64_t* count) {
  auto* vt = Core::get().vtime();
  if (vt == nullptr || ready == nullptr || last_finish == nullptr || launch == 0) return -1;
  uint64_t n = 0;
  if (!vt->launch_window(launch, ready, last_finish, &n)) return -1;
  if (count != nullptr) *count = n;
  return 0;
}

int launch_transfers(uint64_t launch, double* finish, uint64_t* count) {
  auto* vt = Core::get().vtime();
  if (vt == nullptr || finish == nullptr || launch == 0) return -1;
  uint64_t n = 0;
  if (!vt->launch_transfers(launch, finish, &n)) return -1;
  if (count != nullptr) *count = n;
  return 0;
}

void forget_launch(uint64_t launch) {
  if (auto* vt = Core::get().vtime()) vt->forget_launch(launch);
}

int completions(uint64_t after_seq, vgpu_nccl_completion* out, int max) {
  if (out == nullptr || max < 0) return -1;
  auto* vt = Core::get().vtime();
  if (vt == nullptr) return 0;
  return vt->completions(after_seq, out, max);
}

int flow_interval(uint64_t flow_id, double* start, double* finish) {
  auto* vt = Core::get().vtime();
  if (vt == nullptr || start == nullptr || finish == nullptr) return -1;
  return vt->query(flow_id, start, finish) ? 0 : -1;
}

int latest_completion(int global_gpu, double* finish) {
  auto* vt = Core::get().vtime();
  if (vt == nullptr || finish == nullptr) return -1;
  return vt->latest(global_gpu, finish) ? 0 : -1;
}

int last_completion(vgpu_nccl_completion* out) {
  if (out == nullptr) return -1;
  return VirtualTime::last_on_thread(out) ? 0 : -1;
}

void thread_gpu(int global_gpu) { set_thread_gpu(global_gpu); }

// The driver whose side is installed, by the address of its table: the first to hand one over.
// A process may hold two vgpu drivers (the passthrough over vgpu's sim backend as its "real"
// driver, in tests): the second one's handshake gets the plugin's table but installs nothing,
// so the sim backend below does not take the clock hooks away from the passthrough above.
// The same driver handing its table over again (changed hooks) replaces it.
std::atomic<const vgpu_nccl_driver_side*> g_driver{nullptr};

bool take_driver(const vgpu_nccl_driver_side* driver) {
  const vgpu_nccl_driver_side* expected = nullptr;
  if (g_driver.compare_exchange_strong(expected, driver, std::memory_order_acq_rel) || expected == driver) return true;
  vgpu::log::debug("nccl plugin: a second vgpu driver in the process made the handshake: it reads the plugin's "
                   "table, the first driver's hooks stay");
  return false;
}

}  // namespace
}  // namespace vgpu::nccl

extern "C" __attribute__((visibility("default"))) int vgpu_nccl_plugin_contract(
    uint32_t driver_version, const vgpu_nccl_driver_side* driver, vgpu_nccl_plugin_side* out) {
  using namespace vgpu::nccl;
  const bool driver_ok = driver == nullptr ||
                         (driver->size == sizeof(vgpu_nccl_driver_side) && driver->version == driver_version);
  if (driver_version != VGPU_NCCL_CONTRACT_VERSION || !driver_ok || out == nullptr ||
      out->size != sizeof(vgpu_nccl_plugin_side) || out->version != VGPU_NCCL_CONTRACT_VERSION) {
    vgpu::log::once(vgpu::log::Level::warn, "nccl-contract-refused",
                    fmt::format("nccl plugin: refused a driver of contract {} (tables of {} and {} bytes); "
                                "this plugin speaks contract {} ({} and {} bytes): NCCL kernels are timed "
                                "without it (use the driver built with this plugin)",
                                driver_version, driver ? driver->size : 0u, out ? out->size : 0u,
                                VGPU_NCCL_CONTRACT_VERSION, sizeof(vgpu_nccl_driver_side),
                                sizeof(vgpu_nccl_plugin_side)));
    return -1;
  }
  if (driver != nullptr && take_driver(driver)) install_driver(driver);
  vgpu_nccl_plugin_side p{};
  p.size = sizeof p;
  p.version = VGPU_NCCL_CONTRACT_VERSION;
  p.current_launch = &current_launch;
  p.describe_launch = &describe_launch;
  p.launch_window = &launch_window;
  p.launch_transfers = &launch_transfers;
  p.forget_launch = &forget_launch;
  p.completions = &completions;
  p.flow_interval = &flow_interval;
  p.latest_completion = &latest_completion;
  p.last_completion = &last_completion;
  p.set_thread_gpu = &thread_gpu;
  p.local_ranks = &local_ranks;
  p.launch_tasks = &launch_tasks;
  *out = p;
  return 0;
}
