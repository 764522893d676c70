// cuBLAS, unmodified, on the sim backend: creating a handle runs cuBLAS's own probe of the
// device (opt-in shared memory, cluster occupancy for Hopper GEMMs, context limits) and must
// succeed on every virtual device. Then an SGEMM and a BF16 GEMM (cuBLASLt's nvjet kernels) of
// 4096^3 run to completion (they need private slots 21318c60[51] and [39]) and take a plausible
// virtual time: never faster than the H100's peak (67 TFLOP/s FP32, 989.5 TFLOP/s BF16 dense),
// and not slower than half of it (plus the host's time for the call). Last, cuBLASLt directly,
// as PyTorch's addmm and linear layers call it: a BF16 matmul with a bias epilogue, its
// algorithm chosen by cublasLtMatmulAlgoGetHeuristic with a workspace, timed the same way.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>

namespace {

// The virtual milliseconds of the second of two identical GEMMs (the first pays cuBLAS's
// one-time set-up on the host), timed with CUDA events; negative on failure.
template <class Gemm> float timed(Gemm gemm) {
  cudaEvent_t s, e;
  cudaEventCreate(&s);
  cudaEventCreate(&e);
  if (gemm() != CUBLAS_STATUS_SUCCESS) return -1;
  cudaEventRecord(s);
  const cublasStatus_t st = gemm();
  cudaEventRecord(e);
  if (st != CUBLAS_STATUS_SUCCESS || cudaEventSynchronize(e) != cudaSuccess) return -1;
  float ms = -1;
  cudaEventElapsedTime(&ms, s, e);
  cudaEventDestroy(s);
  cudaEventDestroy(e);
  return ms;
}

int check_time(const char* what, float ms, double flops, double peak) {
  const double floor_ms = flops / peak * 1e3, ceiling_ms = flops / (0.5 * peak) * 1e3 + 5.0;
  const bool ok = ms >= floor_ms && ms <= ceiling_ms;
  std::printf("%s %s: %.3f ms virtual (%.0f TFLOP/s; bounds %.3f-%.3f ms)\n", ok ? "ok  " : "FAIL", what, ms,
              ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0, floor_ms, ceiling_ms);
  return ok ? 0 : 1;
}

}  // namespace

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

  // GEMMs on device 0.
  cudaSetDevice(0);
  cublasHandle_t h = nullptr;
  failures += cublasCreate(&h) != CUBLAS_STATUS_SUCCESS;
  const int m = 4096;
  const double flops = 2.0 * m * m * m;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  __nv_bfloat16 *ha = nullptr, *hb = nullptr, *hc = nullptr;
  const size_t elems = size_t(m) * m;
  failures += cudaMalloc(&a, elems * 4) != cudaSuccess || cudaMalloc(&b, elems * 4) != cudaSuccess ||
              cudaMalloc(&c, elems * 4) != cudaSuccess || cudaMalloc(&ha, elems * 2) != cudaSuccess ||
              cudaMalloc(&hb, elems * 2) != cudaSuccess || cudaMalloc(&hc, elems * 2) != cudaSuccess;
  const float alpha = 1, beta = 0;
  const float sgemm_ms = timed([&] {
    return cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &alpha, a, m, b, m, &beta, c, m);
  });
  failures += check_time("cublasSgemm 4096^3", sgemm_ms, flops, 67e12);
  const float bf16_ms = timed([&] {
    return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &alpha, ha, CUDA_R_16BF, m, hb, CUDA_R_16BF, m,
                        &beta, hc, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  failures += check_time("cublasGemmEx BF16 4096^3", bf16_ms, flops, 989.5e12);
  cublasDestroy(h);

  // cuBLASLt: D = A*B + bias (BF16 in and out, FP32 compute), as torch.nn.Linear runs it.
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  const size_t workspace_bytes = size_t{32} << 20;
  void* workspace = nullptr;
  __nv_bfloat16* bias = nullptr;
  failures += cudaMalloc(&workspace, workspace_bytes) != cudaSuccess || cudaMalloc(&bias, m * 2) != cudaSuccess;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  const bool lt_ready =
      cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)) ==
          CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)) ==
          CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, m, m) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, m, m, m) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, m, m, m) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                           sizeof(workspace_bytes)) == CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulHeuristicResult_t algo{};
  int found = 0;
  const cublasStatus_t heuristic =
      lt_ready ? cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &algo, &found)
               : CUBLAS_STATUS_NOT_INITIALIZED;
  std::printf("%s cublasLtMatmulAlgoGetHeuristic -> %d, %d algorithm(s)\n",
              heuristic == CUBLAS_STATUS_SUCCESS && found > 0 ? "ok  " : "FAIL", (int)heuristic, found);
  if (heuristic == CUBLAS_STATUS_SUCCESS && found > 0) {
    const float lt_ms = timed([&] {
      return cublasLtMatmul(lt, op, &alpha, ha, la, hb, lb, &beta, hc, lc, hc, lc, &algo.algo, workspace,
                            workspace_bytes, nullptr);
    });
    failures += check_time("cublasLtMatmul BF16+bias 4096^3", lt_ms, flops, 989.5e12);
  } else {
    ++failures;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);

  std::printf("%d check(s) failed (devices: %d)\n", failures, n);
  return failures == 0 && n == 8 ? 0 : 1;
}
