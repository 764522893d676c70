// The world the passthrough's address lookups see, for tests of what remembers their answers
// (known_addresses_test.cpp, recent_signatures_test.cpp): device allocations (one word each) and
// the host's mappings as last read, which a "no" about a user-range word reads again once `due`
// has passed (PassState::is_device_pointer || HostAddressSpace::contains, with its refresh).
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <utility>

namespace vgpu::test {

struct AddressWorld {
  std::set<uint64_t> device, host_now, host_read;
  uint32_t device_generation = 0, host_generation = 0;
  double now = 0, due = -1;
  static constexpr double kRefresh = 0.5;
  static bool user(uint64_t v) { return v >= (uint64_t{1} << 32) && v < (uint64_t{1} << 47); }
  // Whether `v` is an address, and until when a "no" holds.
  std::pair<bool, double> ask(uint64_t v) {
    if (device.count(v)) return {true, 0};
    if (!user(v)) return {false, std::numeric_limits<double>::infinity()};
    if (host_read.count(v)) return {true, 0};
    if (due < 0 || now >= due) {  // read the mappings again
      host_read = host_now;
      due = now + kRefresh;
      ++host_generation;
    }
    return {host_read.count(v) != 0, due};
  }
};

}  // namespace vgpu::test
