#include "driver_link.h"

#include <dlfcn.h>

#include <atomic>

#include "common/log.h"

extern "C" int vgpu_nccl_plugin_contract(uint32_t, const vgpu_nccl_driver_side*, vgpu_nccl_plugin_side*);

namespace vgpu::nccl {
namespace {

// Process-wide: the library has one driver, installed once by the handshake and read on every
// transfer without a lock.
std::atomic<GpuClockFn> g_gpu_clock{nullptr};
std::atomic<LaunchClockFn> g_launch_clock{nullptr};
std::atomic<GpuClockFn> g_gpu_floor{nullptr};
std::atomic<int (*)(int*)> g_current_device{nullptr};
std::atomic<int (*)(int*)> g_current_global_gpu{nullptr};
std::atomic<void (*)(void)> g_own_work_begin{nullptr};
std::atomic<void (*)(void)> g_own_work_end{nullptr};
// NCCL's host cost hooks: all four or none (a begin without its end would leave the clock paused);
// the begin is stored last and cleared first, as own_work's.
std::atomic<void (*)(void)> g_group_begin{nullptr};
std::atomic<void (*)(uint64_t, int)> g_group_operation{nullptr};
std::atomic<void (*)(void)> g_group_launch{nullptr};
std::atomic<void (*)(void)> g_group_end{nullptr};
std::atomic<void (*)(uint64_t)> g_tasks_done{nullptr};
std::atomic<bool> g_installed{false};

// cuda.h's cuGetExportTable, without cuda.h: the plugin does not depend on the driver.
struct Uuid {
  unsigned char bytes[16];
};
using GetExportTableFn = int (*)(const void**, const Uuid*);

// Asks the loaded libcuda.so.1 for vgpu's contract table and offers it the handshake. The CUDA
// runtime loads the driver RTLD_LOCAL, so it is asked by name first (RTLD_DEFAULT would not see
// it). A real NVIDIA driver, or none, answers no such table: nothing happens.
void knock() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  auto get = reinterpret_cast<GetExportTableFn>(driver ? dlsym(driver, "cuGetExportTable") : nullptr);
  if (get == nullptr) get = reinterpret_cast<GetExportTableFn>(dlsym(RTLD_DEFAULT, "cuGetExportTable"));
  if (driver != nullptr) dlclose(driver);  // NOLOAD took a reference; the library stays loaded
  if (get == nullptr) return;
  const Uuid id{VGPU_NCCL_CONTRACT_TABLE_UUID};
  const void* table = nullptr;
  if (get(&table, &id) != 0 || table == nullptr) return;
  const auto* t = static_cast<const vgpu_nccl_contract_table*>(table);
  if (t->size < sizeof(vgpu_nccl_contract_table) || t->offer_plugin == nullptr) {
    log::once(log::Level::warn, "nccl-contract-table",
              "nccl plugin: the vgpu driver's contract table is older than this plugin's: the rank's "
              "device counts as 0 (use the driver built with this plugin)");
    return;
  }
  if (t->offer_plugin(&vgpu_nccl_plugin_contract) != 0)
    log::debug("nccl plugin: the driver did not take the contract (not initialised, or refused)");
}

}  // namespace

void install_driver(const vgpu_nccl_driver_side* d) {
  g_gpu_clock.store(d ? d->gpu_clock : nullptr, std::memory_order_release);
  g_launch_clock.store(d ? d->launch_clock : nullptr, std::memory_order_release);
  g_gpu_floor.store(d ? d->gpu_floor : nullptr, std::memory_order_release);
  g_current_device.store(d ? d->current_device : nullptr, std::memory_order_release);
  g_current_global_gpu.store(d ? d->current_global_gpu : nullptr, std::memory_order_release);
  // Both or neither: a begin without its end would leave the thread's clock paused.
  const bool own = d != nullptr && d->own_work_begin != nullptr && d->own_work_end != nullptr;
  g_own_work_end.store(own ? d->own_work_end : nullptr, std::memory_order_release);
  g_own_work_begin.store(own ? d->own_work_begin : nullptr, std::memory_order_release);
  const bool group = d != nullptr && d->nccl_group_begin != nullptr && d->nccl_group_operation != nullptr &&
                     d->nccl_group_launch != nullptr && d->nccl_group_end != nullptr;
  g_group_begin.store(nullptr, std::memory_order_release);
  g_group_operation.store(group ? d->nccl_group_operation : nullptr, std::memory_order_release);
  g_group_launch.store(group ? d->nccl_group_launch : nullptr, std::memory_order_release);
  g_group_end.store(group ? d->nccl_group_end : nullptr, std::memory_order_release);
  g_group_begin.store(group ? d->nccl_group_begin : nullptr, std::memory_order_release);
  g_tasks_done.store(d ? d->launch_tasks_done : nullptr, std::memory_order_release);
  g_installed.store(d != nullptr, std::memory_order_release);
}

void launch_tasks_done(uint64_t launch) {
  if (auto f = g_tasks_done.load(std::memory_order_acquire)) f(launch);
}

namespace nccl_group {
void begin() {
  if (auto f = g_group_begin.load(std::memory_order_acquire)) f();
}
void operation(uint64_t rank_comm, bool all_reduce) {
  if (auto f = g_group_operation.load(std::memory_order_acquire)) f(rank_comm, all_reduce ? 1 : 0);
}
void launch() {
  if (auto f = g_group_launch.load(std::memory_order_acquire)) f();
}
void end() {
  if (auto f = g_group_end.load(std::memory_order_acquire)) f();
}
}  // namespace nccl_group

OwnWork::OwnWork() : end_(nullptr) {
  void (*begin)(void) = g_own_work_begin.load(std::memory_order_acquire);
  if (begin == nullptr) return;
  end_ = g_own_work_end.load(std::memory_order_acquire);  // stored before begin: never null here
  begin();
}

OwnWork::~OwnWork() {
  if (end_ != nullptr) end_();
}

GpuClockFn driver_gpu_clock() { return g_gpu_clock.load(std::memory_order_acquire); }
LaunchClockFn driver_launch_clock() { return g_launch_clock.load(std::memory_order_acquire); }
GpuClockFn driver_gpu_floor() { return g_gpu_floor.load(std::memory_order_acquire); }

bool driver_current_device(int* device) {
  if (!g_installed.load(std::memory_order_acquire)) knock();  // at connection setup only
  int (*fn)(int*) = g_current_device.load(std::memory_order_acquire);
  return fn != nullptr && fn(device) == 0;
}

bool driver_current_global_gpu(int* gpu) {
  if (!g_installed.load(std::memory_order_acquire)) knock();
  int (*fn)(int*) = g_current_global_gpu.load(std::memory_order_acquire);
  return fn != nullptr && fn(gpu) == 0;
}

}  // namespace vgpu::nccl
