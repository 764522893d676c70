// The one rule for what a CUDA array (and a mipmapped array) costs a virtual device, shared by
// both backends so that they refuse arrays with CUDA_ERROR_OUT_OF_MEMORY at the same sizes, and
// the descriptor checks and level shapes both need.
//
// What an array costs is the real driver's secret (cuArrayGetMemoryRequirements answers only for
// arrays made without memory, and cuMemGetInfo is virtual under vgpu), so the charge is an
// estimate of the driver's block-linear layout:
//   - a row is the width times the texel size, padded to a 64-byte GOB row;
//   - rows are padded to the height of a block: GOBs are 8 rows high and a block stacks up to 16
//     of them (the smallest power of two covering the height);
//   - a 2D array has one slice; layers, cubemap faces and 3D slices multiply;
//   - a mipmapped array is the sum of its levels (each dimension halved per level, at least 1;
//     layers and faces are not halved);
//   - the whole array is rounded up to the 2 MiB pages that device allocations are charged in.
// Texel sizes come from the format (every CUarray_format of cuda.h: 4:2:0 video formats 1.5
// bytes, BC1/BC4 half a byte, other block-compressed formats one byte per texel); a format not
// known here is charged as the widest texel, 16 bytes. Sparse and deferred-mapping arrays have no
// memory of their own (what is later mapped into them is a cuMemCreate allocation, charged
// there): charged nothing.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace vgpu::arrays {

// The most any array is charged: more than any device has, and far from overflowing the
// accounting's page rounding.
inline constexpr uint64_t kTooLarge = 1ull << 62;

// Bytes per texel, doubled (so that 1.5 and 0.5 are whole); 0 for a format cuda.h does not name.
// `channels` counts only for the formats whose channel count the descriptor gives (the eight
// integer/float formats), where a count other than 1, 2 or 4 is taken as 4.
uint64_t texel_half_bytes(CUarray_format format, unsigned channels);

// How the bytes of one level lie in a dense (unpadded) host copy, the way copies address an
// array: `rows` rows of `row_bytes` per slice. Texels in row order; a block-compressed format in
// rows of 4x4 blocks (as the real driver's copies address it); a planar video format as its luma
// rows followed by its chroma rows, each as wide as a luma row.
struct DenseShape {
  uint64_t row_bytes = 0;
  uint64_t rows = 0;
};
DenseShape dense_shape(CUarray_format format, unsigned channels, uint64_t width, uint64_t height);

// The real driver's checks of a descriptor that need no device: a known format, 1, 2 or 4
// channels for the formats that take a count (1 to 4 for the others, whose format fixes it), a
// width, and a height for a 3D array of several slices unless layered. nullptr when it passes,
// else what is wrong (for the log line).
const char* descriptor_problem(const CUDA_ARRAY3D_DESCRIPTOR& d, bool is3d);

// Level `l` of a mipmapped array: each dimension halved per level, down to 1; layers and
// cubemap faces are not levels of detail and stay.
CUDA_ARRAY3D_DESCRIPTOR level_descriptor(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned l);

// How many levels a mipmap of these dimensions can have: down to 1 x 1 x 1.
unsigned max_levels(const CUDA_ARRAY3D_DESCRIPTOR& d);

// The estimate above for one level of `width` x `height` x `depth` texels (a height or depth of
// 0: the dimension is absent), in bytes, not rounded to pages; at most kTooLarge.
uint64_t level_bytes(uint64_t width, uint64_t height, uint64_t depth, uint64_t texel_halves);

// The charge of an array of `levels` levels (1 for a plain array) in whole 2 MiB pages, at most
// kTooLarge; 0 for a sparse or deferred-mapping array.
uint64_t array_charge(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels);

}  // namespace vgpu::arrays
