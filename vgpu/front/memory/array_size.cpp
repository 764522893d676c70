// The array-size rule of array_size.h.
#include "front/memory/array_size.h"

#include <algorithm>

namespace vgpu::arrays {
namespace {

constexpr uint64_t kPage = 2ull << 20;    // the granularity device memory is charged in
constexpr uint64_t kGobRow = 64;          // bytes in a row of a GOB
constexpr uint64_t kGobRows = 8;          // rows in a GOB
constexpr uint64_t kBlockGobs = 16;       // GOBs stacked in the tallest block
constexpr uint64_t kWidestTexel = 2 * 16; // in half bytes: 4 channels of 32 bits
constexpr uint64_t kHuge = 1ull << 40;    // below it, one level's product fits in 128 bits

using u128 = unsigned __int128;
u128 round_up(u128 x, u128 to) { return (x + to - 1) / to * to; }

bool counts_channels(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return true;
    default: return false;
  }
}

// Bytes in a 4x4 block of a block-compressed format; 0 for the others.
uint64_t bc_block_bytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_BC1_UNORM: case CU_AD_FORMAT_BC1_UNORM_SRGB:
    case CU_AD_FORMAT_BC4_UNORM: case CU_AD_FORMAT_BC4_SNORM: return 8;
    case CU_AD_FORMAT_BC2_UNORM: case CU_AD_FORMAT_BC2_UNORM_SRGB: case CU_AD_FORMAT_BC3_UNORM:
    case CU_AD_FORMAT_BC3_UNORM_SRGB: case CU_AD_FORMAT_BC5_UNORM: case CU_AD_FORMAT_BC5_SNORM:
    case CU_AD_FORMAT_BC6H_UF16: case CU_AD_FORMAT_BC6H_SF16: case CU_AD_FORMAT_BC7_UNORM:
    case CU_AD_FORMAT_BC7_UNORM_SRGB: return 16;
    default: return 0;
  }
}

// Bytes of one luma sample of a planar video format (its planes follow each other); 0 for the
// others.
uint64_t planar_sample_bytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_NV12: case CU_AD_FORMAT_NV16: case CU_AD_FORMAT_Y444_PLANAR8:
    case CU_AD_FORMAT_YUV444_8bit_SemiPlanar: return 1;
    case CU_AD_FORMAT_P010: case CU_AD_FORMAT_P016: case CU_AD_FORMAT_P210: case CU_AD_FORMAT_P216:
    case CU_AD_FORMAT_Y444_PLANAR10: case CU_AD_FORMAT_YUV444_16bit_SemiPlanar: return 2;
    default: return 0;
  }
}

// Rows after padding to the block height the driver would pick for `height` rows.
u128 padded_rows(uint64_t height) {
  const uint64_t gobs = (height + kGobRows - 1) / kGobRows;
  uint64_t block = 1;
  while (block < gobs && block < kBlockGobs) block *= 2;
  return round_up(height, block * kGobRows);
}

// One level of the estimate; every dimension below kHuge.
u128 level_bytes_wide(uint64_t width, uint64_t height, uint64_t depth, uint64_t texel_halves) {
  const u128 row = round_up((u128(width) * texel_halves + 1) / 2, kGobRow);
  const u128 rows = height == 0 ? 1 : padded_rows(height);
  return row * rows * (depth == 0 ? 1 : depth);
}

}  // namespace

uint64_t texel_half_bytes(CUarray_format f, unsigned channels) {
  const uint64_t ch = channels == 1 || channels == 2 || channels == 4 ? channels : 4;
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 2 * ch;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 4 * ch;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 8 * ch;
    case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X1: return 2;
    case CU_AD_FORMAT_UNORM_INT8X2: case CU_AD_FORMAT_SNORM_INT8X2: return 4;
    case CU_AD_FORMAT_UNORM_INT8X4: case CU_AD_FORMAT_SNORM_INT8X4: return 8;
    case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X1: return 4;
    case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X2: return 8;
    case CU_AD_FORMAT_UNORM_INT16X4: case CU_AD_FORMAT_SNORM_INT16X4: return 16;
    case CU_AD_FORMAT_UNORM_INT_101010_2: return 8;
    case CU_AD_FORMAT_NV12: return 3;                          // 8-bit luma + half-size chroma
    case CU_AD_FORMAT_P010: case CU_AD_FORMAT_P016: return 6;  // the same in 16-bit words
    case CU_AD_FORMAT_NV16: case CU_AD_FORMAT_YUY2: return 4;
    case CU_AD_FORMAT_P210: case CU_AD_FORMAT_P216: case CU_AD_FORMAT_Y210: case CU_AD_FORMAT_Y216:
    case CU_AD_FORMAT_AYUV: case CU_AD_FORMAT_Y410: return 8;
    case CU_AD_FORMAT_Y416: return 16;
    case CU_AD_FORMAT_Y444_PLANAR8: case CU_AD_FORMAT_YUV444_8bit_SemiPlanar: return 6;
    case CU_AD_FORMAT_Y444_PLANAR10: case CU_AD_FORMAT_YUV444_16bit_SemiPlanar: return 12;
    default: return bc_block_bytes(f) / 8;  // a 4x4 block of 16 texels: 8 bytes = half a byte each
  }
}

