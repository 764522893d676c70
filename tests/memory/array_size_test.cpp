// The array-size rule both backends charge CUDA arrays by (vgpu/front/memory/array_size.h), on
// shapes whose estimate is worked out by hand from the rule: rows padded to 64 bytes, rows to the
// block height (8-row GOBs, up to 16 stacked), slices multiplied, levels summed, the whole
// rounded to 2 MiB pages.
#include "front/memory/array_size.h"

#include <gtest/gtest.h>
#include "array_descriptor.h"

namespace {

using namespace vgpu::arrays;

constexpr uint64_t kKiB = 1u << 10;
constexpr uint64_t kMiB = 1u << 20;


TEST(ArraySize, OneTexelIsOnePage) {
  EXPECT_EQ(level_bytes(1, 1, 0, texel_half_bytes(CU_AD_FORMAT_UNSIGNED_INT8, 1)), 64u * 8);  // one GOB
  EXPECT_EQ(array_charge(array_desc(1, 1, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1), 1), 2 * kMiB);
  EXPECT_EQ(array_charge(array_desc(1, 0, 0, CU_AD_FORMAT_FLOAT, 4), 1), 2 * kMiB);  // 1D
}

TEST(ArraySize, LargeFloat4ArraysAreTheirTexels) {
  EXPECT_EQ(array_charge(array_desc(4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4), 1), 256 * kMiB);
  EXPECT_EQ(array_charge(array_desc(1024, 1024, 0, CU_AD_FORMAT_FLOAT, 4), 1), 16 * kMiB);
  // 1040 rows are padded to 1152 (blocks of 128 rows): 18 MiB.
  EXPECT_EQ(array_charge(array_desc(1024, 1040, 0, CU_AD_FORMAT_FLOAT, 4), 1), 18 * kMiB);
  // 4100 uchar4 texels make rows of 16400 bytes, padded to 16448; 4100 rows to 4224: 68 MiB.
  EXPECT_EQ(level_bytes(4100, 4100, 0, texel_half_bytes(CU_AD_FORMAT_UNSIGNED_INT8, 4)), 16448u * 4224);
  EXPECT_EQ(array_charge(array_desc(4100, 4100, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4), 1), 68 * kMiB);
  // 3D slices and layers multiply: 64 x 64 float rows of 256 bytes, 64 rows, 100 slices.
  EXPECT_EQ(array_charge(array_desc(64, 64, 100, CU_AD_FORMAT_FLOAT, 1), 1), 2 * kMiB);
  EXPECT_EQ(level_bytes(64, 64, 100, 8), 256u * 64 * 100);
}

TEST(ArraySize, MipChainSumsItsLevels) {
  const auto d = array_desc(1024, 1024, 0, CU_AD_FORMAT_FLOAT, 4);
  EXPECT_EQ(max_levels(d), 11u);
  EXPECT_EQ(array_charge(d, 2), 20 * kMiB);  // 16 MiB + 4 MiB
  // 16 MiB + 4 MiB + 1 MiB + 256 + 64 + 16 + 4 + 1 KiB, then three levels of one 512-byte GOB.
  const uint64_t chain = 21 * kMiB + 341 * kKiB + 3 * 512;
  uint64_t sum = 0;
  for (unsigned l = 0; l < 11; ++l) {
    const auto ld = level_descriptor(d, l);
    sum += level_bytes(ld.Width, ld.Height, ld.Depth, 32);
  }
  EXPECT_EQ(sum, chain);
  EXPECT_EQ(array_charge(d, 11), 22 * kMiB);
  // Layers are not levels of detail: 6 layers of 256 x 256 float stay 6 at every level.
  const auto layered = array_desc(256, 256, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED);
  EXPECT_EQ(level_descriptor(layered, 2).Depth, 6u);
  EXPECT_EQ(level_descriptor(layered, 2).Width, 64u);
  EXPECT_EQ(max_levels(layered), 9u);
  const auto volume = array_desc(256, 256, 6, CU_AD_FORMAT_FLOAT, 1);
  EXPECT_EQ(level_descriptor(volume, 2).Depth, 1u);
  EXPECT_EQ(array_charge(layered, 2), 2 * kMiB);  // 1.5 MiB + 384 KiB
}

TEST(ArraySize, BlockCompressedAndVideoFormats) {
  // BC1 and BC4: 8 bytes per 4x4 block, half a byte a texel; the others one byte.
  EXPECT_EQ(texel_half_bytes(CU_AD_FORMAT_BC1_UNORM, 4), 1u);
  EXPECT_EQ(texel_half_bytes(CU_AD_FORMAT_BC4_SNORM, 1), 1u);
  EXPECT_EQ(texel_half_bytes(CU_AD_FORMAT_BC7_UNORM_SRGB, 4), 2u);
  EXPECT_EQ(level_bytes(1024, 1024, 0, texel_half_bytes(CU_AD_FORMAT_BC1_UNORM, 4)), 512 * kKiB);
  EXPECT_EQ(array_charge(array_desc(4096, 4096, 0, CU_AD_FORMAT_BC7_UNORM, 4), 1), 16 * kMiB);
  EXPECT_EQ(array_charge(array_desc(8192, 8192, 0, CU_AD_FORMAT_BC1_UNORM, 4), 1), 32 * kMiB);
  // NV12: 1.5 bytes a texel; 1920 x 1080 is rows of 2880 bytes, 1080 rows padded to 1152.
  EXPECT_EQ(level_bytes(1920, 1080, 0, texel_half_bytes(CU_AD_FORMAT_NV12, 3)), 2880u * 1152);
  EXPECT_EQ(array_charge(array_desc(1920, 1080, 0, CU_AD_FORMAT_NV12, 3), 1), 4 * kMiB);
  // Every format of cuda.h has a texel size.
  for (CUarray_format f : {CU_AD_FORMAT_UNORM_INT_101010_2, CU_AD_FORMAT_P016, CU_AD_FORMAT_Y416,
                           CU_AD_FORMAT_YUV444_16bit_SemiPlanar, CU_AD_FORMAT_SNORM_INT16X4})
    EXPECT_GT(texel_half_bytes(f, 1), 0u) << f;
}

TEST(ArraySize, DenseBackingOfEachKindOfFormat) {
  DenseShape s = dense_shape(CU_AD_FORMAT_FLOAT, 4, 3, 5);
  EXPECT_EQ(s.row_bytes, 48u);
  EXPECT_EQ(s.rows, 5u);
  s = dense_shape(CU_AD_FORMAT_FLOAT, 1, 7, 0);  // 1D: one row
  EXPECT_EQ(s.row_bytes, 28u);
  EXPECT_EQ(s.rows, 1u);
  s = dense_shape(CU_AD_FORMAT_BC1_UNORM, 4, 10, 6);  // rows of 3 blocks of 8 bytes, 2 block rows
  EXPECT_EQ(s.row_bytes, 24u);
  EXPECT_EQ(s.rows, 2u);
  s = dense_shape(CU_AD_FORMAT_BC7_UNORM, 4, 16, 16);
  EXPECT_EQ(s.row_bytes, 64u);
  EXPECT_EQ(s.rows, 4u);
  s = dense_shape(CU_AD_FORMAT_NV12, 3, 1920, 1080);  // luma rows then half as many chroma rows
  EXPECT_EQ(s.row_bytes, 1920u);
  EXPECT_EQ(s.rows, 1620u);
  s = dense_shape(CU_AD_FORMAT_P010, 3, 64, 32);
  EXPECT_EQ(s.row_bytes, 128u);
  EXPECT_EQ(s.rows, 48u);
  s = dense_shape(CU_AD_FORMAT_YUY2, 2, 64, 32);  // packed: 2 bytes a texel
  EXPECT_EQ(s.row_bytes, 128u);
  EXPECT_EQ(s.rows, 32u);
}

TEST(ArraySize, DescriptorChecks) {
  EXPECT_EQ(descriptor_problem(array_desc(16, 16, 0, CU_AD_FORMAT_FLOAT, 4), false), nullptr);
  EXPECT_EQ(descriptor_problem(array_desc(16, 16, 0, CU_AD_FORMAT_BC1_UNORM, 4), false), nullptr);
  EXPECT_NE(descriptor_problem(array_desc(16, 16, 0, CU_AD_FORMAT_FLOAT, 3), false), nullptr);
  EXPECT_NE(descriptor_problem(array_desc(16, 16, 0, static_cast<CUarray_format>(0x7f), 1), false), nullptr);
  EXPECT_NE(descriptor_problem(array_desc(0, 16, 0, CU_AD_FORMAT_FLOAT, 1), false), nullptr);
  EXPECT_NE(descriptor_problem(array_desc(16, 0, 4, CU_AD_FORMAT_FLOAT, 1), true), nullptr);
  EXPECT_EQ(descriptor_problem(array_desc(16, 0, 4, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED), true), nullptr);
}

TEST(ArraySize, UnknownSparseAndHuge) {
  // A format the rule does not know is charged as the widest texel, 16 bytes.
  EXPECT_EQ(array_charge(array_desc(1024, 1024, 0, static_cast<CUarray_format>(0x7f), 1), 1), 16 * kMiB);
  EXPECT_EQ(array_charge(array_desc(4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_SPARSE), 1), 0u);
  EXPECT_EQ(array_charge(array_desc(4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_DEFERRED_MAPPING), 1), 0u);
  EXPECT_EQ(array_charge(array_desc(4096, 4096, 4096, CU_AD_FORMAT_FLOAT, 4), 1), 1ull << 40);
  EXPECT_EQ(array_charge(array_desc(1ull << 50, 1ull << 50, 1ull << 50, CU_AD_FORMAT_FLOAT, 4), 1), kTooLarge);
  EXPECT_EQ(array_charge(array_desc(1ull << 39, 1ull << 39, 1ull << 39, CU_AD_FORMAT_FLOAT, 4), 1), kTooLarge);
}

}  // namespace
