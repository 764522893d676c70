// The shared-pages memory policy (VGPU_MEMORY_POLICY=shared) over the sim backend as the real
// driver: eight virtual 80 GB devices each hold 60 GiB on one "physical" 80 GB device, because
// every allocation maps onto one 64 MiB chunk (VGPU_SHARED_CHUNK); capacity stays per virtual
// device, and the aliasing is visible (which is why the README says values are meaningless).
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include <cstdint>
#include <vector>
#include "on_passthrough.h"

namespace {

// The library these tests link is vgpu's passthrough build, not the sim that serves as its real
// driver (both are libcuda.so.1).

constexpr size_t kGiB = 1ull << 30;
constexpr size_t kChunk = 64ull << 20;

CUcontext primary(int dev) {
  CUcontext c = nullptr;
  EXPECT_EQ(cuDevicePrimaryCtxRetain(&c, dev), CUDA_SUCCESS);
  return c;
}

TEST(SharedPages, EightDevicesOfSixtyGigabytesOnOneGpu) {
  ASSERT_TRUE(running_on_passthrough());
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  std::vector<CUdeviceptr> ptrs(8, 0);
  for (int d = 0; d < 8; ++d) {
    ASSERT_EQ(cuCtxSetCurrent(primary(d)), CUDA_SUCCESS);
    size_t before = 0, total = 0, after = 0;
    ASSERT_EQ(cuMemGetInfo(&before, &total), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&ptrs[d], 60 * kGiB), CUDA_SUCCESS) << "device " << d;
    ASSERT_EQ(cuMemGetInfo(&after, &total), CUDA_SUCCESS);
    EXPECT_EQ(before - after, 60 * kGiB);  // the virtual device is charged in full
    CUdeviceptr more = 0;
    EXPECT_EQ(cuMemAlloc(&more, 30 * kGiB), CUDA_ERROR_OUT_OF_MEMORY);  // past its 80 GB
    int ordinal = -1;
    ASSERT_EQ(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptrs[d] + kGiB), CUDA_SUCCESS);
    EXPECT_EQ(ordinal, d);
  }
  // Every allocation aliases the same physical chunk: bytes written through device 1's range
  // are read back through device 6's range, and one chunk further on as well.
  const std::vector<uint32_t> pattern(1024, 0xC0FFEEu);
  ASSERT_EQ(cuMemcpyHtoD(ptrs[1], pattern.data(), 4096), CUDA_SUCCESS);
  std::vector<uint32_t> back(1024, 0);
  ASSERT_EQ(cuMemcpyDtoH(back.data(), ptrs[6], 4096), CUDA_SUCCESS);
  EXPECT_EQ(back, pattern);
  std::fill(back.begin(), back.end(), 0);
  ASSERT_EQ(cuMemcpyDtoH(back.data(), ptrs[6] + kChunk, 4096), CUDA_SUCCESS);
  EXPECT_EQ(back, pattern);
  for (int d = 0; d < 8; ++d) {
    ASSERT_EQ(cuCtxSetCurrent(primary(d)), CUDA_SUCCESS);
    size_t free = 0, total = 0;
    EXPECT_EQ(cuMemFree(ptrs[d]), CUDA_SUCCESS);
    ASSERT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    EXPECT_EQ(free, 84465090560u);  // back to the fresh device's figure
    EXPECT_EQ(cuMemFree(ptrs[d]), CUDA_ERROR_INVALID_VALUE);
  }
}

// (This binary runs with VGPU_SHARED_MIN_BYTES=0 so that small allocations are shared too; the
// default keeps allocations under 4 MiB private.)
TEST(SharedPages, SmallAllocationsAreWholePages) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(primary(3)), CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc(&a, 100), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&b, 100), CUDA_SUCCESS);
  EXPECT_NE(a, b);  // distinct addresses even though the bytes alias
  EXPECT_EQ(cuMemsetD8(b, 0x5a, 100), CUDA_SUCCESS);
  uint8_t byte = 0;
  ASSERT_EQ(cuMemcpyDtoH(&byte, a, 1), CUDA_SUCCESS);
  EXPECT_EQ(byte, 0x5a);
  EXPECT_EQ(cuMemFree(a), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(b), CUDA_SUCCESS);
}

}  // namespace
