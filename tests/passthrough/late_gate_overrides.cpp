// A "real driver" whose GPU starts late after a stream wait (late_gate_driver: the sim backend's
// library underneath, as recording_driver.cpp forwards to it): an event recorded right after a
// cuStreamWaitValue32 on its stream reads kLateStartMs early against every later event, as a real
// GPU's front end starts the work behind a semaphore wait later than work queued behind a kernel.
// The passthrough's gated measurements (gate_latency.h) must give that back.

#include <mutex>
#include <set>

#include "front/driver/cuda_api.h"
#include "standin_sim.h"

namespace {

// Several times a real GPU's ~4 us, so that the check stands clear of the host time the sim
// underneath lets into its events (a few us), and below what the passthrough trusts a
// calibration to read (kMostOverhead, 30 us).
constexpr float kLateStartMs = 0.02f;

std::mutex g_mu;
std::set<CUstream> g_gated;     // streams whose next op follows a wait
std::set<CUevent> g_after_gate;  // events recorded right after a wait

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned flags) {
  static const auto next = vgpu_test::sim_entry<CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned)>("cuStreamWaitValue32_v2");
  const CUresult r = next ? next(s, addr, value, flags) : CUDA_ERROR_NOT_SUPPORTED;
  if (r == CUDA_SUCCESS) {
    std::lock_guard l(g_mu);
    g_gated.insert(s);
  }
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  static const auto next = vgpu_test::sim_entry<CUresult (*)(CUevent, CUstream)>("cuEventRecord");
  const CUresult r = next ? next(e, s) : CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard l(g_mu);
  if (g_gated.erase(s) != 0)
    g_after_gate.insert(e);
  else
    g_after_gate.erase(e);
  return r;
}

VGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  static const auto next = vgpu_test::sim_entry<CUresult (*)(float*, CUevent, CUevent)>("cuEventElapsedTime");
  const CUresult r = next ? next(ms, a, b) : CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard l(g_mu);
  if (r == CUDA_SUCCESS && ms != nullptr && g_after_gate.count(a) != 0 && g_after_gate.count(b) == 0)
    *ms += kLateStartMs;
  return r;
}
