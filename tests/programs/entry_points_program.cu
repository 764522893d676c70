// Driver entry points that real programs reach beyond what PyTorch uses (issue 24), exercised
// by an unmodified nvcc-built program on the sim backend: the profiler range calls
// (cudaProfilerStart aborted every program that made it), and more as they are implemented.
//
// Each check prints one line; the exit status is the number of failed checks.
#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

void check_cu(CUresult r, CUresult want, const std::string& what) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  check(r == want, what + " -> " + (name ? name : std::to_string(r)));
}

void profiler_range() {
  check(cudaProfilerStart() == cudaSuccess, "cudaProfilerStart");
  check(cudaProfilerStop() == cudaSuccess, "cudaProfilerStop");
  check_cu(cuProfilerStart(), CUDA_SUCCESS, "cuProfilerStart");
  check_cu(cuProfilerStop(), CUDA_SUCCESS, "cuProfilerStop");
  // No current context on a fresh thread's driver-API view: the real driver refuses.
  CUcontext saved = nullptr;
  cuCtxPopCurrent(&saved);
  CUcontext none = nullptr;
  cuCtxGetCurrent(&none);
  if (none == nullptr) check_cu(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT, "cuProfilerStart without a context");
  if (saved) cuCtxPushCurrent(saved);
}

}  // namespace

int main() {
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    std::printf("FAIL no device\n");
    return 1;
  }
  profiler_range();
  std::printf("%d check(s) failed\n", g_failures);
  return g_failures > 255 ? 255 : g_failures;
}
