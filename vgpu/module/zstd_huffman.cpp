#include "module/zstd_huffman.h"

#include "module/zstd_bits.h"
#include "module/zstd_fse.h"

#include <bit>

namespace vgpu::module::zstd_detail {
namespace {

constexpr int kMaxCodeBits = 11;
constexpr size_t kMaxWeights = 255;  // the last symbol's weight is implied: 256 symbols at most

// Weights compressed with FSE: one table, two interleaved states over one backward stream.
std::vector<uint8_t> read_fse_weights(std::span<const uint8_t> src) {
  FseTable table;
  const size_t used = read_fse_table(src, 6, 12, table);
  if (used >= src.size()) fail("zstd: Huffman weights have no bitstream");
  BackwardBits bits(src.subspan(used));
  FseState s1, s2;
  s1.init(table, bits);
  s2.init(table, bits);
  std::vector<uint8_t> weights;
  auto emit = [&](uint8_t w) {
    if (weights.size() >= kMaxWeights) fail("zstd: too many Huffman weights");
    weights.push_back(w);
  };
  // Decoding stops once a state update runs past the start of the stream; the other state's
  // current symbol is then the last weight.
  for (;;) {
    emit(s1.symbol());
    s1.update(bits);
    if (bits.overflowed()) {
      emit(s2.symbol());
      break;
    }
    emit(s2.symbol());
    s2.update(bits);
    if (bits.overflowed()) {
      emit(s1.symbol());
      break;
    }
  }
  return weights;
}

}  // namespace

size_t read_huffman_table(std::span<const uint8_t> src, HuffmanTable& out) {
  if (src.empty()) fail("zstd: missing Huffman tree description");
  const uint8_t header = src[0];
  std::vector<uint8_t> weights;
  size_t used = 0;
  if (header < 128) {
    if (header == 0 || size_t{header} + 1 > src.size()) fail("zstd: Huffman weight block of {} bytes truncated", header);
    weights = read_fse_weights(src.subspan(1, header));
    used = 1 + header;
  } else {
    const size_t count = header - 127;
    const size_t bytes = (count + 1) / 2;
    if (1 + bytes > src.size()) fail("zstd: direct Huffman weights truncated");
    weights.resize(count);
    for (size_t i = 0; i < count; ++i) {
      const uint8_t b = src[1 + i / 2];
      weights[i] = (i % 2 == 0) ? (b >> 4) : (b & 15);
    }
    used = 1 + bytes;
  }

  // The weights given sum (as 2^(w-1)) to less than a power of two; the implied last weight
  // fills the gap, and that power of two fixes the longest code length.
  uint32_t total = 0;
  for (uint8_t w : weights) {
    if (w > kMaxCodeBits) fail("zstd: Huffman weight {} too large", w);
    if (w > 0) total += 1u << (w - 1);
  }
  if (total == 0) fail("zstd: Huffman weights are all zero");
  const int max_bits = (31 - std::countl_zero(total)) + 1;
  if (max_bits > kMaxCodeBits) fail("zstd: Huffman code length {} too large", max_bits);
  const uint32_t left = (1u << max_bits) - total;
  if (!std::has_single_bit(left)) fail("zstd: Huffman weights do not complete a tree");
  weights.push_back(static_cast<uint8_t>((31 - std::countl_zero(left)) + 1));
  if (weights.size() > 256) fail("zstd: Huffman table with {} symbols", weights.size());

  // Codes are assigned from the lightest weight up, symbols of one weight in symbol order; a
  // symbol of weight w owns 2^(w-1) consecutive slots of the max_bits-indexed table.
  out.max_bits = max_bits;
  out.entries.assign(size_t{1} << max_bits, 0);
  size_t slot = 0;
  for (int w = 1; w <= max_bits; ++w) {
    for (size_t s = 0; s < weights.size(); ++s) {
      if (weights[s] != w) continue;
      const size_t span = size_t{1} << (w - 1);
      if (slot + span > out.entries.size()) fail("zstd: Huffman table overfull");
      const uint16_t entry = static_cast<uint16_t>(s | ((max_bits + 1 - w) << 8));
      for (size_t i = 0; i < span; ++i) out.entries[slot++] = entry;
    }
  }
  if (slot != out.entries.size()) fail("zstd: Huffman table incomplete");
  return used;
}

void decode_huffman_stream(const HuffmanTable& table, std::span<const uint8_t> stream, std::span<uint8_t> out) {
  if (table.empty()) fail("zstd: Huffman stream without a table");
  BackwardBits bits(stream);
  for (uint8_t& o : out) {
    const uint16_t e = table.entries[bits.peek(table.max_bits)];
    o = static_cast<uint8_t>(e & 0xff);
    bits.skip(e >> 8);
    if (bits.overflowed()) fail("zstd: Huffman stream ran out of bits");
  }
  if (!bits.finished()) fail("zstd: Huffman stream has bits left over");
}

}  // namespace vgpu::module::zstd_detail
