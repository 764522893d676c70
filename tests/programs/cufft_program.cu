// cuFFT, unmodified, on the sim backend: planning loads cuFFT's kernels into modules of its own
// and finds each kernel through the tools' module table (6e163fbe slot 7), which the sim
// backend must serve. For each transform below the program plans, executes once, captures one
// execution into a graph (its kernel nodes are the kernels cuFFT launches), replays the graph,
// and times direct executions with CUDA events (the least of five). Every call must succeed,
// every execution must launch at least one kernel, and its virtual time must be of a kernel's
// order, less than a millisecond, and never faster than reading its input and writing its
// output once at the H100's 3.35 TB/s (within 1%: the fallback model counts n/2 complex values
// a row of a real transform, which has n/2+1).
#include <cuda_runtime.h>
#include <cufft.h>

#include <cstdio>
#include <functional>
#include <vector>

namespace {

int failures = 0;

// Counts a failure and says which call failed with what code (0 is success for both APIs).
bool ok(int code, const char* what) {
  if (code != 0) {
    std::printf("FAIL %s -> %d\n", what, code);
    ++failures;
  }
  return code == 0;
}
#define CUFFT(x) ok(static_cast<int>(x), #x)
#define CUDA(x) ok(static_cast<int>(x), #x)

// Plans with `plan`, then runs `exec` as described above; `bytes` sizes the buffer, `traffic`
// is the bytes of input and output of one execution.
void transform(const char* name, size_t bytes, double traffic, const std::function<cufftResult(cufftHandle*)>& plan,
               const std::function<cufftResult(cufftHandle, void*)>& exec) {
  void* buf = nullptr;
  cudaStream_t s = nullptr;
  cufftHandle h = 0;
  if (!CUDA(cudaMalloc(&buf, bytes)) || !CUDA(cudaStreamCreate(&s))) return;
  const cufftResult planned = plan(&h);
  if (!ok(planned, name) || !CUFFT(cufftSetStream(h, s))) return;
  CUFFT(exec(h, buf));

  cudaGraph_t graph = nullptr;
  CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  CUFFT(exec(h, buf));
  CUDA(cudaStreamEndCapture(s, &graph));
  size_t nodes = 0;
  CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
  std::vector<cudaGraphNode_t> list(nodes);
  CUDA(cudaGraphGetNodes(graph, list.data(), &nodes));
  int kernels = 0;
  for (cudaGraphNode_t n : list) {
    cudaGraphNodeType t;
    CUDA(cudaGraphNodeGetType(n, &t));
    kernels += t == cudaGraphNodeTypeKernel;
  }
  cudaGraphExec_t replay = nullptr;
  CUDA(cudaGraphInstantiate(&replay, graph, 0));
  CUDA(cudaGraphLaunch(replay, s));

  cudaEvent_t e0, e1;
  CUDA(cudaEventCreate(&e0));
  CUDA(cudaEventCreate(&e1));
  // The stream is idle at e0, so an execution's time includes cuFFT's host work before its
  // first launch, which the sim charges as the thread's CPU time. On a loaded 2-core machine under
  // TSan a descheduled thread once made that 3.3 ms (R2C, CI 2026-11-28): the least of five
  // executions is the transform's time.
  float ms = -1;
  for (int i = 0; i < 5; ++i) {
    CUDA(cudaEventRecord(e0, s));
    CUFFT(exec(h, buf));
    CUDA(cudaEventRecord(e1, s));
    CUDA(cudaEventSynchronize(e1));
    float once = -1;
    CUDA(cudaEventElapsedTime(&once, e0, e1));
    if (ms < 0 || once < ms) ms = once;
  }
  const double floor_ms = traffic / 3.35e12 * 1e3;
  const bool good = kernels >= 1 && ms >= 0.99 * floor_ms && ms < 1.0;
  std::printf("%s %s: %d kernel(s), %.4f ms virtual (moving its data takes %.4f ms)\n", good ? "ok  " : "FAIL",
              name, kernels, ms, floor_ms);
  failures += !good;

  CUDA(cudaGraphExecDestroy(replay));
  CUDA(cudaGraphDestroy(graph));
  CUDA(cudaEventDestroy(e0));
  CUDA(cudaEventDestroy(e1));
  CUFFT(cufftDestroy(h));
  CUDA(cudaStreamDestroy(s));
  CUDA(cudaFree(buf));
}

}  // namespace

