// cuDNN, unmodified, on the sim backend: a handle, then a 3x3 convolution of a ResNet-sized layer
// (32 x 64 x 56 x 56, 64 filters; 7.4 GFLOP each way) forward, backward to the data and to the
// filter, FP32 with TF32 tensor cores allowed (cuDNN's default, as PyTorch runs it), each with
// the algorithm cuDNN's heuristics pick and the workspace it asks for. cuDNN loads some of its
// kernels as cubins with CU_LIBRARY_BINARY_IS_PRESERVED and no value array, which the driver
// must accept. Every call must succeed, and each pass's virtual time must be of the right class:
// never faster than the TF32 tensor peak (494.5 TFLOP/s dense on an H100), below 10 ms.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdio>
#include <functional>

namespace {

int failures = 0;

bool ok(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) {
    std::printf("FAIL %s -> %s\n", what, cudnnGetErrorString(s));
    ++failures;
  }
  return s == CUDNN_STATUS_SUCCESS;
}
#define DNN(x) ok((x), #x)

// The virtual milliseconds of the second of two runs of `pass` (the first pays set-up on the
// host), by CUDA events; negative on failure.
float timed(const std::function<cudnnStatus_t()>& pass) {
  cudaEvent_t s, e;
  cudaEventCreate(&s);
  cudaEventCreate(&e);
  if (!ok(pass(), "first run")) return -1;
  cudaEventRecord(s);
  const cudnnStatus_t st = pass();
  cudaEventRecord(e);
  if (!ok(st, "timed run") || cudaEventSynchronize(e) != cudaSuccess) return -1;
  float ms = -1;
  cudaEventElapsedTime(&ms, s, e);
  cudaEventDestroy(s);
  cudaEventDestroy(e);
  return ms;
}

void check_time(const char* what, float ms, double flops) {
  const double floor_ms = flops / 494.5e12 * 1e3, ceiling_ms = 10.0;
  const bool good = ms >= floor_ms && ms <= ceiling_ms;
  std::printf("%s %s: %.4f ms virtual (bounds %.4f-%.1f ms)\n", good ? "ok  " : "FAIL", what, ms, floor_ms, ceiling_ms);
  failures += !good;
}

}  // namespace

int main() {
  cudnnHandle_t h = nullptr;
  if (!DNN(cudnnCreate(&h))) return 1;
  std::printf("ok   cudnnCreate (cuDNN %zu)\n", cudnnGetVersion());
  const int n = 32, c = 64, k = 64, hw = 56, r = 3;
  const double flops = 2.0 * n * k * c * r * r * hw * hw;
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  DNN(cudnnCreateTensorDescriptor(&x));
  DNN(cudnnCreateTensorDescriptor(&y));
  DNN(cudnnCreateFilterDescriptor(&w));
  DNN(cudnnCreateConvolutionDescriptor(&conv));
  DNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, hw, hw));
  DNN(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, r));
  DNN(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DNN(cudnnSetConvolutionMathType(conv, CUDNN_DEFAULT_MATH));
  int on = 0, oc = 0, oh = 0, ow = 0;
  DNN(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &on, &oc, &oh, &ow));
  DNN(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow));

  float *dx = nullptr, *dw = nullptr, *dy = nullptr;
  void* ws = nullptr;
  const size_t ws_bytes = size_t{256} << 20;
  if (cudaMalloc(&dx, sizeof(float) * n * c * hw * hw) != cudaSuccess ||
      cudaMalloc(&dw, sizeof(float) * k * c * r * r) != cudaSuccess ||
      cudaMalloc(&dy, sizeof(float) * on * oc * oh * ow) != cudaSuccess || cudaMalloc(&ws, ws_bytes) != cudaSuccess) {
    std::printf("FAIL cudaMalloc\n");
    return 1;
  }
  const float one = 1, zero = 0;
  int got = 0;

  cudnnConvolutionFwdAlgoPerf_t fwd[8];
  size_t need = 0;
  if (DNN(cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv, y, 8, &got, fwd)) && got > 0 &&
      DNN(cudnnGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, fwd[0].algo, &need)) && need <= ws_bytes)
    check_time("convolution forward", timed([&] {
      return cudnnConvolutionForward(h, &one, x, dx, w, dw, conv, fwd[0].algo, ws, need, &zero, y, dy);
    }), flops);
  else
    std::printf("FAIL forward algorithm (%d found, workspace %zu)\n", got, need), ++failures;

  cudnnConvolutionBwdDataAlgoPerf_t bwd_data[8];
  if (DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, y, conv, x, 8, &got, bwd_data)) && got > 0 &&
      DNN(cudnnGetConvolutionBackwardDataWorkspaceSize(h, w, y, conv, x, bwd_data[0].algo, &need)) && need <= ws_bytes)
    check_time("convolution backward data", timed([&] {
      return cudnnConvolutionBackwardData(h, &one, w, dw, y, dy, conv, bwd_data[0].algo, ws, need, &zero, x, dx);
    }), flops);
  else
    std::printf("FAIL backward data algorithm (%d found, workspace %zu)\n", got, need), ++failures;

  cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[8];
  if (DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, conv, w, 8, &got, bwd_filter)) && got > 0 &&
      DNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x, y, conv, w, bwd_filter[0].algo, &need)) &&
      need <= ws_bytes)
    check_time("convolution backward filter", timed([&] {
      return cudnnConvolutionBackwardFilter(h, &one, x, dx, y, dy, conv, bwd_filter[0].algo, ws, need, &zero, w, dw);
    }), flops);
  else
    std::printf("FAIL backward filter algorithm (%d found, workspace %zu)\n", got, need), ++failures;

  DNN(cudnnDestroyTensorDescriptor(x));
  DNN(cudnnDestroyTensorDescriptor(y));
  DNN(cudnnDestroyFilterDescriptor(w));
  DNN(cudnnDestroyConvolutionDescriptor(conv));
  DNN(cudnnDestroy(h));
  std::printf("%s\n", failures == 0 ? "cudnn_program: all passed" : "cudnn_program: FAILED");
  return failures == 0 ? 0 : 1;
}
