#include "module/zstd_block.h"

#include "module/zstd_bits.h"

#include <algorithm>
#include <cstring>

namespace vgpu::module::zstd_detail {
namespace {

// RFC 8878 section 3.1.1.3.2.2: predefined distributions and the code -> value tables.
constexpr int16_t kDefaultLiteralLengths[36] = {4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2,
                                                2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1};
constexpr int16_t kDefaultMatchLengths[53] = {1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                              1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                              1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1};
constexpr int16_t kDefaultOffsets[29] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1,
                                         1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1};

constexpr uint32_t kLiteralLengthBase[36] = {0,  1,  2,  3,  4,  5,  6,   7,   8,   9,    10,   11,
                                             12, 13, 14, 15, 16, 18, 20,  22,  24,  28,   32,   40,
                                             48, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
constexpr uint8_t kLiteralLengthBits[36] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  1,  1,
                                            1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
constexpr uint32_t kMatchLengthBase[53] = {3,  4,  5,  6,  7,  8,  9,  10, 11, 12,  13,  14,  15,   16,
                                           17, 18, 19, 20, 21, 22, 23, 24, 25, 26,  27,  28,  29,   30,
                                           31, 32, 33, 34, 35, 37, 39, 41, 43, 47,  51,  59,  67,   83,
                                           99, 131, 259, 515, 1027, 2051, 4099, 8195, 16387, 32771, 65539};
constexpr uint8_t kMatchLengthBits[53] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1,
                                          2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

constexpr int kMaxLiteralLengthCode = 35, kMaxMatchLengthCode = 52, kMaxOffsetCode = 31;

uint64_t le_bits(std::span<const uint8_t> s, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= uint64_t{s[i]} << (8 * i);
  return v;
}

// Literals section: fills state.literals, returns the bytes the section used.
size_t decode_literals(std::span<const uint8_t> src, FrameState& state) {
  if (src.empty()) fail("zstd: block lacks a literals section");
  const uint8_t b0 = src[0];
  const int type = b0 & 3;
  const int size_format = (b0 >> 2) & 3;
  std::vector<uint8_t>& lit = state.literals;

  if (type == 0 || type == 1) {  // raw or RLE
    size_t header = 1;
    uint64_t size = b0 >> 3;
    if (size_format == 1) {
      header = 2;
    } else if (size_format == 3) {
      header = 3;
    }
    if (src.size() < header) fail("zstd: truncated literals header");
    if (header > 1) size = le_bits(src, header) >> 4;
    if (size > kMaxBlockSize) fail("zstd: {} literals exceed a block", size);
    if (type == 0) {
      if (src.size() - header < size) fail("zstd: raw literals truncated");
      lit.assign(src.begin() + static_cast<ptrdiff_t>(header), src.begin() + static_cast<ptrdiff_t>(header + size));
      return header + static_cast<size_t>(size);
    }
    if (src.size() < header + 1) fail("zstd: RLE literals truncated");
    lit.assign(static_cast<size_t>(size), src[header]);
    return header + 1;
  }

  // Huffman-compressed (type 2) or reusing the previous tree (type 3).
  const size_t header = size_format <= 1 ? 3 : (size_format == 2 ? 4 : 5);
  const int field_bits = size_format <= 1 ? 10 : (size_format == 2 ? 14 : 18);
  const int streams = size_format == 0 ? 1 : 4;
  if (src.size() < header) fail("zstd: truncated literals header");
  const uint64_t v = le_bits(src, header);
  const uint64_t mask = (uint64_t{1} << field_bits) - 1;
  const uint64_t regenerated = (v >> 4) & mask;
  const uint64_t compressed = (v >> (4 + field_bits)) & mask;
  if (regenerated > kMaxBlockSize) fail("zstd: {} literals exceed a block", regenerated);
  if (src.size() - header < compressed) fail("zstd: compressed literals truncated");
  std::span<const uint8_t> body = src.subspan(header, static_cast<size_t>(compressed));
  if (type == 2) {
    body = body.subspan(read_huffman_table(body, state.huffman));
  } else if (state.huffman.empty()) {
    fail("zstd: treeless literals without an earlier Huffman table");
  }
  lit.resize(static_cast<size_t>(regenerated));
  if (streams == 1) {
    decode_huffman_stream(state.huffman, body, lit);
  } else {
    if (body.size() < 6) fail("zstd: literals jump table truncated");
    const size_t s1 = body[0] | (size_t{body[1]} << 8);
    const size_t s2 = body[2] | (size_t{body[3]} << 8);
    const size_t s3 = body[4] | (size_t{body[5]} << 8);
    if (6 + s1 + s2 + s3 >= body.size()) fail("zstd: literals streams overrun their section");
    const size_t s4 = body.size() - 6 - s1 - s2 - s3;
    const size_t segment = static_cast<size_t>((regenerated + 3) / 4);
    if (3 * segment > regenerated) fail("zstd: {} literals cannot fill four streams", regenerated);
    const size_t sizes[4] = {s1, s2, s3, s4};
    size_t in = 6, outpos = 0;
    for (int i = 0; i < 4; ++i) {
      const size_t n = i < 3 ? segment : lit.size() - 3 * segment;
      decode_huffman_stream(state.huffman, body.subspan(in, sizes[i]), std::span<uint8_t>(lit).subspan(outpos, n));
      in += sizes[i];
      outpos += n;
    }
  }
  return header + static_cast<size_t>(compressed);
}

// Picks the table for one of the three sequence symbol kinds according to its mode.
size_t choose_table(int mode, std::span<const uint8_t> src, std::span<const int16_t> predefined, int predefined_log,
                    int max_log, int max_symbol, FseTable& table, bool& have, const char* what) {
  size_t used = 0;
  switch (mode) {
    case 0:
      build_fse_table(predefined, predefined_log, table);
      break;
    case 1:
      if (src.empty()) fail("zstd: {} RLE symbol missing", what);
      if (src[0] > max_symbol) fail("zstd: {} RLE symbol {} out of range", what, src[0]);
      build_rle_table(src[0], table);
      used = 1;
      break;
    case 2:
      used = read_fse_table(src, max_log, max_symbol, table);
      break;
    default:
      if (!have) fail("zstd: {} table repeated before one was defined", what);
      break;
  }
  have = true;
  return used;
}

void append_checked(ByteBuffer& out, uint64_t limit, uint64_t n) {
  if (n > limit - out.size()) fail("zstd: output exceeds the allowed {} bytes", limit);
}

}  // namespace

void decode_compressed_block(std::span<const uint8_t> src, FrameState& state, ByteBuffer& out,
                             uint64_t limit) {
  src = src.subspan(decode_literals(src, state));
  const std::vector<uint8_t>& lit = state.literals;

  if (src.empty()) fail("zstd: block lacks a sequences section");
  size_t pos = 0;
  uint32_t count = src[0];
  if (count < 128) {
    pos = 1;
  } else if (count < 255) {
    if (src.size() < 2) fail("zstd: sequence count truncated");
    count = ((count - 128) << 8) + src[1];
    pos = 2;
  } else {
    if (src.size() < 3) fail("zstd: sequence count truncated");
    count = src[1] + (uint32_t{src[2]} << 8) + 0x7F00;
    pos = 3;
  }
  if (count == 0) {
    if (pos != src.size()) fail("zstd: bytes after an empty sequences section");
    append_checked(out, limit, lit.size());
    out.append(lit.data(), lit.size());
    return;
  }
  if (pos >= src.size()) fail("zstd: sequence modes missing");
  const uint8_t modes = src[pos++];
  if (modes & 3) fail("zstd: reserved bits set in the sequence modes");
  pos += choose_table(modes >> 6, src.subspan(pos), kDefaultLiteralLengths, 6, 9, kMaxLiteralLengthCode,
                      state.literal_lengths, state.have_ll, "literal-length");
  pos += choose_table((modes >> 4) & 3, src.subspan(pos), kDefaultOffsets, 5, 8, kMaxOffsetCode, state.offsets,
                      state.have_of, "offset");
  pos += choose_table((modes >> 2) & 3, src.subspan(pos), kDefaultMatchLengths, 6, 9, kMaxMatchLengthCode,
                      state.match_lengths, state.have_ml, "match-length");
  if (pos >= src.size()) fail("zstd: sequences bitstream missing");

  BackwardBits bits(src.subspan(pos));
  FseState ll_state, of_state, ml_state;
  ll_state.init(state.literal_lengths, bits);
  of_state.init(state.offsets, bits);
  ml_state.init(state.match_lengths, bits);
  std::array<uint64_t, 3>& rep = state.repeat_offsets;

  size_t lit_pos = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t of_code = of_state.symbol();
    const uint8_t ll_code = ll_state.symbol();
    const uint8_t ml_code = ml_state.symbol();
    if (of_code > kMaxOffsetCode || ll_code > kMaxLiteralLengthCode || ml_code > kMaxMatchLengthCode)
      fail("zstd: sequence code out of range");
    const uint64_t offset_value = (uint64_t{1} << of_code) + bits.read(of_code);
    const uint64_t match = kMatchLengthBase[ml_code] + bits.read(kMatchLengthBits[ml_code]);
    const uint64_t literals = kLiteralLengthBase[ll_code] + bits.read(kLiteralLengthBits[ll_code]);
    if (i + 1 < count) {
      ll_state.update(bits);
      ml_state.update(bits);
      of_state.update(bits);
    }
    if (bits.overflowed()) fail("zstd: sequences bitstream ran out of bits");

    uint64_t offset = 0;
    if (offset_value > 3) {
      offset = offset_value - 3;
      rep = {offset, rep[0], rep[1]};
    } else {
      // Repeat offsets; a sequence without literals shifts the index by one.
      const uint64_t index = offset_value - 1 + (literals == 0 ? 1 : 0);
      if (index == 0) {
        offset = rep[0];
      } else {
        offset = index == 3 ? rep[0] - 1 : rep[index];
        if (index != 1) rep[2] = rep[1];
        rep[1] = rep[0];
        rep[0] = offset;
      }
    }

    if (literals > lit.size() - lit_pos) fail("zstd: sequence takes more literals than decoded");
    append_checked(out, limit, literals + match);
    out.append(lit.data() + lit_pos, static_cast<size_t>(literals));
    lit_pos += static_cast<size_t>(literals);
    if (offset == 0 || offset > out.size()) fail("zstd: match offset {} reaches before the frame", offset);
    size_t from = out.size() - static_cast<size_t>(offset);
    if (offset >= match) {
      const size_t at = out.size();
      out.resize(at + static_cast<size_t>(match));
      std::memcpy(out.data() + at, out.data() + from, static_cast<size_t>(match));
    } else {
      // Overlapping match: the copy repeats the bytes it is producing.
      for (uint64_t k = 0; k < match; ++k) out.push_back(out[from++]);
    }
  }
  if (!bits.finished()) fail("zstd: sequences bitstream has bits left over");
  append_checked(out, limit, lit.size() - lit_pos);
  out.append(lit.data() + lit_pos, lit.size() - lit_pos);
}

}  // namespace vgpu::module::zstd_detail
