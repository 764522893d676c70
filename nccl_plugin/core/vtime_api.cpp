// The exported C functions of vtime_api.h, over the core's VirtualTime.
#include "vtime_api.h"

#include "net_core.h"

using vgpu::nccl::Core;

VGPU_NCCL_API void vgpu_nccl_set_clock(vgpu_nccl_clock_fn fn) { vgpu::nccl::set_clock_hook(fn); }

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
