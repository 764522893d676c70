// cuBLAS, unmodified, on the sim backend: creating a handle runs cuBLAS's own probe of the
// device (opt-in shared memory, cluster occupancy for Hopper GEMMs, context limits) and must
// succeed on every virtual device. (GEMMs themselves still stop at a private-table slot vgpu
// does not know: 21318c60 slot 51, see the README's known gaps.)
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  int failures = 0, n = 0;
  cudaGetDeviceCount(&n);
  for (int d = 0; d < n; ++d) {
    cudaSetDevice(d);
    cublasHandle_t h = nullptr;
    const cublasStatus_t s = cublasCreate(&h);
    std::printf("%s cublasCreate on device %d -> %d\n", s == CUBLAS_STATUS_SUCCESS ? "ok  " : "FAIL", d, (int)s);
    failures += s != CUBLAS_STATUS_SUCCESS;
    if (s == CUBLAS_STATUS_SUCCESS) failures += cublasDestroy(h) != CUBLAS_STATUS_SUCCESS;
  }
  // The occupancy answer cuBLAS relies on: clusters of 2 one-block-per-SM blocks on an H100.
  CUfunction none = nullptr;
  CUlaunchConfig cfg{};
  int clusters = -1;
  const CUresult bad = cuOccupancyMaxActiveClusters(&clusters, none, &cfg);
  std::printf("%s cuOccupancyMaxActiveClusters(null function) -> %d\n",
              bad == CUDA_ERROR_INVALID_HANDLE || bad == CUDA_ERROR_INVALID_VALUE ? "ok  " : "FAIL", (int)bad);
  failures += !(bad == CUDA_ERROR_INVALID_HANDLE || bad == CUDA_ERROR_INVALID_VALUE);
  std::printf("%d check(s) failed (devices: %d)\n", failures, n);
  return failures == 0 && n == 8 ? 0 : 1;
}
