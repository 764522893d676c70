// Bounds-checked little-endian reads from an untrusted byte range. Every accessor fails with
// ImageError (naming `what`) instead of reading outside the range.
#pragma once

#include "module/image_error.h"

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace vgpu::module {

class ByteView {
 public:
  ByteView() = default;
  explicit ByteView(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t size() const { return bytes_.size(); }
  const uint8_t* data() const { return bytes_.data(); }
  std::span<const uint8_t> span() const { return bytes_; }

  bool fits(uint64_t offset, uint64_t length) const {
    return offset <= bytes_.size() && length <= bytes_.size() - offset;
  }

  // The sub-range [offset, offset + length); fails unless wholly inside.
  ByteView sub(uint64_t offset, uint64_t length, const char* what) const {
    if (!fits(offset, length))
      fail("{}: range [{}, +{}) lies outside the {} bytes available", what, offset, length,
           bytes_.size());
    return ByteView(bytes_.subspan(offset, length));
  }

  uint8_t u8(uint64_t offset, const char* what) const { return read<uint8_t>(offset, what); }
  uint16_t u16(uint64_t offset, const char* what) const { return read<uint16_t>(offset, what); }
  uint32_t u32(uint64_t offset, const char* what) const { return read<uint32_t>(offset, what); }
  uint64_t u64(uint64_t offset, const char* what) const { return read<uint64_t>(offset, what); }

  // A NUL-terminated string starting at `offset`; fails if no NUL lies inside the range.
  std::string_view cstring(uint64_t offset, const char* what) const {
    if (offset >= bytes_.size()) fail("{}: string offset {} outside {} bytes", what, offset, bytes_.size());
    const auto* start = bytes_.data() + offset;
    const void* nul = std::memchr(start, 0, bytes_.size() - offset);
    if (nul == nullptr) fail("{}: string at offset {} is not terminated", what, offset);
    return {reinterpret_cast<const char*>(start), static_cast<size_t>(static_cast<const uint8_t*>(nul) - start)};
  }

 private:
  template <class T>
  T read(uint64_t offset, const char* what) const {
    if (!fits(offset, sizeof(T)))
      fail("{}: {}-byte field at offset {} lies outside the {} bytes available", what, sizeof(T),
           offset, bytes_.size());
    T v;
    std::memcpy(&v, bytes_.data() + offset, sizeof(T));  // little-endian host (x86-64, aarch64)
    return v;
  }

  std::span<const uint8_t> bytes_;
};

}  // namespace vgpu::module
