// Little-endian fixed-width fields over byte buffers, for protocol.cpp. The reader is the only
// place that touches untrusted bytes: every read checks the bytes left first, and the first
// failure sticks, so a decoder can read a whole message and test once at the end.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "protocol.h"

namespace simcore::wire {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void f64(double v) { u64(std::bit_cast<uint64_t>(v)); }
  // Over-cap strings and lists mark the writer failed (the peer would refuse them).
  void str(const std::string& s, uint32_t cap) {
    if (s.size() > cap) { ok_ = false; return; }
    u32(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void u64_list(const std::vector<uint64_t>& v, uint32_t cap) {
    if (v.size() > cap) { ok_ = false; return; }
    u32(static_cast<uint32_t>(v.size()));
    for (uint64_t x : v) u64(x);
  }
  void fail() { ok_ = false; }
  bool ok() const { return ok_; }
  // Overwrites a u32 written earlier (the frame length, once the payload size is known).
  void patch_u32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) out_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  size_t size() const { return out_.size(); }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& out_;
  bool ok_ = true;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> in) : in_(in) {}

  uint8_t u8() { return static_cast<uint8_t>(get(1)); }
  uint16_t u16() { return static_cast<uint16_t>(get(2)); }
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  uint64_t u64() { return get(8); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  double f64() { return std::bit_cast<double>(u64()); }

  // A string of at most `cap` bytes; a longer claimed size, or one past the bytes left, fails
  // before anything is allocated.
  std::string str(uint32_t cap) {
    const uint32_t n = u32();
    if (!ok()) return {};
    if (n > cap || n > remaining()) {
      fail(n > remaining() && n <= cap ? DecodeError::kTruncated : DecodeError::kBadCount);
      return {};
    }
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  // A list of u64 whose count must fit both `cap` and the bytes actually left ("lying counts").
  std::vector<uint64_t> u64_list(uint32_t cap) {
    const uint32_t n = u32();
    if (!ok()) return {};
    if (n > cap || static_cast<uint64_t>(n) * 8 > remaining()) {
      fail(DecodeError::kBadCount);
      return {};
    }
    std::vector<uint64_t> v(n);
    for (auto& x : v) x = u64();
    return v;
  }

  bool flag() {
    const uint8_t b = u8();
    if (b > 1) fail(DecodeError::kBadValue);
    return b == 1;
  }

  void fail(DecodeError e) {
    if (error_ == DecodeError::kNone) error_ = e;
  }
  bool ok() const { return error_ == DecodeError::kNone; }
  DecodeError error() const { return error_; }
  size_t remaining() const { return in_.size() - pos_; }

 private:
  uint64_t get(int n) {
    if (!ok()) return 0;
    if (remaining() < static_cast<size_t>(n)) {
      fail(DecodeError::kTruncated);
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(in_[pos_ + i]) << (8 * i);
    pos_ += n;
    return v;
  }

  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  DecodeError error_ = DecodeError::kNone;
};

}  // namespace simcore::wire
