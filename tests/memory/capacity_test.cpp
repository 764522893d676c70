// Capacity on every allocation path, on a small virtual device (VGPU_MEMORY=2GiB in the test's
// environment): each path succeeds up to exactly the free memory and is refused one granule
// past it with CUDA_ERROR_OUT_OF_MEMORY, and nothing leaks on the refusals.
#include <cuda.h>
#include <gtest/gtest.h>

namespace {

constexpr size_t kGranule = 2u << 20;

class Capacity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(cuInit(0), CUDA_SUCCESS); }
  void SetUp() override {
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuCtxSetCurrent(nullptr);
    cuDevicePrimaryCtxRelease(0);
  }
  static size_t free_mem() {
    size_t f = 0, t = 0;
    EXPECT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    return f;
  }
  CUcontext ctx_ = nullptr;
};

TEST_F(Capacity, DeviceIsTheConfiguredSize) {
  size_t f = 0, t = 0;
  ASSERT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
  EXPECT_EQ(t, 2ull << 30);
  EXPECT_LT(f, t);
}

TEST_F(Capacity, CuMemAllocExactlyAtCapacity) {
  const size_t f = free_mem();
  const size_t whole = f / kGranule * kGranule;
  CUdeviceptr p, q;
  EXPECT_EQ(cuMemAlloc(&p, whole + 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(free_mem(), f);
  ASSERT_EQ(cuMemAlloc(&p, whole), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(&q, 1), f - whole >= kGranule ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f);
}

TEST_F(Capacity, PitchManagedAndArraysAreCharged) {
  const size_t f = free_mem();
  const size_t whole = f / kGranule * kGranule;
  CUdeviceptr p;
  size_t pitch;
  EXPECT_EQ(cuMemAllocPitch(&p, &pitch, 1 << 20, whole / (1 << 20) + 1, 4), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemAllocManaged(&p, whole + 1, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemAllocManaged(&p, whole, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  CUarray a;
  CUDA_ARRAY_DESCRIPTOR ad{};
  ad.Width = 1024; ad.Height = 1024; ad.Format = CU_AD_FORMAT_FLOAT; ad.NumChannels = 4;
  EXPECT_EQ(cuArrayCreate(&a, &ad), f - whole >= (16u << 20) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
  ASSERT_EQ(cuArrayCreate(&a, &ad), CUDA_SUCCESS);
  EXPECT_EQ(f - free_mem(), 16u << 20);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f);
}

TEST_F(Capacity, OtherDevicesUnaffected) {
  const size_t f = free_mem();
  CUdeviceptr p;
  ASSERT_EQ(cuMemAlloc(&p, f / kGranule * kGranule), CUDA_SUCCESS);
  CUcontext c1;
  ASSERT_EQ(cuCtxCreate(&c1, nullptr, 0, 1), CUDA_SUCCESS);
  CUdeviceptr q;
  EXPECT_EQ(cuMemAlloc(&q, 64 << 20), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(q), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxDestroy(c1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
}

}  // namespace
