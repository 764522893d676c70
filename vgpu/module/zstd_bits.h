// The two bit readers Zstandard uses: a forward little-endian one (FSE table descriptions) and
// a backward one (Huffman streams, FSE-coded sequences), which starts at the highest set bit of
// the last byte and consumes toward the first byte.
#pragma once

#include "module/image_error.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>

namespace vgpu::module::zstd_detail {

// Bits [bitpos, bitpos + n) of `p` (little-endian bit order), n <= 32, all inside `len` bytes.
inline uint32_t load_bits(const uint8_t* p, size_t len, uint64_t bitpos, int n) {
  if (n == 0) return 0;
  const size_t byte = static_cast<size_t>(bitpos >> 3);
  const int shift = static_cast<int>(bitpos & 7);
  uint64_t v = 0;
  if (byte + 8 <= len) {
    std::memcpy(&v, p + byte, 8);
  } else {
    for (size_t i = 0; byte + i < len && i < 8; ++i) v |= uint64_t{p[byte + i]} << (8 * i);
  }
  return static_cast<uint32_t>((v >> shift) & ((uint64_t{1} << n) - 1));
}

class ForwardBits {
 public:
  explicit ForwardBits(std::span<const uint8_t> s) : s_(s) {}
  uint32_t read(int n) {
    if (bitpos_ + static_cast<uint64_t>(n) > uint64_t{s_.size()} * 8) fail("zstd: truncated table description");
    const uint32_t v = load_bits(s_.data(), s_.size(), bitpos_, n);
    bitpos_ += static_cast<uint64_t>(n);
    return v;
  }
  void unread(int n) { bitpos_ -= static_cast<uint64_t>(n); }
  size_t bytes_used() const { return static_cast<size_t>((bitpos_ + 7) / 8); }

 private:
  std::span<const uint8_t> s_;
  uint64_t bitpos_ = 0;
};

class BackwardBits {
 public:
  explicit BackwardBits(std::span<const uint8_t> s) : s_(s) {
    if (s.empty()) fail("zstd: empty bitstream");
    const uint8_t last = s.back();
    if (last == 0) fail("zstd: bitstream lacks its end marker");
    pos_ = static_cast<int64_t>((s.size() - 1) * 8) + (31 - std::countl_zero(uint32_t{last}));
  }

  // The next n bits (n <= 32) without consuming them; bits before the start read as zero.
  uint32_t peek(int n) const {
    if (n == 0) return 0;
    const int64_t start = pos_ - n;
    if (start >= 0) return load_bits(s_.data(), s_.size(), static_cast<uint64_t>(start), n);
    const int have = static_cast<int>(pos_);  // bits that exist, at positions [0, pos_)
    if (have <= 0) return 0;
    return load_bits(s_.data(), s_.size(), 0, have) << (n - have);
  }
  // Consumes n bits; running past the start is allowed (reads zeros) and shows in overflowed().
  uint32_t read(int n) {
    const uint32_t v = peek(n);
    pos_ -= n;
    return v;
  }
  void skip(int n) { pos_ -= n; }
  bool overflowed() const { return pos_ < 0; }
  bool finished() const { return pos_ == 0; }

 private:
  std::span<const uint8_t> s_;
  int64_t pos_ = 0;  // bits not yet consumed: positions [0, pos_)
};

}  // namespace vgpu::module::zstd_detail
