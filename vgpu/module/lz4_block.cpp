#include "module/lz4_block.h"

#include "module/image_error.h"

#include <cstring>

namespace vgpu::module {
namespace {

// A length nibble of 15 continues in following bytes, each added, until one is not 255.
uint64_t read_length(std::span<const uint8_t> src, size_t& pos, uint64_t base) {
  uint64_t length = base;
  if (base != 15) return length;
  for (;;) {
    if (pos >= src.size()) fail("lz4: truncated length");
    const uint8_t b = src[pos++];
    length += b;
    if (b != 255) return length;
  }
}

}  // namespace

ByteBuffer lz4_decompress_block(std::span<const uint8_t> src, uint64_t expected_size) {
  ByteBuffer out;
  // Reserve only what the input could plausibly produce (LZ4 expands at most ~255x), so a lying
  // size field cannot make us allocate memory the data never fills.
  out.reserve(static_cast<size_t>(std::min<uint64_t>(expected_size, uint64_t{src.size()} * 255 + 16)));
  size_t pos = 0;
  while (pos < src.size()) {
    const uint8_t token = src[pos++];
    const uint64_t literals = read_length(src, pos, token >> 4);
    if (literals > src.size() - pos) fail("lz4: literal run of {} bytes past the end of input", literals);
    if (literals > expected_size - out.size()) fail("lz4: output exceeds the declared {} bytes", expected_size);
    out.append(src.data() + pos, static_cast<size_t>(literals));
    pos += literals;
    if (pos == src.size()) break;  // the last sequence carries literals only
    if (src.size() - pos < 2) fail("lz4: truncated match offset");
    const size_t offset = src[pos] | (size_t{src[pos + 1]} << 8);
    pos += 2;
    if (offset == 0 || offset > out.size()) fail("lz4: match offset {} points before the start", offset);
    const uint64_t match = read_length(src, pos, token & 15) + 4;
    if (match > expected_size - out.size()) fail("lz4: output exceeds the declared {} bytes", expected_size);
    // Byte by byte: a match may overlap the bytes it produces (offset < length repeats a pattern).
    size_t from = out.size() - offset;
    for (uint64_t i = 0; i < match; ++i) out.push_back(out[from++]);
  }
  if (out.size() != expected_size)
    fail("lz4: block expands to {} bytes, header says {}", out.size(), expected_size);
  return out;
}

}  // namespace vgpu::module
