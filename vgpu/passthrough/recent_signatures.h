// The launch signatures of a thread's recent launches, remembered with the raw launch they were
// built from (launch_facts.cpp).
//
// Why: building a signature asks "is this word an address" of every 8-byte word of the
// parameters from 64 KiB up (launch_signature.h). Even answered from KnownAddresses that is a
// call through a std::function and a slot check per word: ~3,800 instructions of a launch whose
// by-value struct holds ~36 such words (the call-overhead bench's PyTorch-like row, ~6,400 in
// all), and a training step launches the same kernels with the same bytes as the step before.
// A signature is a function of the function (its name and parameter layout, fixed per handle),
// the shape, the packed parameter block and the answers about its words; those answers stand
// while the owner and both generations are the same and, for a "no" about a user-range word,
// until the host's mappings would be read again (KnownAddresses says why). So a slot's signature
// is this launch's while all of that holds: the same function, owner, generations, shape and
// block bytes, and `now()` before the least `until` of the answers it was built on.
// Not thread-safe: one per thread.
#pragma once

#include <bit>
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
  // Sets of four, chosen by a hash of the shape and the block (not the function: two kernels
  // launched with the same arguments, as a chain of in-place ops on one tensor is, share a set
  // and keep a way each), filled in turn. A kernel launched with many arguments in turn (PyTorch's elementwise
  // kernels, on every tensor of a step) finds each of them again, which one slot per function
  // would not.
  static constexpr size_t kSets = 128;
  static constexpr size_t kWays = 4;
  // A function whose launches were found nowhere kGiveUpAfter times in a row is built without
  // looking but every kRetryEvery-th launch. More misses in a row than a kernel's arguments in
  // one step are likely to number: every remembered launch goes stale at once when the host's
  // mappings are read again (every HostAddressSpace::kRefreshSeconds) and is learnt again, and a
  // low bar would give up then.
  static constexpr uint32_t kGiveUpAfter = 256;
  static constexpr uint32_t kRetryEvery = 8;
  // Larger blocks are built every time: a slot keeps a copy of its block and of its signature
  // (at most ~2 x 2 KiB a slot, ~2 MiB a launching thread; a few hundred bytes a slot is usual).
  static constexpr size_t kMaxBlock = 2048;

  // One launch as the signature is built from it. The generations are read before any answer is
  // asked for (an answer given after a change is then kept under the older ones: a miss later).
  struct Launch {
    const void* function;
    const void* owner;  // whose addresses the answers are about (the backend's state)
    const LaunchShape& shape;
    std::span<const uint8_t> block;  // the packed parameter block
    uint32_t device_generation, host_generation;
  };

  // What a caller derives from a signature's bytes alone (its lookup and work keys), kept with it: valid
  // (`known`) until the slot's signature is built again.
  struct Derived {
    uint64_t key = 0;
    bool known = false;
    uint64_t work = 0;  // signature_work_key, where the launch's GPU is shared (launch_api.cpp)
    bool work_known = false;
  };

  // The signature of `launch` into `out`: the slot's if one holds this very launch and its
  // answers stand, else `build(out)`, which returns until when the answers it was built on stand
  // (wall seconds, as `now()`; +inf: while the generations hold), kept for the next launch.
  // Returns what is derived from that signature, to read or fill (valid until the next call).
  template <class Now, class Build>
  Derived& signature(const Launch& launch, Now&& now, Build&& build, LaunchSignature* out) {
    // The function's last launch again (a loop of one kernel, a kernel launched once a step):
    // found without hashing its block.
    Last& last = last_[(reinterpret_cast<uintptr_t>(launch.function) >> 4) % kLast];
    if (last.function != launch.function) last = {launch.function, nullptr, 0, 0};
    // A function whose launches keep missing (raw bytes that never repeat: stack garbage that
    // changes in words the signature masks) is built without looking, hashing or keeping, but
    // every kRetryEvery-th launch, which finds out whether its launches repeat by now.
    if (last.misses >= kGiveUpAfter && ++last.skipped % kRetryEvery != 0) {
      ++built_;
      build(out);
      unkept_ = Derived{};
      return unkept_;
    }
    if (last.slot != nullptr && stands(*last.slot, launch, now)) {
      out->bytes.assign(last.slot->signature.bytes);  // the plan's buffer is reused: no allocation
      ++found_;
      last.misses = 0;
      return last.slot->derived;
    }
    const uint64_t hash = hash_of(launch.shape, launch.block);
    Set& set = sets_[hash % kSets];
    for (size_t w = 0; w < kWays; ++w) {
      Slot& s = set.ways[w];
      if (s.hash == hash && stands(s, launch, now)) {
        out->bytes.assign(s.signature.bytes);
        ++found_;
        last = {launch.function, &s, 0, 0};
        return s.derived;
      }
    }
    const double until = build(out);
    ++built_;
    if (last.misses < kGiveUpAfter) ++last.misses;
    if (launch.block.size() > kMaxBlock) {
      unkept_ = Derived{};
      return unkept_;
    }
    // This very launch's way, whose answers no longer stand, else the next in turn.
    size_t w = kWays;
    for (size_t i = 0; i < kWays; ++i)
      if (set.ways[i].filled && set.ways[i].hash == hash && same(set.ways[i], launch)) w = i;
    if (w == kWays) {
      w = set.next;
      set.next = static_cast<uint8_t>((set.next + 1) % kWays);
    }
    Slot& s = set.ways[w];
    s.hash = hash;
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
    ++kept_;
    last.slot = &s;
    return s.derived;
  }

  // How many launches found their signature here, were built, were kept (tests, a debug line).
  unsigned long found() const { return found_; }
  unsigned long built() const { return built_; }
  unsigned long kept() const { return kept_; }

  // The hash that picks a launch's set (the shape's seven words and the block's bytes).
  static uint64_t hash_of(const LaunchShape& shape, std::span<const uint8_t> block) {
    constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
    auto mix = [](uint64_t h, uint64_t w) { return (std::rotl(h, 23) ^ w) * kMul; };
    // The shape's seven words as four.
    uint64_t h = mix(block.size(), shape.grid[0] | uint64_t{shape.grid[1]} << 32);
    h = mix(h, shape.grid[2] | uint64_t{shape.block[0]} << 32);
    h = mix(h, shape.block[1] | uint64_t{shape.block[2]} << 32);
    h = mix(h, shape.dynamic_shared);
    size_t i = 0;
    for (; i + 8 <= block.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, block.data() + i, 8);
      h = mix(h, w);
    }
    if (i < block.size()) {
      uint64_t w = 0;
      std::memcpy(&w, block.data() + i, block.size() - i);
      h = mix(h, w);
    }
    return h ^ (h >> 32);
  }

 private:
  struct Slot {
    uint64_t hash = 0;
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
  struct Set {
    Slot ways[kWays];
    uint8_t next = 0;  // the way a new launch fills
  };

  // A slot's last-launch pointer: which slot a function's last launch used (its contents may
  // have been replaced since: checked in full, as any slot).
  struct Last {
    const void* function = nullptr;
    Slot* slot = nullptr;
    uint32_t misses = 0;   // the function's launches found nowhere in a row (up to kGiveUpAfter)
    uint32_t skipped = 0;  // launches since it gave up, counted for the retries
  };
  static constexpr size_t kLast = 64;

  // Whether `s` holds `l` and its answers still stand.
  template <class Now>
  static bool stands(const Slot& s, const Launch& l, Now& now) {
    return s.filled && same(s, l) && (s.until == std::numeric_limits<double>::infinity() || now() < s.until);
  }
  static bool same(const Slot& s, const Launch& l) {
    return s.function == l.function && s.owner == l.owner && s.device_generation == l.device_generation &&
           s.host_generation == l.host_generation && s.shape.grid == l.shape.grid &&
           s.shape.block == l.shape.block && s.shape.dynamic_shared == l.shape.dynamic_shared &&
           s.block.size() == l.block.size() &&
           (l.block.empty() || std::memcmp(s.block.data(), l.block.data(), l.block.size()) == 0);
  }

  Set sets_[kSets];
  Last last_[kLast];  // direct-mapped by function handle
  Derived unkept_;  // what a launch not kept derives: never known
  unsigned long found_ = 0, built_ = 0, kept_ = 0;
};

}  // namespace vgpu::pt
