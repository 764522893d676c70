// VGPU_SIM_COPY_DATA_BYTES (issue 23, host memory per rank): a copy or memset of more bytes than
// it into device-only memory is timed but not performed, so the host pages behind the
// destination stay untouched (the sim backend's device pointer is the host address of its
// backing: mincore() tells which pages exist); one of at most that many bytes is performed, and
// memory the host reads directly (managed, pinned) is always written. Run with
// VGPU_SIM_COPY_DATA_BYTES=65536.
#include <cuda.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "resident_pages.h"

namespace {

constexpr size_t kLimit = 65536;  // as tests/memory/meson.build sets it
constexpr size_t kBig = size_t{4} << 20;

// Pages of [ptr, ptr + bytes) resident in host memory.
size_t resident_pages(CUdeviceptr ptr, size_t bytes) { return vtest::resident_pages(ptr, bytes); }

bool all_equal(const std::vector<uint8_t>& v, uint8_t b) {
  for (uint8_t x : v)
    if (x != b) return false;
  return true;
}

class CopyData : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDeviceGet(&dev_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, dev_), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  }
  void TearDown() override { cuDevicePrimaryCtxRelease(dev_); }
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
};

TEST_F(CopyData, LargeCopyIntoDeviceMemoryIsTimedOnly) {
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, kBig), CUDA_SUCCESS);
  std::vector<uint8_t> pattern(kBig, 0x5a), back(kBig, 0xee);
  ASSERT_EQ(cuMemcpyHtoD(d, pattern.data(), kBig), CUDA_SUCCESS);
  EXPECT_EQ(resident_pages(d, kBig), 0u) << "the destination's host pages were touched";
  ASSERT_EQ(cuMemcpyDtoH(back.data(), d, kBig), CUDA_SUCCESS);
  EXPECT_TRUE(all_equal(back, 0)) << "the destination kept what it held (zeros)";
  // Asynchronous, device to device and memset: the same.
  CUdeviceptr e = 0;
  ASSERT_EQ(cuMemAlloc(&e, kBig), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync(e, pattern.data(), kBig, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoD(e, d, kBig), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8(e, 0x11, kBig), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(resident_pages(e, kBig), 0u);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(e), CUDA_SUCCESS);
}

TEST_F(CopyData, CopiesUpToTheLimitArePerformed) {
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, kBig), CUDA_SUCCESS);
  std::vector<uint8_t> pattern(kLimit, 0x5a), back(kLimit, 0);
  ASSERT_EQ(cuMemcpyHtoD(d + kLimit, pattern.data(), kLimit), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(back.data(), d + kLimit, kLimit), CUDA_SUCCESS);
  EXPECT_EQ(back, pattern);
  ASSERT_EQ(cuMemsetD32(d, 0x01020304, kLimit / 4), CUDA_SUCCESS);
  uint32_t word = 0;
  ASSERT_EQ(cuMemcpyDtoH(&word, d + kLimit - 4, 4), CUDA_SUCCESS);
  EXPECT_EQ(word, 0x01020304u);
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
}

// A memset of 0 costs no host memory (its whole pages are given back, sim/memory/page_writes.h),
// so it is performed whatever its size: the pattern written before reads as zeros after.
TEST_F(CopyData, LargeMemsetOfZeroIsPerformed) {
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, kBig), CUDA_SUCCESS);
  std::vector<uint8_t> pattern(kLimit, 0x5a), back(kBig, 0xee);
  for (size_t off = 0; off < kBig; off += kLimit)
    ASSERT_EQ(cuMemcpyHtoD(d + off, pattern.data(), kLimit), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8(d, 0, kBig), CUDA_SUCCESS);
  EXPECT_EQ(resident_pages(d, kBig), 0u) << "the zeroed pages were given back";
  ASSERT_EQ(cuMemcpyDtoH(back.data(), d, kBig), CUDA_SUCCESS);
  EXPECT_TRUE(all_equal(back, 0));
  EXPECT_EQ(cuMemFree(d), CUDA_SUCCESS);
}

TEST_F(CopyData, MemoryTheHostReadsIsAlwaysWritten) {
  std::vector<uint8_t> pattern(kBig, 0x5a);
  CUdeviceptr managed = 0;
  ASSERT_EQ(cuMemAllocManaged(&managed, kBig, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(managed, pattern.data(), kBig), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(managed), pattern.data(), kBig), 0);
  void* pinned = nullptr;
  ASSERT_EQ(cuMemAllocHost(&pinned, kBig), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(pinned, managed, kBig), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(pinned, pattern.data(), kBig), 0);
  EXPECT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(managed), CUDA_SUCCESS);
}

}  // namespace
