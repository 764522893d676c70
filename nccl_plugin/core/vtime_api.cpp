// The exported C functions of vtime_api.h, over the core's VirtualTime.
#include "vtime_api.h"

#include <cstring>

#include "net_core.h"
#include "profiler/launch_tags.h"

using vgpu::nccl::Core;

VGPU_NCCL_API void vgpu_nccl_set_clock(vgpu_nccl_clock_fn fn) { vgpu::nccl::set_clock_hook(fn); }

VGPU_NCCL_API int vgpu_nccl_interface_version(void) { return VGPU_NCCL_INTERFACE_VERSION; }

VGPU_NCCL_API void vgpu_nccl_set_launch_clock(vgpu_nccl_launch_clock_fn fn) {
  vgpu::nccl::set_launch_clock_hook(fn);
}

VGPU_NCCL_API uint64_t vgpu_nccl_current_launch(void) {
  return vgpu::nccl::prof::LaunchTags::current_launch();
}

VGPU_NCCL_API int vgpu_nccl_launch_transfers(uint64_t launch, double* finish, uint64_t* count) {
  auto* vt = Core::get().vtime();
  if (vt == nullptr || finish == nullptr || launch == 0) return -1;
  uint64_t n = 0;
  if (!vt->launch_transfers(launch, finish, &n)) return -1;
  if (count != nullptr) *count = n;
  return 0;
}

VGPU_NCCL_API int vgpu_nccl_launch_window(uint64_t launch, double* ready, double* last_finish,
                                          uint64_t* count) {
  auto* vt = Core::get().vtime();
  if (vt == nullptr || ready == nullptr || last_finish == nullptr || launch == 0) return -1;
  uint64_t n = 0;
  if (!vt->launch_window(launch, ready, last_finish, &n)) return -1;
  if (count != nullptr) *count = n;
  return 0;
}

VGPU_NCCL_API int vgpu_nccl_launch_collective(uint64_t launch, vgpu_nccl_launch_work* out) {
  vgpu::nccl::prof::LaunchWork w;
  if (out == nullptr || !vgpu::nccl::prof::LaunchTags::get().launch_work(launch, &w)) return -1;
  static_assert(sizeof out->item / sizeof out->item[0] == vgpu::nccl::prof::LaunchWork::kMaxItems);
  *out = {};
  out->nranks = w.nranks;
  out->nnodes = w.nnodes;
  out->items = w.items;
  for (int i = 0; i < w.items; ++i) {
    static_assert(sizeof out->item[i].func == sizeof w.item[i].func);
    std::memcpy(out->item[i].func, w.item[i].func, sizeof out->item[i].func);
    out->item[i].bytes = w.item[i].bytes;
    out->item[i].peers = w.item[i].peers;
    out->item[i].self = w.item[i].self ? 1 : 0;
  }
  return 0;
}

VGPU_NCCL_API void vgpu_nccl_forget_launch(uint64_t launch) {
  if (auto* vt = Core::get().vtime()) vt->forget_launch(launch);
}

VGPU_NCCL_API void vgpu_nccl_set_thread_gpu(int global_gpu) {
  vgpu::nccl::set_thread_gpu(global_gpu);
}

VGPU_NCCL_API int vgpu_nccl_latest_completion(int global_gpu, double* finish) {
  auto* vt = Core::get().vtime();
  if (vt == nullptr || finish == nullptr) return -1;
  return vt->latest(global_gpu, finish) ? 0 : -1;
}

VGPU_NCCL_API int vgpu_nccl_last_completion(vgpu_nccl_completion* out) {
  if (out == nullptr) return -1;
  return vgpu::nccl::VirtualTime::last_on_thread(out) ? 0 : -1;
}

VGPU_NCCL_API int vgpu_nccl_completions(uint64_t after_seq, vgpu_nccl_completion* out, int max) {
  if (out == nullptr || max < 0) return -1;
  auto* vt = Core::get().vtime();
  if (vt == nullptr) return 0;
  return vt->completions(after_seq, out, max);
}

VGPU_NCCL_API int vgpu_nccl_flow_interval(uint64_t flow_id, double* start, double* finish) {
  auto* vt = Core::get().vtime();
  if (vt == nullptr || start == nullptr || finish == nullptr) return -1;
  return vt->query(flow_id, start, finish) ? 0 : -1;
}

VGPU_NCCL_API int vgpu_nccl_launch_collectives(uint64_t launch, vgpu_nccl_collective* out, int max) {
  if (out == nullptr || max < 0 || launch == 0) return -1;
  return vgpu::nccl::prof::LaunchTags::get().launch_collectives(launch, out, max);
}
