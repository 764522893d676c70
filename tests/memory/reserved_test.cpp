// Device memory of the sim backend is only reserved: host pages back it where the program
// touches them (copies in and out), so 64 virtual 80 GB GPUs fit a host with a fraction of that
// RAM, and capacity is still enforced per virtual GPU. Run with VGPU_NODES=8 (64 devices).
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

// The process's resident memory in bytes (VmRSS).
uint64_t rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

constexpr size_t kGiB = size_t{1} << 30;

}  // namespace

TEST(ReservedMemory, SixtyFourGpusOf70GBFitInLittleHostMemory) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  int n = 0;
  ASSERT_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
  ASSERT_EQ(n, 64) << "run with VGPU_NODES=8";
  const uint64_t before = rss_bytes();
  std::vector<CUcontext> ctx(n);
  std::vector<CUdeviceptr> big(n);
  const size_t bytes = 70 * kGiB;
  std::vector<uint8_t> pattern(1 << 20, 0x5a), back(1 << 20);
  for (int d = 0; d < n; ++d) {
    CUdevice dev;
    ASSERT_EQ(cuDeviceGet(&dev, d), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx[d], dev), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx[d]), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&big[d], bytes), CUDA_SUCCESS) << "device " << d;
    // Touch both ends: data round-trips where the program writes it.
    ASSERT_EQ(cuMemcpyHtoD(big[d], pattern.data(), pattern.size()), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyHtoD(big[d] + bytes - pattern.size(), pattern.data(), pattern.size()), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyDtoH(back.data(), big[d] + bytes - back.size(), back.size()), CUDA_SUCCESS);
    ASSERT_EQ(std::memcmp(back.data(), pattern.data(), back.size()), 0) << "device " << d;
    // Capacity per virtual GPU: 80 GB less the 70 GiB taken leaves no room for 10 GiB more.
    CUdeviceptr more = 0;
    EXPECT_EQ(cuMemAlloc(&more, 10 * kGiB), CUDA_ERROR_OUT_OF_MEMORY) << "device " << d;
    size_t free_b = 0, total_b = 0;
    ASSERT_EQ(cuMemGetInfo(&free_b, &total_b), CUDA_SUCCESS);
    EXPECT_LT(free_b, total_b - bytes + 1);
  }
  const uint64_t grown = rss_bytes() - before;
  std::printf("64 x 70 GiB allocated (4480 GiB virtual); resident memory grew by %.1f MiB\n",
              grown / double(1 << 20));
  // 2 MiB written per GPU (128 MiB in all) plus the driver's own bookkeeping.
  EXPECT_LT(grown, uint64_t{512} << 20);
  for (int d = 0; d < n; ++d) {
    ASSERT_EQ(cuCtxSetCurrent(ctx[d]), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(big[d]), CUDA_SUCCESS);
    CUdevice dev;
    ASSERT_EQ(cuDeviceGet(&dev, d), CUDA_SUCCESS);
    EXPECT_EQ(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
  }
}
