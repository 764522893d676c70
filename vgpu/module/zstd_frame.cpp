// Zstandard frames (RFC 8878 section 3.1): frame header, the block loop, content checksum.
#include "module/byte_view.h"
#include "module/xxhash64.h"
#include "module/zstd.h"
#include "module/zstd_block.h"

namespace vgpu::module {
namespace {

using zstd_detail::FrameState;
using zstd_detail::kMaxBlockSize;

constexpr uint32_t kFrameMagic = 0xFD2FB528;
constexpr uint32_t kSkippableMask = 0xFFFFFFF0, kSkippableMagic = 0x184D2A50;

void append(ByteBuffer& out, uint64_t limit, uint64_t n) {
  if (n > limit - out.size()) fail("zstd: output exceeds the allowed {} bytes", limit);
}

// Decodes the frame starting at `pos` (after its magic); returns the offset just past it.
uint64_t decode_frame(const ByteView& in, uint64_t pos, ByteBuffer& out, uint64_t limit) {
  const uint8_t descriptor = in.u8(pos++, "zstd frame header");
  const int size_flag = descriptor >> 6;
  const bool single_segment = (descriptor >> 5) & 1;
  const bool has_checksum = (descriptor >> 2) & 1;
  const int dict_flag = descriptor & 3;
  if (descriptor & 0x08) fail("zstd: reserved frame header bit set");
  if (!single_segment) {
    const uint8_t window = in.u8(pos++, "zstd window descriptor");
    if ((window >> 3) > 31) fail("zstd: window too large");
  }
  static constexpr int kDictBytes[4] = {0, 1, 2, 4};
  uint64_t dict_id = 0;
  for (int i = 0; i < kDictBytes[dict_flag]; ++i) dict_id |= uint64_t{in.u8(pos++, "zstd dictionary id")} << (8 * i);
  if (dict_id != 0) fail_kind(ErrorKind::unsupported, "zstd: frame needs dictionary {}", dict_id);
  static constexpr int kSizeBytes[4] = {0, 2, 4, 8};
  const int size_bytes = (size_flag == 0 && single_segment) ? 1 : kSizeBytes[size_flag];
  bool size_known = size_bytes > 0;
  uint64_t content_size = 0;
  for (int i = 0; i < size_bytes; ++i) content_size |= uint64_t{in.u8(pos++, "zstd content size")} << (8 * i);
  if (size_bytes == 2) content_size += 256;
  if (size_known && content_size > limit - out.size())
    fail("zstd: frame declares {} bytes, more than the {} allowed", content_size, limit - out.size());

  const uint64_t frame_start = out.size();
  FrameState state;
  for (;;) {
    const uint32_t header = in.u8(pos, "zstd block header") | (uint32_t{in.u8(pos + 1, "zstd block header")} << 8) |
                            (uint32_t{in.u8(pos + 2, "zstd block header")} << 16);
    pos += 3;
    const bool last = header & 1;
    const int type = (header >> 1) & 3;
    const uint64_t size = header >> 3;
    if (size > kMaxBlockSize) fail("zstd: block of {} bytes exceeds the maximum", size);
    if (type == 0) {  // raw
      const ByteView block = in.sub(pos, size, "zstd raw block");
      append(out, limit, size);
      out.append(block.data(), static_cast<size_t>(size));
      pos += size;
    } else if (type == 1) {  // RLE: one byte, repeated `size` times
      const uint8_t b = in.u8(pos, "zstd RLE block");
      append(out, limit, size);
      out.append(static_cast<size_t>(size), b);
      pos += 1;
    } else if (type == 2) {
      const ByteView block = in.sub(pos, size, "zstd compressed block");
      zstd_detail::decode_compressed_block(block.span(), state, out, limit);
      pos += size;
    } else {
      fail("zstd: reserved block type");
    }
    if (last) break;
  }
  const uint64_t produced = out.size() - frame_start;
  if (size_known && produced != content_size)
    fail("zstd: frame produced {} bytes, header declares {}", produced, content_size);
  if (has_checksum) {
    const uint32_t expected = in.u32(pos, "zstd content checksum");
    pos += 4;
    const auto frame = std::span<const uint8_t>(out.data(), out.size()).subspan(static_cast<size_t>(frame_start));
    if (static_cast<uint32_t>(xxhash64(frame)) != expected) fail("zstd: content checksum mismatch");
  }
  return pos;
}

}  // namespace

ByteBuffer zstd_decompress(std::span<const uint8_t> src, uint64_t max_output) {
  const ByteView in(src);
  if (in.size() == 0) fail("zstd: no frame");
  ByteBuffer out;
  out.reserve(static_cast<size_t>(std::min<uint64_t>(max_output, uint64_t{src.size()} * 4 + 64)));
  uint64_t pos = 0;
  while (pos < in.size()) {
    const uint32_t magic = in.u32(pos, "zstd frame magic");
    if ((magic & kSkippableMask) == kSkippableMagic) {
      const uint32_t size = in.u32(pos + 4, "zstd skippable frame");
      pos = checked_add(pos + 8, size, "zstd skippable frame");
      if (pos > in.size()) fail("zstd: skippable frame runs past the input");
      continue;
    }
    if (magic != kFrameMagic) fail("zstd: bad frame magic {:#x} at offset {}", magic, pos);
    pos = decode_frame(in, pos + 4, out, max_output);
  }
  return out;
}

}  // namespace vgpu::module
