// A "real driver" whose calls cost host time (slow_calls_driver: the sim backend's library
// underneath, as recording_driver.cpp forwards to it): cuEventRecord spends kRecordSeconds of
// the calling thread's time inside the driver, as a real driver's own work per call does (1-10 us
// on a real machine, made larger here to stand clear of the sanitizers' noise), and every other
// one kSlowRecordSeconds, as a call that waited a little for a shared GPU does; cuStreamWaitEvent
// spends kWaitSeconds, as a call that waits long does (a full launch queue). The passthrough
// charges neither call's own time, only the real driver's measured cost of such a call
// (timing/driver_call_cost.h; thread_clock.h, Pause::real).
// cuStreamIsCapturing is counted: while a capture is open anywhere in the process, an event record
// that vgpu looks up asks it and one taken from the thread's memo does not (driver_time_test.cpp).

#include <atomic>
#include <chrono>

#include "front/driver/cuda_api.h"
#include "standin_sim.h"

namespace {

constexpr double kRecordSeconds = 20e-6;
constexpr double kSlowRecordSeconds = 45e-6;
int g_records = 0;  // one test thread
std::atomic<unsigned long> g_capture_questions{0};
constexpr double kWaitSeconds = 400e-6;

void spin(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  static const auto next = vgpu_test::sim_entry<CUresult (*)(CUevent, CUstream)>("cuEventRecord");
  spin(++g_records % 2 == 0 ? kSlowRecordSeconds : kRecordSeconds);
  return next ? next(e, s) : CUDA_ERROR_NOT_SUPPORTED;
}

VGPU_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  static const auto next = vgpu_test::sim_entry<CUresult (*)(CUstream, CUevent, unsigned)>("cuStreamWaitEvent");
  spin(kWaitSeconds);
  return next ? next(s, e, flags) : CUDA_ERROR_NOT_SUPPORTED;
}

VGPU_EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  static const auto next =
      vgpu_test::sim_entry<CUresult (*)(CUstream, CUstreamCaptureStatus*)>("cuStreamIsCapturing");
  g_capture_questions.fetch_add(1, std::memory_order_relaxed);
  return next ? next(s, status) : CUDA_ERROR_NOT_SUPPORTED;
}

// How many times cuStreamIsCapturing was asked (the test finds it with dlsym).
extern "C" __attribute__((visibility("default"))) unsigned long vgpu_test_capture_questions() {
  return g_capture_questions.load(std::memory_order_relaxed);
}
