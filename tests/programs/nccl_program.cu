// NCCL, unmodified, on the sim backend: one process drives every virtual GPU (ncclCommInitAll),
// runs all-reduces of several sizes in groups, times each with CUDA events on rank 0's stream
// (virtual time), and destroys the communicators. It must run to the end: NCCL's proxy threads
// must not wait for kernels that the sim backend never executes.
//
// Usage: nccl_program [ranks] [MiB ...]   (default: every device; 1 and 256 MiB)
// Prints one line per size: "allreduce <bytes> B <ms> ms busbw <GB/s>", and exits non-zero on any
// failed call.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x)                                                                       \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::printf("FAIL %s -> %s\n", #x, cudaGetErrorName(e_));                             \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)
#define CHECK_NCCL(x)                                                                       \
  do {                                                                                      \
    ncclResult_t r_ = (x);                                                                  \
    if (r_ != ncclSuccess) {                                                                \
      std::printf("FAIL %s -> %s\n", #x, ncclGetErrorString(r_));                           \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

int main(int argc, char** argv) {
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  const int n = argc > 1 ? std::atoi(argv[1]) : devices;
  if (n < 1 || n > devices) {
    std::printf("FAIL %d ranks asked, %d devices\n", n, devices);
    return 1;
  }
  std::vector<size_t> mib;
  for (int i = 2; i < argc; ++i) mib.push_back(std::strtoull(argv[i], nullptr, 10));
  if (mib.empty()) mib = {1, 256};

  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  std::vector<ncclComm_t> comms(n);
  CHECK_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  std::printf("ok   ncclCommInitAll over %d devices\n", n);

  const size_t max_bytes = static_cast<size_t>(*std::max_element(mib.begin(), mib.end())) << 20;
  std::vector<cudaStream_t> streams(n);
  std::vector<float*> buf(n);
  for (int i = 0; i < n; ++i) {
    CHECK_CUDA(cudaSetDevice(i));
    CHECK_CUDA(cudaStreamCreate(&streams[i]));
    CHECK_CUDA(cudaMalloc(&buf[i], max_bytes));
  }
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  for (size_t m : mib) {
    const size_t bytes = m << 20;
    const size_t count = bytes / sizeof(float);
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaEventRecord(start, streams[0]));
    CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < n; ++i)
      CHECK_NCCL(ncclAllReduce(buf[i], buf[i], count, ncclFloat, ncclSum, comms[i], streams[i]));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaEventRecord(stop, streams[0]));
    for (int i = 0; i < n; ++i) {
      CHECK_CUDA(cudaSetDevice(i));
      CHECK_CUDA(cudaStreamSynchronize(streams[i]));
    }
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    const double busbw = ms > 0 ? bytes * 2.0 * (n - 1) / n / (ms * 1e-3) / 1e9 : 0;
    std::printf("allreduce %zu B %.4f ms busbw %.1f GB/s\n", bytes, ms, busbw);
  }

  for (int i = 0; i < n; ++i) CHECK_NCCL(ncclCommDestroy(comms[i]));
  std::printf("ok   ncclCommDestroy of %d communicators\n", n);
  for (int i = 0; i < n; ++i) {
    CHECK_CUDA(cudaSetDevice(i));
    CHECK_CUDA(cudaFree(buf[i]));
    CHECK_CUDA(cudaStreamDestroy(streams[i]));
  }
  return 0;
}