DenseShape dense_shape(CUarray_format f, unsigned channels, uint64_t width, uint64_t height) {
  const uint64_t h = std::max<uint64_t>(height, 1);
  if (const uint64_t block = bc_block_bytes(f)) return {(width + 3) / 4 * block, (h + 3) / 4};
  const uint64_t halves = texel_half_bytes(f, channels);
  if (const uint64_t sample = planar_sample_bytes(f))
    return {width * sample, static_cast<uint64_t>((u128(h) * halves + 2 * sample - 1) / (2 * sample))};
  return {static_cast<uint64_t>((u128(width) * halves + 1) / 2), h};
}

const char* descriptor_problem(const CUDA_ARRAY3D_DESCRIPTOR& d, bool is3d) {
  if (texel_half_bytes(d.Format, d.NumChannels) == 0) return "unknown array format";
  const unsigned ch = d.NumChannels;
  if (counts_channels(d.Format) ? (ch != 1 && ch != 2 && ch != 4) : (ch < 1 || ch > 4))
    return "invalid number of channels";
  if (d.Width == 0) return "zero width";
  if (is3d && d.Depth > 0 && d.Height == 0 && !(d.Flags & CUDA_ARRAY3D_LAYERED))
    return "a 3D array needs a height";
  return nullptr;
}

CUDA_ARRAY3D_DESCRIPTOR level_descriptor(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned l) {
  auto shrink = [l](size_t n) -> size_t { return n == 0 ? 0 : std::max<size_t>(l >= 64 ? 0 : n >> l, 1); };
  CUDA_ARRAY3D_DESCRIPTOR out = d;
  out.Width = shrink(d.Width);
  out.Height = shrink(d.Height);
  if (!(d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP))) out.Depth = shrink(d.Depth);
  return out;
}

unsigned max_levels(const CUDA_ARRAY3D_DESCRIPTOR& d) {
  size_t largest = std::max<size_t>(d.Width, d.Height);
  if (!(d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP))) largest = std::max<size_t>(largest, d.Depth);
  unsigned n = 1;
  while (largest >>= 1) ++n;
  return n;
}

uint64_t level_bytes(uint64_t width, uint64_t height, uint64_t depth, uint64_t texel_halves) {
  if (width >= kHuge || height >= kHuge || depth >= kHuge) return kTooLarge;
  const u128 b = level_bytes_wide(width, height, depth, texel_halves);
  return b > kTooLarge ? kTooLarge : static_cast<uint64_t>(b);
}

uint64_t array_charge(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels) {
  if (d.Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) return 0;
  if (d.Width >= kHuge || d.Height >= kHuge || d.Depth >= kHuge) return kTooLarge;
  uint64_t texel = texel_half_bytes(d.Format, d.NumChannels);
  if (texel == 0) texel = kWidestTexel;
  u128 total = 0;
  // Past 41 levels every dimension below kHuge is 1: more levels are invalid (the real driver
  // refuses them), and are not worth counting.
  levels = std::clamp(levels, 1u, 41u);
  for (unsigned l = 0; l < levels && total < kTooLarge; ++l) {
    const CUDA_ARRAY3D_DESCRIPTOR ld = level_descriptor(d, l);
    total += level_bytes_wide(ld.Width, ld.Height, ld.Depth, texel);
  }
  total = round_up(total, kPage);
  return total > kTooLarge ? kTooLarge : static_cast<uint64_t>(total);
}

}  // namespace vgpu::arrays
