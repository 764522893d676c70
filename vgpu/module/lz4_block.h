// LZ4 block format (no frame header), which fat binary entries flagged 0x2000 carry (nvcc's
// --compress-mode=speed, and older toolkits' default).
#pragma once

#include "module/byte_buffer.h"

#include <cstdint>
#include <span>
#include <vector>

namespace vgpu::module {

// Decodes one LZ4 block that must expand to exactly `expected_size` bytes. Throws ImageError on
// any malformed input (offset before the start, output past expected_size, truncated input).
ByteBuffer lz4_decompress_block(std::span<const uint8_t> src, uint64_t expected_size);

}  // namespace vgpu::module
