// One compressed Zstandard block (RFC 8878 section 3.1.1.3): literals section, sequences
// section, and their execution into the frame's output.
#pragma once

#include "module/zstd_fse.h"
#include "module/zstd_huffman.h"

#include <array>
#include "module/byte_buffer.h"

#include <cstdint>
#include <span>
#include <vector>

namespace vgpu::module::zstd_detail {

constexpr uint64_t kMaxBlockSize = 128 * 1024;

// What carries from one block to the next inside a frame.
struct FrameState {
  HuffmanTable huffman;                     // for treeless literals
  FseTable literal_lengths, offsets, match_lengths;
  bool have_ll = false, have_of = false, have_ml = false;  // for the "repeat" table mode
  std::array<uint64_t, 3> repeat_offsets{1, 4, 8};
  std::vector<uint8_t> literals;            // scratch, reused
};

// Decodes the compressed block `src`, appending at most `limit` bytes in total to `out`.
void decode_compressed_block(std::span<const uint8_t> src, FrameState& state, ByteBuffer& out,
                             uint64_t limit);

}  // namespace vgpu::module::zstd_detail
