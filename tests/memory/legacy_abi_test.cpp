// The legacy struct ABIs of cuMemcpy2D / cuMemcpy3D (CUDA_MEMCPY2D_v1 / CUDA_MEMCPY3D_v1, with
// 32-bit sizes), as programs built against old headers call them. Compiled with
// __CUDA_API_VERSION_INTERNAL so cuda.h declares every ABI version under its exported name:
// every call below names its exact symbol.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <gtest/gtest.h>

#include <vector>

namespace {

TEST(LegacyAbi, Memcpy2DAnd3DWithV1StructsThroughAnArray) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext ctx;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Width = 16;
  desc.Height = 6;
  desc.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  desc.NumChannels = 1;
  CUarray arr;
  ASSERT_EQ(cuArrayCreate_v2(&arr, &desc), CUDA_SUCCESS);  // rows of 64 bytes

  // Host (pitch 80) -> array, 64 bytes x 6 rows, through the v1 2D struct.
  const unsigned hpitch = 80, rows = 6, width = 64;
  std::vector<unsigned char> in(hpitch * rows), out(hpitch * rows, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 13 + 1);
  CUDA_MEMCPY2D_v1 c2{};
  c2.srcMemoryType = CU_MEMORYTYPE_HOST;
  c2.srcHost = in.data();
  c2.srcPitch = hpitch;
  c2.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c2.dstArray = arr;
  c2.WidthInBytes = width;
  c2.Height = rows;
  ASSERT_EQ(cuMemcpy2D(&c2), CUDA_SUCCESS);

  // Array -> host through the v1 3D struct (one slice), with a destination offset.
  CUDA_MEMCPY3D_v1 c3{};
  c3.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c3.srcArray = arr;
  c3.dstMemoryType = CU_MEMORYTYPE_HOST;
  c3.dstHost = out.data();
  c3.dstPitch = hpitch;
  c3.dstHeight = rows;
  c3.dstXInBytes = 8;
  c3.WidthInBytes = width;
  c3.Height = rows;
  c3.Depth = 1;
  ASSERT_EQ(cuMemcpy3D(&c3), CUDA_SUCCESS);
  for (unsigned y = 0; y < rows; ++y)
    for (unsigned x = 0; x < hpitch; ++x) {
      const unsigned char want = x >= 8 && x < 8 + width ? in[y * hpitch + x - 8] : 0;
      ASSERT_EQ(out[y * hpitch + x], want) << x << "," << y;
    }

  // The async v1 form on the legacy stream, and a width past the source pitch.
  std::fill(out.begin(), out.end(), 0);
  c3.dstXInBytes = 0;
  ASSERT_EQ(cuMemcpy3DAsync(&c3, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  for (unsigned y = 0; y < rows; ++y)
    for (unsigned x = 0; x < width; ++x) ASSERT_EQ(out[y * hpitch + x], in[y * hpitch + x]);
  c2.srcPitch = 32;
  EXPECT_EQ(cuMemcpy2D(&c2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpy2D(nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuArrayDestroy(arr), CUDA_SUCCESS);
  cuCtxSetCurrent(nullptr);
  cuDevicePrimaryCtxRelease(0);
}

}  // namespace