int main() {
  const int n1 = 1 << 20;
  transform("C2C 1-D 2^20 forward", sizeof(cufftComplex) * n1, 2.0 * sizeof(cufftComplex) * n1,
            [&](cufftHandle* h) { return cufftPlan1d(h, n1, CUFFT_C2C, 1); },
            [](cufftHandle h, void* b) {
              return cufftExecC2C(h, static_cast<cufftComplex*>(b), static_cast<cufftComplex*>(b), CUFFT_FORWARD);
            });
  transform("C2C 1-D 2^20 inverse", sizeof(cufftComplex) * n1, 2.0 * sizeof(cufftComplex) * n1,
            [&](cufftHandle* h) { return cufftPlan1d(h, n1, CUFFT_C2C, 1); },
            [](cufftHandle h, void* b) {
              return cufftExecC2C(h, static_cast<cufftComplex*>(b), static_cast<cufftComplex*>(b), CUFFT_INVERSE);
            });
  // 128 MiB: a pass's traffic, not the launch floor, sets the time.
  const int n4 = 1 << 24;
  transform("C2C 1-D 2^24 forward", sizeof(cufftComplex) * n4, 2.0 * sizeof(cufftComplex) * n4,
            [&](cufftHandle* h) { return cufftPlan1d(h, n4, CUFFT_C2C, 1); },
            [](cufftHandle h, void* b) {
              return cufftExecC2C(h, static_cast<cufftComplex*>(b), static_cast<cufftComplex*>(b), CUFFT_FORWARD);
            });
  // Real to complex and back, 64 batches of 2^14 (in place: room for n/2+1 complex a row).
  const int n2 = 1 << 14, batch = 64;
  const size_t r2c_bytes = sizeof(cufftComplex) * (n2 / 2 + 1) * batch;
  const double r2c_traffic = sizeof(cufftReal) * n2 * batch + r2c_bytes;
  transform("R2C 1-D 2^14 x64", r2c_bytes, r2c_traffic,
            [&](cufftHandle* h) { return cufftPlan1d(h, n2, CUFFT_R2C, batch); },
            [](cufftHandle h, void* b) {
              return cufftExecR2C(h, static_cast<cufftReal*>(b), static_cast<cufftComplex*>(b));
            });
  transform("C2R 1-D 2^14 x64", r2c_bytes, r2c_traffic,
            [&](cufftHandle* h) { return cufftPlan1d(h, n2, CUFFT_C2R, batch); },
            [](cufftHandle h, void* b) {
              return cufftExecC2R(h, static_cast<cufftComplex*>(b), static_cast<cufftReal*>(b));
            });
  transform("C2C 2-D 1024x1024", sizeof(cufftComplex) * 1024 * 1024, 2.0 * sizeof(cufftComplex) * 1024 * 1024,
            [](cufftHandle* h) { return cufftPlan2d(h, 1024, 1024, CUFFT_C2C); },
            [](cufftHandle h, void* b) {
              return cufftExecC2C(h, static_cast<cufftComplex*>(b), static_cast<cufftComplex*>(b), CUFFT_FORWARD);
            });
  const int n3 = 1 << 18;
  transform("Z2Z 1-D 2^18", sizeof(cufftDoubleComplex) * n3, 2.0 * sizeof(cufftDoubleComplex) * n3,
            [&](cufftHandle* h) { return cufftPlan1d(h, n3, CUFFT_Z2Z, 1); },
            [](cufftHandle h, void* b) {
              return cufftExecZ2Z(h, static_cast<cufftDoubleComplex*>(b), static_cast<cufftDoubleComplex*>(b),
                                  CUFFT_FORWARD);
            });
  std::printf("%s\n", failures == 0 ? "cufft_program: all passed" : "cufft_program: FAILED");
  return failures == 0 ? 0 : 1;
}
