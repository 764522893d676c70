// CUDA arrays under the passthrough backend, over the sim backend as its real driver: every
// array is charged to its virtual device by the array-size rule both backends share
// (vgpu/front/memory/array_size.h), refused with CUDA_ERROR_OUT_OF_MEMORY past the virtual
// device's capacity (nothing already allocated is lost), and destroying it gives the bytes back.
//
// Only virtual device 2 is used: all virtual devices share the real driver's device 0 here, and
// each real context costs that device its reservation, so with one context the real device
// always has at least what the virtual one has free, and every refusal seen is the virtual
// device's own (the sim charges an array by the same rule).
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>
#include "../memory/array_descriptor.h"
#include "on_passthrough.h"

namespace {

constexpr size_t kMiB = 1u << 20;
constexpr size_t kPage = 2 * kMiB;

class PassthroughArrays : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(running_on_passthrough());
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  }
  void SetUp() override {
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 2), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuCtxSetCurrent(nullptr);
    cuDevicePrimaryCtxRelease(2);
  }
  static size_t free_mem() {
    size_t f = 0, t = 0;
    EXPECT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    return f;
  }
  CUcontext ctx_ = nullptr;
};

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 151 + seed) & 0xff);
  return v;
}

// The first `n` bytes of an array, row-major (the 1D array copies).
std::vector<unsigned char> read_array(CUarray a, size_t n) {
  std::vector<unsigned char> out(n);
  EXPECT_EQ(cuMemcpyAtoH(out.data(), a, 0, n), CUDA_SUCCESS);
  return out;
}

// What each shape costs: rows padded to 64 bytes, rows to the block height (8-row GOBs, up to
// 16 stacked), slices multiplied, the whole rounded to 2 MiB pages.
TEST_F(PassthroughArrays, EachShapeIsChargedAndDestroyGivesItBack) {
  struct Case {
    const char* what;
    CUDA_ARRAY3D_DESCRIPTOR desc;
    size_t charge;
  };
  const Case cases[] = {
      {"2D 1024x1024 float4", array_desc(1024, 1024, 0, CU_AD_FORMAT_FLOAT, 4), 16 * kMiB},
      {"2D 100x100 float: one page", array_desc(100, 100, 0, CU_AD_FORMAT_FLOAT, 1), kPage},
      {"2D 1000x1000 uchar4 (rows to 1024)", array_desc(1000, 1000, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4), 4 * kMiB},
      {"1D 1M float4", array_desc(1 << 20, 0, 0, CU_AD_FORMAT_FLOAT, 4), 16 * kMiB},
      {"3D 256x256x64 uchar4", array_desc(256, 256, 64, CU_AD_FORMAT_UNSIGNED_INT8, 4), 16 * kMiB},
      {"8 layers of 512x512 float", array_desc(512, 512, 8, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED), 8 * kMiB},
      {"cubemap 256x256 float4", array_desc(256, 256, 6, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_CUBEMAP), 6 * kMiB},
      {"2D 2049x1024 half2 (rows to 8256 bytes)", array_desc(2049, 1024, 0, CU_AD_FORMAT_HALF, 2), 10 * kMiB},
  };
  const size_t f0 = free_mem();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    CUarray a = nullptr;
    ASSERT_EQ(cuArray3DCreate(&a, &c.desc), CUDA_SUCCESS);
    EXPECT_EQ(f0 - free_mem(), c.charge);
    EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
    EXPECT_EQ(free_mem(), f0);
  }
  // The 2D and legacy entry points charge the same.
  CUarray a = nullptr;
  CUDA_ARRAY_DESCRIPTOR d2{1024, 1024, CU_AD_FORMAT_FLOAT, 4};
  ASSERT_EQ(cuArrayCreate_v2(&a, &d2), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 16 * kMiB);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
  // The descriptors of programs built against old headers: 32-bit sizes.
  struct DescV1 { unsigned Width, Height; CUarray_format Format; unsigned NumChannels; };
  struct Desc3DV1 { unsigned Width, Height, Depth; CUarray_format Format; unsigned NumChannels, Flags; };
  using CreateV1 = CUresult (*)(CUarray*, const DescV1*);
  using Create3DV1 = CUresult (*)(CUarray*, const Desc3DV1*);
  auto create_v1 = reinterpret_cast<CreateV1>(dlsym(RTLD_DEFAULT, "cuArrayCreate"));
  auto create3d_v1 = reinterpret_cast<Create3DV1>(dlsym(RTLD_DEFAULT, "cuArray3DCreate"));
  ASSERT_NE(create_v1, nullptr);
  ASSERT_NE(create3d_v1, nullptr);
  DescV1 d1{2048, 2048, CU_AD_FORMAT_UNSIGNED_INT8, 1};
  ASSERT_EQ(create_v1(&a, &d1), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 4 * kMiB);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
  Desc3DV1 d3{256, 256, 64, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
  ASSERT_EQ(create3d_v1(&a, &d3), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 16 * kMiB);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);  // the real driver's answer; nothing given back twice
  EXPECT_EQ(free_mem(), f0);
}

