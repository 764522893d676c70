// Which 64-bit values are addresses of the process's own host memory, for launch signatures
// (front/launch/launch_signature.h): a by-value struct that a framework fills only in part (PyTorch's
// OffsetCalculator beyond its `dims`, padding after a 1-byte member) keeps whatever its host
// stack held, and that is mostly saved frame pointers, return addresses and heap pointers,
// which differ from one launch of the same work to the next. A pointer to host memory is never
// a size or a count, so masking it (like a device pointer) loses nothing the kernel's work
// depends on.
//
// "Host memory": a readable mapping in /proc/self/maps at or above 4 GiB. Reservations without
// access (the CUDA driver's address-space reservations, guard pages) are left out, and so is
// everything below 4 GiB, where a non-PIE executable and its heap live but where a pair of
// 32-bit integers or an int64 size could also fall: a real value is never masked by
// coincidence there. The mappings are read once and again when a value that looks like a user
// address (4 GiB .. 128 TiB) is not in them, at most every kRefreshSeconds, so a new mapping
// is known soon and a real value in that range costs no file read per launch. Thread-safe.
#pragma once

#include <cstdint>
#include <shared_mutex>
#include <atomic>
#include <utility>
#include <vector>

namespace vgpu {

class HostAddressSpace {
 public:
  static constexpr uint64_t kLowest = uint64_t{1} << 32;
  static constexpr uint64_t kUserEnd = uint64_t{1} << 47;
  static constexpr double kRefreshSeconds = 0.5;

  bool contains(uint64_t value);
  // Bumped each time the mappings are read again (contains()'s answers may change then): what a
  // cache of its answers is valid under.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // Until when (wall seconds, OutsideCpuTime) a "no" of contains() stands without the mappings
  // being read again, if no other call reads them first (which bumps the generation); < 0 before
  // the first reading. A value outside [kLowest, kUserEnd) is never an address here.
  double refresh_due_at() const { return refresh_due_at_.load(std::memory_order_acquire); }

  // The readable mappings from the text of a /proc/<pid>/maps file, sorted, those that end at
  // or below kLowest left out (for tests).
  static std::vector<std::pair<uint64_t, uint64_t>> parse_maps(const char* text);

 private:
  bool lookup(uint64_t value) const;  // under mu_ (shared)
  void refresh();

  mutable std::shared_mutex mu_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // [begin, end), sorted
  double refreshed_at_ = -1;                           // wall seconds; < 0: never read
  std::atomic<uint64_t> generation_{0};
  std::atomic<double> refresh_due_at_{-1};
};

}  // namespace vgpu
