#include "front/export_tables/md2.h"

#include <cstring>

namespace vgpu::darkapi {
namespace {

// RFC 1319's substitution table: a permutation of 0..255 built from the digits of pi.
constexpr uint8_t kPiSubst[256] = {
     41,  46,  67, 201, 162, 216, 124,   1,  61,  54,  84, 161, 236, 240,   6,  19,
     98, 167,   5, 243, 192, 199, 115, 140, 152, 147,  43, 217, 188,  76, 130, 202,
     30, 155,  87,  60, 253, 212, 224,  22, 103,  66, 111,  24, 138,  23, 229,  18,
    190,  78, 196, 214, 218, 158, 222,  73, 160, 251, 245, 142, 187,  47, 238, 122,
    169, 104, 121, 145,  21, 178,   7,  63, 148, 194,  16, 137,  11,  34,  95,  33,
    128, 127,  93, 154,  90, 144,  50,  39,  53,  62, 204, 231, 191, 247, 151,   3,
    255,  25,  48, 179,  72, 165, 181, 209, 215,  94, 146,  42, 172,  86, 170, 198,
     79, 184,  56, 210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116,   4, 241,
     69, 157, 112,  89, 100, 113, 135,  32, 134,  91, 207, 101, 230,  45, 168,   2,
     27,  96,  37, 173, 174, 176, 185, 246,  28,  70,  97, 105,  52,  64, 126,  15,
     85,  71, 163,  35, 221,  81, 175,  58, 195,  92, 249, 206, 186, 197, 234,  38,
     44,  83,  13, 110, 133,  40, 132,   9, 211, 223, 205, 244,  65, 129,  77,  82,
    106, 220,  55, 200, 108, 193, 171, 250,  36, 225, 123,   8,  12, 189, 177,  74,
    120, 136, 149, 139, 227,  99, 232, 109, 233, 203, 213, 254,  59,   0,  29,  57,
    242, 239, 183,  14, 102,  88, 208, 228, 166, 119, 114, 248, 235, 117,  75,  10,
     49,  68,  80, 180, 143, 237,  31,  26, 219, 153, 141,  51, 159,  17, 131,  20,
};

constexpr uint8_t kInnerPad = 0x36;
constexpr uint8_t kOuterPad = 0x5c;

}  // namespace

void Md2::update_byte(uint8_t byte) {
  // Each byte lands in the block part of X (bytes 16..31), its XOR with the chaining value
  // in bytes 32..47, and updates the checksum at once; a full block triggers the rounds.
  const uint8_t i = s_.filled;
  s_.x[16 + i] = byte;
  s_.x[32 + i] = static_cast<uint8_t>(s_.x[i] ^ byte);
  s_.checksum[i] ^= kPiSubst[byte ^ s_.last];
  s_.last = s_.checksum[i];
  s_.filled = static_cast<uint8_t>((i + 1) % kBlockSize);
  if (s_.filled == 0) compress();
}

void Md2::update_masked(std::span<const uint8_t> bytes, uint8_t mask) {
  for (uint8_t b : bytes) update_byte(static_cast<uint8_t>(b ^ mask));
}

void Md2::compress() {
  // 18 rounds over the 48-byte buffer (RFC 1319, section 3.4).
  uint8_t t = 0;
  for (uint8_t round = 0; round < 18; ++round) {
    for (uint8_t& v : s_.x) {
      v ^= kPiSubst[t];
      t = v;
    }
    t = static_cast<uint8_t>(t + round);
  }
}

Md2Digest Md2::finish() {
  // Padding: n bytes of value n bring the message to a block boundary (a full block of 16
  // when it already was on one); then the checksum of everything so far is hashed as a block.
  const uint8_t pad = static_cast<uint8_t>(kBlockSize - s_.filled);
  for (uint8_t i = 0; i < pad; ++i) update_byte(pad);
  const std::array<uint8_t, 16> checksum = s_.checksum;
  for (uint8_t b : checksum) update_byte(b);
  Md2Digest out;
  std::memcpy(out.data(), s_.x.data(), out.size());
  s_ = State{};
  return out;
}

Md2Digest md2(std::span<const uint8_t> bytes) {
  Md2 h;
  h.update(bytes);
  return h.finish();
}

HmacMd2::HmacMd2(std::span<const uint8_t> key) {
  if (key.size() > key_.size()) {
    const Md2Digest k = md2(key);
    std::memcpy(key_.data(), k.data(), k.size());
  } else {
    std::memcpy(key_.data(), key.data(), key.size());
  }
  inner_.update_masked(key_, kInnerPad);
}

Md2Digest HmacMd2::finish() {
  const Md2Digest inner = inner_.finish();
  Md2 outer;
  outer.update_masked(key_, kOuterPad);
  outer.update(inner);
  inner_.update_masked(key_, kInnerPad);  // ready for another message with the same key
  return outer.finish();
}

}  // namespace vgpu::darkapi