TEST_F(PassthroughArrays, MipmappedArraysAreChargedForEveryLevel) {
  const size_t f0 = free_mem();
  const CUDA_ARRAY3D_DESCRIPTOR d = array_desc(1024, 1024, 0, CU_AD_FORMAT_FLOAT, 4);
  CUmipmappedArray m = nullptr;
  ASSERT_EQ(cuMipmappedArrayCreate(&m, &d, 3), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), 22 * kMiB);  // 16 + 4 + 1 MiB, in whole pages
  CUarray level = nullptr;
  ASSERT_EQ(cuMipmappedArrayGetLevel(&level, m, 2), CUDA_SUCCESS);
  CUDA_ARRAY3D_DESCRIPTOR got{};
  ASSERT_EQ(cuArray3DGetDescriptor(&got, level), CUDA_SUCCESS);
  EXPECT_EQ(got.Width, 256u);
  EXPECT_EQ(got.Height, 256u);
  EXPECT_EQ(cuArrayDestroy(level), CUDA_ERROR_INVALID_HANDLE);  // a level goes with its mipmap
  EXPECT_EQ(f0 - free_mem(), 22 * kMiB);
  EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  // Layers are not levels of detail: 4 layers of 256x256 float, then 128x128, 64x64.
  const CUDA_ARRAY3D_DESCRIPTOR layered = array_desc(256, 256, 4, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED);
  ASSERT_EQ(cuMipmappedArrayCreate(&m, &layered, 3), CUDA_SUCCESS);
  EXPECT_EQ(f0 - free_mem(), kPage);  // 1 MiB + 256 KiB + 64 KiB
  EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
}

