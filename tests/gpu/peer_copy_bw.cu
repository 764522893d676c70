// Host and peer copy rates on a real machine, to calibrate the sim backend's copy prices
// (vgpu/front/launch/copy_cost.h: [pcie] efficiency, peer copies staged through the host without peer
// access). Prints one line per measurement:
//   H2D <bytes> <GB/s>, D2H <bytes> <GB/s>          pinned host memory, device 0
//   PEER_DISABLED <bytes> <GB/s>                    cudaMemcpyPeer 0 -> 1 without peer access
//   PEER_ENABLED <bytes> <GB/s>                     the same after cudaDeviceEnablePeerAccess
//   D2D_SYNC_HOST_US <us>                           host time of a synchronous 1 GiB D2D cudaMemcpy
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

namespace {

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      std::printf("ERROR %s: %s\n", #x, cudaGetErrorString(e_));                \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

template <class F>
double gbps(size_t bytes, int reps, F copy) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  copy();  // warm-up
  cudaDeviceSynchronize();
  cudaEventRecord(a);
  for (int i = 0; i < reps; ++i) copy();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return bytes * reps / (ms * 1e-3) / 1e9;
}

}  // namespace

int main() {
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  CK(cudaSetDevice(0));
  const size_t sizes[] = {1 << 20, 64 << 20, 256 << 20};
  void *host = nullptr, *dev0 = nullptr;
  CK(cudaMallocHost(&host, 256 << 20));
  CK(cudaMalloc(&dev0, 1ull << 30));
  for (size_t s : sizes) {
    std::printf("H2D %zu %.2f\n", s, gbps(s, 20, [&] { cudaMemcpyAsync(dev0, host, s, cudaMemcpyHostToDevice); }));
    std::printf("D2H %zu %.2f\n", s, gbps(s, 20, [&] { cudaMemcpyAsync(host, dev0, s, cudaMemcpyDeviceToHost); }));
  }
  void* other = nullptr;
  CK(cudaMalloc(&other, 1ull << 30));
  const auto t0 = std::chrono::steady_clock::now();
  CK(cudaMemcpy(other, dev0, 1ull << 30, cudaMemcpyDeviceToDevice));
  const double host_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  CK(cudaDeviceSynchronize());
  std::printf("D2D_SYNC_HOST_US %.1f\n", host_us);
  if (n >= 2) {
    void* dev1 = nullptr;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&dev1, 256 << 20));
    CK(cudaSetDevice(0));
    for (size_t s : sizes)
      std::printf("PEER_DISABLED %zu %.2f\n", s, gbps(s, 10, [&] { cudaMemcpyPeerAsync(dev1, 1, dev0, 0, s); }));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    for (size_t s : sizes)
      std::printf("PEER_ENABLED %zu %.2f\n", s, gbps(s, 10, [&] { cudaMemcpyPeerAsync(dev1, 1, dev0, 0, s); }));
  } else {
    std::printf("PEER skipped: one GPU\n");
  }
  return 0;
}
