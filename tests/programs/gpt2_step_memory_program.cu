// Host memory of a process that does what PyTorch does for a GPT-2 small training step, on the
// sim backend (issue 23: 64 ranks as processes must fit a 128 GB host): make the context, the
// cuBLAS and cuBLASLt handles with a workspace, put the model's FP32 parameters on the device
// (cudaMalloc + cudaMemcpy from host memory, as module.to("cuda") does), then run steps of the
// model's BF16 GEMMs (12 layers of QKV, attention, projection and MLP, forward and both
// backward GEMMs of each, and the LM head), the linear layers through cublasLtMatmul with a bias
// epilogue as torch.nn.Linear does, the rest through cublasGemmEx / strided batched.
// RssAnon (the process's own memory) and malloc's bytes in use are printed at every stage, so
// what each costs can be read off; the last stage gives the growth per GEMM over many steps (the
// driver's launch records must not accumulate).
//
//   gpt2_step_memory_program [--tokens T] [--params-mib N] [--steps S]
//                            [--max-growth-bytes-per-gemm B]
//
// Defaults: 512 tokens (batch 1 x 512), GPT-2 small's 124,439,808 parameters (475 MiB in FP32),
// 50 steps after the first. Exits non-zero if a call fails, or when a bound is given and RssAnon
// grew by more than B bytes per GEMM between the second step and the last.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "proc_status.h"

namespace {

struct Reading {
  long anon_kb, file_kb, shmem_kb;
  long long heap;
};

Reading read_now() {
  const struct mallinfo2 m = mallinfo2();
  return {status_kb("RssAnon"), status_kb("RssFile"), status_kb("RssShmem"), static_cast<long long>(m.uordblks + m.hblkhd)};
}

Reading g_last{};
void report(const char* stage) {
  const Reading r = read_now();
  std::printf("%-40s RssAnon %8.1f MiB (%+8.1f)  heap %8.1f MiB (%+8.1f)  RssFile %7.1f  RssShmem %7.1f MiB\n", stage,
              r.anon_kb / 1024.0, (r.anon_kb - g_last.anon_kb) / 1024.0, r.heap / 1048576.0,
              (r.heap - g_last.heap) / 1048576.0, r.file_kb / 1024.0, r.shmem_kb / 1024.0);
  g_last = r;
}

int g_failures = 0;
void check(bool ok, const char* what) {
  if (!ok) {
    ++g_failures;
    std::printf("FAIL %s\n", what);
  }
}

// One linear layer, y = x W^T + b, as cuBLASLt sees it (column-major): D[out x T] = W[out x in] * X[in x T] + bias.
struct Linear {
  int in, out;
};

struct Gemms {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = size_t{32} << 20;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr;
  long long count = 0;

  // D = op(A) * op(B) (+ bias), BF16 in and out, FP32 compute, through cuBLASLt.
  void lt_matmul(int m, int n, int k, bool with_bias) {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    const cublasLtEpilogue_t epilogue = with_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    bool ok = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, k, m) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, m, n, m) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                   sizeof workspace_bytes) == CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulHeuristicResult_t algo{};
    int found = 0;
    ok = ok && cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &algo, &found) == CUBLAS_STATUS_SUCCESS &&
         found > 0;
    const float alpha = 1, beta = 0;
    ok = ok && cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, c, lc, c, lc, &algo.algo, workspace, workspace_bytes,
                              nullptr) == CUBLAS_STATUS_SUCCESS;
    check(ok, "cublasLtMatmul");
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    ++count;
  }

  void gemm_ex(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k) {
    const float alpha = 1, beta = 0;
    check(cublasGemmEx(blas, ta, tb, m, n, k, &alpha, a, CUDA_R_16BF, ta == CUBLAS_OP_N ? m : k, b, CUDA_R_16BF,
                       tb == CUBLAS_OP_N ? k : n, &beta, c, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
          "cublasGemmEx");
    ++count;
  }

  void batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int batch) {
    const float alpha = 1, beta = 0;
    check(cublasGemmStridedBatchedEx(blas, ta, tb, m, n, k, &alpha, a, CUDA_R_16BF, ta == CUBLAS_OP_N ? m : k,
                                     static_cast<long long>(m) * k, b, CUDA_R_16BF, tb == CUBLAS_OP_N ? k : n,
                                     static_cast<long long>(k) * n, &beta, c, CUDA_R_16BF, m,
                                     static_cast<long long>(m) * n, batch, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
          "cublasGemmStridedBatchedEx");
    ++count;
  }

  // Forward and backward of one linear layer over T tokens: y = x W^T + b; dX = dY W; dW = dY^T X.
  void linear(const Linear& l, int tokens) {
    lt_matmul(l.out, tokens, l.in, true);
    gemm_ex(CUBLAS_OP_T, CUBLAS_OP_N, l.in, tokens, l.out);
    gemm_ex(CUBLAS_OP_N, CUBLAS_OP_T, l.out, l.in, tokens);
  }

  // Scores = Q K^T and out = P V per head, and their backward GEMMs.
  void attention(int tokens, int heads, int head_dim) {
    batched(CUBLAS_OP_T, CUBLAS_OP_N, tokens, tokens, head_dim, heads);
    batched(CUBLAS_OP_N, CUBLAS_OP_N, head_dim, tokens, tokens, heads);
    batched(CUBLAS_OP_N, CUBLAS_OP_T, head_dim, tokens, tokens, heads);
    batched(CUBLAS_OP_T, CUBLAS_OP_N, tokens, tokens, head_dim, heads);
    batched(CUBLAS_OP_N, CUBLAS_OP_N, head_dim, tokens, tokens, heads);
    batched(CUBLAS_OP_N, CUBLAS_OP_T, tokens, head_dim, tokens, heads);
  }
};

}  // namespace

