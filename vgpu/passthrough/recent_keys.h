// The exact keys (SharedDurations::key_of, a hash of a launch signature's bytes) of a thread's
// recent launches, one slot per function, direct-mapped by handle.
//
// Why: a settled launch hashed its whole signature (the kernel's name, its shape, its parameter
// words) to look its duration up, ~150 instructions with a short name, ~6% of a settled
// cuLaunchKernel and more under a long name (issue 21), and a training step launches each
// function with the same bytes over and over. The key is a function of the bytes alone, so the
// slot's answer stands exactly while the bytes are equal; comparing them costs a fraction of
// hashing them. Not thread-safe: one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vgpu::pt {

class RecentKeys {
 public:
  static constexpr size_t kSlots = 64;

  // key_of(bytes) for a launch of `function`, which picks the slot: the slot's if it holds these
  // very bytes (whichever function left them: the key depends on the bytes alone), else computed
  // and kept.
  template <class KeyOf>
  uint64_t key(const void* function, std::string_view bytes, KeyOf&& key_of) {
    Slot& s = slots_[(reinterpret_cast<uintptr_t>(function) >> 4) % kSlots];
    if (s.filled && s.bytes == bytes) return s.key;
    s.key = key_of(bytes);
    s.filled = true;
    s.bytes.assign(bytes);  // the slot's buffer is reused: no allocation once it is large enough
    return s.key;
  }

 private:
  struct Slot {
    std::string bytes;
    uint64_t key = 0;
    bool filled = false;  // an empty slot's empty bytes are no answer
  };
  Slot slots_[kSlots];
};

}  // namespace vgpu::pt
