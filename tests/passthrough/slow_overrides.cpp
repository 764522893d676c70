// A "real driver" whose GPU is slow (slow_driver: the sim backend's library underneath, as
// recording_driver.cpp forwards to it): after every kernel launch the device stays busy for
// kBusySeconds of real time. Queries answer "not ready" until then, synchronizations wait for
// it. So the passthrough above it sees what it sees on a GPU shared by several virtual GPUs: real
// work that takes far longer than its virtual duration.

#include <atomic>
#include <chrono>
#include <thread>

#include "front/driver/cuda_api.h"
#include "standin_sim.h"

namespace {

constexpr double kBusySeconds = 0.03;
std::atomic<int64_t> g_busy_until_ns{0};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
bool busy() { return now_ns() < g_busy_until_ns.load(); }
void wait_idle() {
  while (busy()) std::this_thread::sleep_for(std::chrono::microseconds(200));
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                            unsigned by, unsigned bz, unsigned shared, CUstream s, void** params,
                                            void** extra) {
  using Fn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                          void**, void**);
  static const Fn next = vgpu_test::sim_entry<Fn>("cuLaunchKernel");
  const CUresult r = next ? next(f, gx, gy, gz, bx, by, bz, shared, s, params, extra) : CUDA_ERROR_NOT_SUPPORTED;
  if (r == CUDA_SUCCESS) g_busy_until_ns.store(now_ns() + static_cast<int64_t>(kBusySeconds * 1e9));
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream s) {
  if (busy()) return CUDA_ERROR_NOT_READY;
  static const auto next = vgpu_test::sim_entry<CUresult (*)(CUstream)>("cuStreamQuery");
  return next(s);
}

VGPU_EXPORT CUresult CUDAAPI cuEventQuery(CUevent e) {
  if (busy()) return CUDA_ERROR_NOT_READY;
  static const auto next = vgpu_test::sim_entry<CUresult (*)(CUevent)>("cuEventQuery");
  return next(e);
}

VGPU_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  wait_idle();
  static const auto next = vgpu_test::sim_entry<CUresult (*)(CUstream)>("cuStreamSynchronize");
  return next(s);
}

VGPU_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  wait_idle();
  static const auto next = vgpu_test::sim_entry<CUresult (*)(CUevent)>("cuEventSynchronize");
  return next(e);
}

VGPU_EXPORT CUresult CUDAAPI cuCtxSynchronize() {
  wait_idle();
  static const auto next = vgpu_test::sim_entry<CUresult (*)()>("cuCtxSynchronize");
  return next();
}