int main(int argc, char** argv) {
  int tokens = 512, steps = 50;
  long long params = 124439808;
  long long bound = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--tokens") == 0) tokens = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--params-mib") == 0) params = std::atoll(argv[i + 1]) * (1 << 20) / 4;
    else if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--max-growth-bytes-per-gemm") == 0) bound = std::atoll(argv[i + 1]);
  }
  const int hidden = 768, layers = 12, heads = 12, vocab = 50257;
  g_last = read_now();
  report("start (no CUDA call yet)");
  check(cudaFree(nullptr) == cudaSuccess, "cudaFree(0)");
  report("context (cudaFree(0))");

  Gemms g;
  check(cublasCreate(&g.blas) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  check(cublasLtCreate(&g.lt) == CUBLAS_STATUS_SUCCESS, "cublasLtCreate");
  check(cudaMalloc(&g.workspace, g.workspace_bytes) == cudaSuccess, "workspace");
  check(cublasSetWorkspace(g.blas, g.workspace, g.workspace_bytes) == CUBLAS_STATUS_SUCCESS, "cublasSetWorkspace");
  report("cuBLAS + cuBLASLt handles, 32 MiB workspace");

  // The model's parameters, as module.to("cuda") puts them there: host tensors copied in.
  float* weights = nullptr;
  const size_t weight_bytes = static_cast<size_t>(params) * 4;
  check(cudaMalloc(&weights, weight_bytes) == cudaSuccess, "cudaMalloc(parameters)");
  report("parameters allocated (not touched)");
  {
    std::vector<float> host(static_cast<size_t>(params));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 1013) * 1e-3f;
    report("host copy of the parameters");
    check(cudaMemcpy(weights, host.data(), weight_bytes, cudaMemcpyHostToDevice) == cudaSuccess, "cudaMemcpy HtoD");
    report("copied to the device");
  }
  report("host copy freed");

  // Operands: the largest GEMM's (the LM head) in BF16, shared by all (nothing executes).
  const size_t elems = static_cast<size_t>(std::max(vocab, 4 * hidden)) * std::max(tokens, hidden);
  check(cudaMalloc(&g.a, elems * 2) == cudaSuccess && cudaMalloc(&g.b, elems * 2) == cudaSuccess &&
            cudaMalloc(&g.c, elems * 2) == cudaSuccess && cudaMalloc(&g.bias, size_t(vocab) * 2) == cudaSuccess,
        "cudaMalloc(operands)");
  const Linear qkv{hidden, 3 * hidden}, proj{hidden, hidden}, up{hidden, 4 * hidden}, down{4 * hidden, hidden};
  auto step = [&] {
    for (int l = 0; l < layers; ++l) {
      g.linear(qkv, tokens);
      g.attention(tokens, heads, hidden / heads);
      g.linear(proj, tokens);
      g.linear(up, tokens);
      g.linear(down, tokens);
    }
    g.linear({hidden, vocab}, tokens);  // LM head (tied embedding)
    check(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize");
  };
  step();
  report("first step");
  step();
  report("second step");
  const Reading second = g_last;
  const long long after_second = g.count;
  for (int s = 0; s < steps; ++s) step();
  char what[64];
  std::snprintf(what, sizeof what, "%d more steps", steps);
  report(what);
  const long long gemms = g.count - after_second;
  const long long growth = (g_last.anon_kb - second.anon_kb) * 1024LL;
  const double per_gemm = gemms ? static_cast<double>(growth) / static_cast<double>(gemms) : 0;
  const bool bounded = bound < 0 || per_gemm <= static_cast<double>(bound);
  std::printf("%s RssAnon growth %+lld bytes over %lld GEMMs (%.1f bytes per GEMM; bound %lld)\n",
              bounded ? "ok  " : "FAIL", growth, gemms, per_gemm, bound);
  cublasLtDestroy(g.lt);
  cublasDestroy(g.blas);
  std::printf("%d call(s) failed\n", g_failures);
  return g_failures == 0 && bounded ? 0 : 1;
}
