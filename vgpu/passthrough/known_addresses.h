// Answers to "is this 64-bit word an address", remembered per thread, for launch signatures
// (launch_facts.cpp).
//
// Why: a launch asks about every 8-byte word of its parameters from 64 KiB up
// (launch_signature.h), and PyTorch's launches carry the same device pointers, host stack
// addresses and pairs of sizes launch after launch: a lock and an ordered-map search of the
// device's allocations, a shared lock and a search of the host's mappings, ~360 instructions a
// word, four fifths of a launch whose by-value struct holds 35 such words (the call-overhead
// bench's PyTorch-like row). An answer stands while neither the device allocations
// (PassState::address_generation) nor the host's known mappings (HostAddressSpace::generation)
// changed since it was given, and a "no" only until the host's mappings would be read again for
// it (HostAddressSpace::refresh_due_at): the answers the two lookups would give. Not
// thread-safe: one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

namespace vgpu::pt {

class KnownAddresses {
 public:
  static constexpr size_t kSlots = 1024;  // 40 KiB a launching thread; few of a launch's words collide

  // Whether `v` is an address. The remembered answer if it stands: given under the same `owner`
  // and generations (their low 32 bits), and for a "no", `now()` (wall seconds, asked at most
  // once per call) before its `until`. Else `ask(v)`, which returns {address, until}: until when a
  // "no" stands (+inf: for good while the generations hold); remembered. `stands_until`, when
  // given, is lowered to the answer's own until (what a launch's signature built on it stands
  // under: recent_signatures.h).
  template <class Now, class Ask>
  bool is_address(uint64_t v, const void* owner, uint32_t device_generation, uint32_t host_generation, Now&& now,
                  Ask&& ask, double* stands_until = nullptr) {
    Slot& slot = slots_[slot_of(v)];
    if (slot.value == v && slot.owner == owner && slot.device_generation == device_generation &&
        slot.host_generation == host_generation) {
      if (slot.address || slot.until == std::numeric_limits<double>::infinity()) return slot.address;
      if (now() < slot.until) {
        if (stands_until != nullptr && slot.until < *stands_until) *stands_until = slot.until;
        return false;
      }
    }
    const std::pair<bool, double> a = ask(v);
    slot = {v, device_generation, host_generation, a.first ? std::numeric_limits<double>::infinity() : a.second,
            owner, a.first};
    if (stands_until != nullptr && slot.until < *stands_until) *stands_until = slot.until;
    return a.first;
  }

 private:
  struct Slot {
    uint64_t value = 0;
    uint32_t device_generation = 0, host_generation = 0;
    double until = 0;  // wall seconds a "no" stands (+inf: a "yes", or a "no" for good)
    const void* owner = nullptr;
    bool address = false;
  };
  static size_t slot_of(uint64_t v) { return static_cast<size_t>((v >> 3) * 0x9E3779B97F4A7C15ull >> 54); }
  Slot slots_[kSlots];
};

}  // namespace vgpu::pt
