// The launch signatures of a thread's recent launches, one slot per function, direct-mapped by
// handle, remembered with the raw launch they were built from (launch_facts.cpp).
//
// Why: building a signature asks "is this word an address" of every 8-byte word of the
// parameters from 64 KiB up (launch_signature.h). Even answered from KnownAddresses that is a
// call through a std::function and a slot check per word: ~2,700 instructions of a launch whose
// by-value struct holds 36 such words (the call-overhead bench's PyTorch-like row, ~6,900 in
// all), and a training step launches each kernel from the same place with the same bytes over
// and over. A signature is a function of the function (its name and parameter layout, fixed per
// handle), the shape, the packed parameter block and the answers about its words; those answers
// stand while the owner and both generations are the same and, for a "no" about a user-range
// word, until the host's mappings would be read again (KnownAddresses says why). So a slot's
// signature is this launch's while all of that holds: the same function, owner, generations,
// shape and block bytes, and `now()` before the least `until` of the answers it was built on.
// Not thread-safe: one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "front/launch/launch_signature.h"

namespace vgpu::pt {

class RecentSignatures {
 public:
  static constexpr size_t kSlots = 64;
  // Larger blocks are built every time: a slot keeps a copy of its block and of its signature.
  static constexpr size_t kMaxBlock = 4096;

  // One launch as the signature is built from it. The generations are read before any answer is
  // asked for (an answer given after a change is then kept under the older ones: a miss later).
  struct Launch {
    const void* function;
    const void* owner;  // whose addresses the answers are about (the backend's state)
    const LaunchShape& shape;
    std::span<const uint8_t> block;  // the packed parameter block
    uint32_t device_generation, host_generation;
  };

  // What a caller derives from a signature's bytes alone (its lookup key), kept with it: valid
  // (`known`) until the slot's signature is built again.
  struct Derived {
    uint64_t key = 0;
    bool known = false;
  };

  // The signature of `launch` into `out`: the slot's if it holds this very launch and its answers
  // stand, else `build(out)`, which returns until when the answers it was built on stand (wall
  // seconds, as `now()`; +inf: while the generations hold), kept for the next launch. Returns
  // what is derived from that signature, to read or fill (valid until the next call).
  template <class Now, class Build>
  Derived& signature(const Launch& launch, Now&& now, Build&& build, LaunchSignature* out) {
    Slot& s = slots_[(reinterpret_cast<uintptr_t>(launch.function) >> 4) % kSlots];
    if (s.filled && same(s, launch) && (s.until == std::numeric_limits<double>::infinity() || now() < s.until)) {
      out->bytes.assign(s.signature.bytes);  // the plan's buffer is reused: no allocation
      return s.derived;
    }
    const double until = build(out);
    if (launch.block.size() > kMaxBlock) {
      s.filled = false;
      unkept_ = Derived{};
      return unkept_;
    }
    s.function = launch.function;
    s.owner = launch.owner;
    s.shape = launch.shape;
    s.device_generation = launch.device_generation;
    s.host_generation = launch.host_generation;
    s.until = until;
    s.block.assign(launch.block.begin(), launch.block.end());  // buffers reused once large enough
    s.signature.bytes.assign(out->bytes);
    s.derived = Derived{};
    s.filled = true;
    return s.derived;
  }

 private:
  struct Slot {
    const void* function = nullptr;
    const void* owner = nullptr;
    LaunchShape shape;
    uint32_t device_generation = 0, host_generation = 0;
    double until = 0;
    std::vector<uint8_t> block;
    LaunchSignature signature;
    Derived derived;
    bool filled = false;
  };

  static bool same(const Slot& s, const Launch& l) {
    return s.function == l.function && s.owner == l.owner && s.device_generation == l.device_generation &&
           s.host_generation == l.host_generation && s.shape.grid == l.shape.grid &&
           s.shape.block == l.shape.block && s.shape.dynamic_shared == l.shape.dynamic_shared &&
           s.block.size() == l.block.size() &&
           (l.block.empty() || std::memcmp(s.block.data(), l.block.data(), l.block.size()) == 0);
  }

  Slot slots_[kSlots];
  Derived unkept_;  // what a launch whose block is too large to keep derives: never known
};

}  // namespace vgpu::pt