TEST_F(PassthroughArrays, RefusedByTheRealDriverCostsNothing) {
  const size_t f0 = free_mem();
  CUarray a = nullptr;
  CUDA_ARRAY3D_DESCRIPTOR bad = array_desc(1024, 1024, 0, CU_AD_FORMAT_FLOAT, 3);  // 3 channels
  EXPECT_EQ(cuArray3DCreate(&a, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = array_desc(0, 16, 0, CU_AD_FORMAT_FLOAT, 1);
  EXPECT_EQ(cuArray3DCreate(&a, &bad), CUDA_ERROR_INVALID_VALUE);
  CUmipmappedArray m = nullptr;
  const CUDA_ARRAY3D_DESCRIPTOR small = array_desc(16, 16, 0, CU_AD_FORMAT_FLOAT, 1);
  EXPECT_EQ(cuMipmappedArrayCreate(&m, &small, 6), CUDA_ERROR_INVALID_VALUE);  // 16x16 has 5 levels
  EXPECT_EQ(cuMipmappedArrayCreate(&m, &small, 0xffffffffu), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMipmappedArrayCreate(&m, &small, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuArray3DCreate(nullptr, &small), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(free_mem(), f0);
}

TEST_F(PassthroughArrays, DeferredMappingArraysHaveNoMemoryOfTheirOwn) {
  const size_t f0 = free_mem();
  CUarray a = nullptr;
  const CUDA_ARRAY3D_DESCRIPTOR d =
      array_desc(4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_DEFERRED_MAPPING);
  ASSERT_EQ(cuArray3DCreate(&a, &d), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
}

// Fill the virtual device but for a few pages with cuMemAlloc, then: arrays up to exactly the
// pages left fit, one page more is refused on every array entry point, and the refusals leave
// the memory and the bytes of what was allocated before as they were.
TEST_F(PassthroughArrays, PastCapacityIsRefusedAndNothingIsLost) {
  const size_t f0 = free_mem();
  const size_t left = 32 * kMiB;
  const size_t whole = f0 / kPage * kPage;
  CUdeviceptr big = 0;
  ASSERT_EQ(cuMemAlloc(&big, whole - left), CUDA_SUCCESS);
  const auto big_bytes = pattern(4096, 1);
  ASSERT_EQ(cuMemcpyHtoD(big + (whole - left) - big_bytes.size(), big_bytes.data(), big_bytes.size()), CUDA_SUCCESS);

  CUarray first = nullptr;
  const CUDA_ARRAY3D_DESCRIPTOR sixteen = array_desc(1024, 1024, 0, CU_AD_FORMAT_FLOAT, 4);  // 16 MiB
  ASSERT_EQ(cuArray3DCreate(&first, &sixteen), CUDA_SUCCESS);
  const auto first_bytes = pattern(1 << 16, 2);
  ASSERT_EQ(cuMemcpyHtoA(first, 0, first_bytes.data(), first_bytes.size()), CUDA_SUCCESS);
  const size_t f1 = free_mem();
  ASSERT_EQ(f0 - f1, whole - left + 16 * kMiB);  // 16 MiB of whole pages left

  CUarray a = nullptr;
  CUmipmappedArray m = nullptr;
  // 1040 rows are padded to 1152 (blocks of 128): 18 MiB.
  const CUDA_ARRAY3D_DESCRIPTOR eighteen = array_desc(1024, 1040, 0, CU_AD_FORMAT_FLOAT, 4);
  EXPECT_EQ(cuArray3DCreate(&a, &eighteen), CUDA_ERROR_OUT_OF_MEMORY);
  CUDA_ARRAY_DESCRIPTOR d2{1024, 1040, CU_AD_FORMAT_FLOAT, 4};
  EXPECT_EQ(cuArrayCreate(&a, &d2), CUDA_ERROR_OUT_OF_MEMORY);
  const CUDA_ARRAY3D_DESCRIPTOR huge = array_desc(4096, 4096, 4096, CU_AD_FORMAT_FLOAT, 4);  // 1 TiB
  EXPECT_EQ(cuArray3DCreate(&a, &huge), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMipmappedArrayCreate(&m, &sixteen, 2), CUDA_ERROR_OUT_OF_MEMORY);  // 20 MiB
  // Dimensions whose product overflows 64 bits: refused (not charged as nothing).
  const CUDA_ARRAY3D_DESCRIPTOR absurd = array_desc(1ull << 50, 1ull << 50, 1ull << 50, CU_AD_FORMAT_FLOAT, 4);
  EXPECT_NE(cuArray3DCreate(&a, &absurd), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f1);

  CUarray last = nullptr;
  ASSERT_EQ(cuArray3DCreate(&last, &sixteen), CUDA_SUCCESS);  // exactly the pages left
  const CUDA_ARRAY3D_DESCRIPTOR tiny = array_desc(16, 16, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1);
  EXPECT_EQ(cuArray3DCreate(&a, &tiny), CUDA_ERROR_OUT_OF_MEMORY);  // even one page is too much
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, kPage), CUDA_ERROR_OUT_OF_MEMORY);

  // Everything allocated before the refusals is intact.
  EXPECT_EQ(read_array(first, first_bytes.size()), first_bytes);
  std::vector<unsigned char> back(big_bytes.size());
  ASSERT_EQ(cuMemcpyDtoH(back.data(), big + (whole - left) - back.size(), back.size()), CUDA_SUCCESS);
  EXPECT_EQ(back, big_bytes);

  // Destroying gives the bytes back: the refused array fits now.
  EXPECT_EQ(cuArrayDestroy(last), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayDestroy(first), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0 - (whole - left));
  ASSERT_EQ(cuArray3DCreate(&a, &eighteen), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(big), CUDA_SUCCESS);
  EXPECT_EQ(free_mem(), f0);
}

}  // namespace
