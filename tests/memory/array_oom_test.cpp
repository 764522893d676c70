// Both backends run out of memory at the same array sizes: built twice, once over the sim
// backend (tests/memory) and once over the passthrough (tests/passthrough, whose "real driver"
// is the sim), each run leaves the same free memory on a virtual device, then creates arrays of
// a shape until CUDA_ERROR_OUT_OF_MEMORY. The count must be what the one array-size rule
// (front/memory/array_size.h) allows in that memory, on either backend. The shapes are chosen
// where the layout's padding decides the count (a dense width x height x texel charge gets one
// more array of the first shape in; see the comment of each).
//
// Usage: array_oom_test <device ordinal> [gtest flags]
#include "front/memory/array_size.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>
#include "array_descriptor.h"

namespace {

constexpr size_t kMiB = 1u << 20;
constexpr size_t kPage = 2 * kMiB;
constexpr size_t kLeft = 660 * kMiB;  // what each shape is given
int g_device = 0;

class ArrayOom : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(cuInit(0), CUDA_SUCCESS); }
  void SetUp() override {
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, g_device), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    // Fill the device but kLeft (whole pages) with one allocation.
    const size_t whole = free_mem() / kPage * kPage;
    ASSERT_GT(whole, kLeft);
    ASSERT_EQ(cuMemAlloc(&fill_, whole - kLeft), CUDA_SUCCESS);
    ASSERT_GE(free_mem(), kLeft);
    ASSERT_LT(free_mem(), kLeft + kPage);
  }
  void TearDown() override {
    cuMemFree(fill_);
    cuCtxSetCurrent(nullptr);
    cuDevicePrimaryCtxRelease(g_device);
  }
  static size_t free_mem() {
    size_t f = 0, t = 0;
    EXPECT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    return f;
  }
  // Arrays (or mipmapped arrays of `levels`) of `d` until the device refuses one; all destroyed.
  static size_t count_until_oom(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels) {
    std::vector<CUarray> arrays;
    std::vector<CUmipmappedArray> mips;
    CUresult r = CUDA_SUCCESS;
    while (r == CUDA_SUCCESS && arrays.size() + mips.size() < 10000) {
      if (levels == 0) {
        CUarray a = nullptr;
        if ((r = cuArray3DCreate(&a, &d)) == CUDA_SUCCESS) arrays.push_back(a);
      } else {
        CUmipmappedArray m = nullptr;
        if ((r = cuMipmappedArrayCreate(&m, &d, levels)) == CUDA_SUCCESS) mips.push_back(m);
      }
    }
    EXPECT_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
    for (CUarray a : arrays) EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
    for (CUmipmappedArray m : mips) EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
    return arrays.size() + mips.size();
  }
  // What the rule lets into the free memory.
  static size_t expected(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels) {
    const uint64_t charge = vgpu::arrays::array_charge(d, levels == 0 ? 1 : levels);
    return charge == 0 ? 0 : free_mem() / charge;
  }
  void expect_same_count(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels, size_t by_hand) {
    const size_t want = expected(d, levels);
    EXPECT_EQ(want, by_hand);  // the rule's own figure for kLeft, worked out by hand
    const size_t f = free_mem();
    EXPECT_EQ(count_until_oom(d, levels), want);
    EXPECT_EQ(free_mem(), f);  // every array gave its charge back
  }
  CUcontext ctx_ = nullptr;
  CUdeviceptr fill_ = 0;
};


// 4100 x 4100 uchar4: 68 MiB by the layout (rows of 16448 bytes, 4224 rows), 9 in 660 MiB;
// 66 MiB dense, which would let 10 in.
TEST_F(ArrayOom, PaddedRowsAndHeights) { expect_same_count(array_desc(4100, 4100, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4), 0, 9); }

// 100 slices of 100 x 100 float2: rows of 800 bytes padded to 832, 100 rows to 128: 10.2 MB, in
// 12 MiB; dense it is 8 MB (8 MiB), 82 in 660 MiB instead of 55.
TEST_F(ArrayOom, ThreeDimensional) { expect_same_count(array_desc(100, 100, 100, CU_AD_FORMAT_FLOAT, 2), 0, 55); }

// BC7 8192 x 8192: one byte a texel, 64 MiB, 10 in 660 MiB.
TEST_F(ArrayOom, BlockCompressed) { expect_same_count(array_desc(8192, 8192, 0, CU_AD_FORMAT_BC7_UNORM, 4), 0, 10); }

// NV12 1920 x 1080: 2880-byte rows, 1152 rows: 4 MiB, 165 in 660 MiB.
TEST_F(ArrayOom, VideoFrames) { expect_same_count(array_desc(1920, 1080, 0, CU_AD_FORMAT_NV12, 3), 0, 165); }

// 2048 x 2048 float4 with its full chain of 12 levels: 64 + 16 + 4 + 1 + ... MiB = 86 MiB, 7 in
// 660 MiB.
TEST_F(ArrayOom, MipChains) { expect_same_count(array_desc(2048, 2048, 0, CU_AD_FORMAT_FLOAT, 4), 12, 7); }

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) g_device = std::atoi(argv[1]);
  return RUN_ALL_TESTS();
}
