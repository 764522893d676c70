// What another process's work on the same GPU does to a kernel timed with a pair of events:
// the question behind measuring kernels "as if alone" when ranks are processes (contexts of
// different processes time-slice the GPU). Runs on a real GPU, without vgpu.
//
//   timeslice_probe measure USEC N      # a kernel of about USEC us on every SM, N times, each
//                                       # between two events; prints percentiles of the times
//   timeslice_probe spin SECONDS BLOCKS # holds the GPU with BLOCKS spinning blocks (an NCCL
//                                       # kernel waiting for its peer looks like this)
//   timeslice_probe gate SECONDS        # a stream held by cuStreamWaitValue32 on a host flag
//                                       # (no kernel resident), then released after SECONDS
//   timeslice_probe busy SECONDS USEC   # back-to-back kernels of USEC us on every SM
// PROBE_READY_FILE: the other process creates this file once its work is on the GPU;
// PROBE_WAIT_FILE: `measure` waits for that file (after calibrating alone) before measuring.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// Each block works until `ns` of the GPU's global timer have passed since the block started.
__global__ void work_for(unsigned long long ns, int* sink) {
  const unsigned long long t0 = now_ns();
  float x = threadIdx.x;
  while (now_ns() - t0 < ns) {
    for (int i = 0; i < 64; ++i) x = x * 1.0000001f + 0.5f;
  }
  if (x == -1.0f) *sink = 1;
}

int sms() {
  int n = 0;
  CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
  return n;
}

// A fixed amount of arithmetic per block (time-slicing stretches it, unlike work_for).
__global__ void work_iters(long long iters, int* sink) {
  float x = threadIdx.x;
  for (long long i = 0; i < iters; ++i) x = x * 1.0000001f + 0.5f;
  if (x == -1.0f) *sink = 1;
}

int measure(double usec, int n) {
  int* sink;
  CHECK(cudaMalloc(&sink, 4));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  // Calibrate the iteration count alone (the caller starts the other process afterwards).
  long long iters = 1 << 16;
  for (int round = 0; round < 4; ++round) {
    CHECK(cudaEventRecord(a, s));
    work_iters<<<sms(), 256, 0, s>>>(iters, sink);
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    iters = std::max(1LL, static_cast<long long>(iters * usec / (t * 1000.0)));
  }
  std::printf("CALIBRATED\n");
  std::fflush(stdout);
  // Measure only once the other process has its work on the GPU (it creates this file then).
  if (const char* f = std::getenv("PROBE_WAIT_FILE"))
    for (int i = 0; i < 3000 && access(f, F_OK) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::vector<float> ms;
  for (int i = 0; i < n + 5; ++i) {
    CHECK(cudaEventRecord(a, s));
    work_iters<<<sms(), 256, 0, s>>>(iters, sink);
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    if (i >= 5) ms.push_back(t * 1000.0f);
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) { return ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))]; };
  int inflated = 0;
  for (float t : ms) inflated += t > 1.2 * usec;
  std::printf("MEASURE usec=%.0f n=%d min=%.1f p10=%.1f p50=%.1f p90=%.1f p99=%.1f max=%.1f inflated(>1.2x)=%d\n",
              usec, n, ms.front(), pct(0.1), pct(0.5), pct(0.9), pct(0.99), ms.back(), inflated);
  return 0;
}

// The other process says its work is on the GPU (PROBE_READY_FILE), a little after queuing it.
void ready() {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (const char* f = std::getenv("PROBE_READY_FILE"))
    if (FILE* fp = std::fopen(f, "w")) std::fclose(fp);
}

int spin(double seconds, int blocks) {
  int* sink;
  CHECK(cudaMalloc(&sink, 4));
  work_for<<<blocks, 32>>>(static_cast<unsigned long long>(seconds * 1e9), sink);
  ready();
  CHECK(cudaDeviceSynchronize());
  return 0;
}

int busy(double seconds, double usec) {
  int* sink;
  CHECK(cudaMalloc(&sink, 4));
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  bool told = false;
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 50; ++i) work_for<<<sms(), 256>>>(static_cast<unsigned long long>(usec * 1e3), sink);
    if (!told) ready(), told = true;
    CHECK(cudaDeviceSynchronize());
  }
  return 0;
}

int gate(double seconds) {
  CHECK(cudaFree(nullptr));
  volatile unsigned* flag;
  CHECK(cudaHostAlloc((void**)&flag, 4, cudaHostAllocMapped));
  *flag = 0;
  CUdeviceptr dflag;
  if (cuMemHostGetDevicePointer(&dflag, (void*)flag, 0) != CUDA_SUCCESS) return 1;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (cuStreamWaitValue32((CUstream)s, dflag, 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) return 1;
  int* sink;
  CHECK(cudaMalloc(&sink, 4));
  work_for<<<1, 32, 0, s>>>(1000, sink);
  ready();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  *flag = 1;
  CHECK(cudaStreamSynchronize(s));
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: see the comment at the top of timeslice_probe.cu\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "measure" && argc == 4) return measure(std::atof(argv[2]), std::atoi(argv[3]));
  if (mode == "spin" && argc == 4) return spin(std::atof(argv[2]), std::atoi(argv[3]));
  if (mode == "busy" && argc == 4) return busy(std::atof(argv[2]), std::atof(argv[3]));
  if (mode == "gate" && argc == 3) return gate(std::atof(argv[2]));
  std::fprintf(stderr, "usage: see the comment at the top of timeslice_probe.cu\n");
  return 2;
}
