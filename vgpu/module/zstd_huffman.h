// Huffman-coded literals (RFC 8878 section 4.2): the tree description and stream decoding.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace vgpu::module::zstd_detail {

struct HuffmanTable {
  int max_bits = 0;
  // Indexed by the next max_bits bits of the stream: symbol in the low byte, code length above.
  std::vector<uint16_t> entries;
  bool empty() const { return entries.empty(); }
};

// Reads a Huffman tree description from the start of `src`; returns the bytes it used.
size_t read_huffman_table(std::span<const uint8_t> src, HuffmanTable& out);

// Decodes exactly out.size() symbols from one backward bitstream, which must be consumed exactly.
void decode_huffman_stream(const HuffmanTable& table, std::span<const uint8_t> stream, std::span<uint8_t> out);

}  // namespace vgpu::module::zstd_detail
