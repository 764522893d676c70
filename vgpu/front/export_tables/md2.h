// MD2 (RFC 1319) and HMAC over it (RFC 2104 with MD2's 16-byte block).
//
// Nothing else in vgpu needs a hash this old: the CUDA runtime's integrity check
// (integrity.h) is an HMAC-MD2, so the driver must compute one to be accepted by cudart.
// Both are small, allocation-free and incremental, because the message (a fixed record
// followed by one entry per device) is fed in pieces.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace vgpu::darkapi {

using Md2Digest = std::array<uint8_t, 16>;

class Md2 {
 public:
  static constexpr size_t kBlockSize = 16;

  // The whole hashing state, in the order RFC 1319 describes it: the 48-byte working buffer
  // X (its first 16 bytes become the digest), the running checksum C, how many bytes of the
  // current block are filled, and L, the checksum's last byte. Exposed so that tests can load
  // a state captured elsewhere and compare single steps.
  struct State {
    std::array<uint8_t, 48> x{};
    std::array<uint8_t, 16> checksum{};
    uint8_t filled = 0;
    uint8_t last = 0;
  };
  static_assert(sizeof(State) == 66);

  Md2() = default;

  void update(std::span<const uint8_t> bytes) { update_masked(bytes, 0); }
  // update() with every byte XORed with `mask` first (HMAC's key pads).
  void update_masked(std::span<const uint8_t> bytes, uint8_t mask);
  void update_byte(uint8_t byte);

  // Pads, appends the checksum and returns the digest. The object is then reset.
  Md2Digest finish();

  const State& state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  void compress();
  State s_;
};

Md2Digest md2(std::span<const uint8_t> bytes);

// HMAC-MD2. Keys longer than a block are hashed first; shorter ones are zero-padded.
class HmacMd2 {
 public:
  explicit HmacMd2(std::span<const uint8_t> key);
  void update(std::span<const uint8_t> bytes) { inner_.update(bytes); }
  Md2Digest finish();

 private:
  std::array<uint8_t, Md2::kBlockSize> key_{};
  Md2 inner_;
};

}  // namespace vgpu::darkapi
