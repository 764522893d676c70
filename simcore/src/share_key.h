// A link's fair share and the link, packed into one 128-bit key that orders as the pair
// (share, link) does, so the max-min filling heap (flow_solver.cpp, and the benchmark's
// full re-solve baseline) compares with one integer compare instead of two floating-point
// branches. Shares are never negative (remaining capacity is clamped at 0), and the bits of a
// non-negative double order as the double does.
#pragma once

#include <bit>
#include <cstdint>

#include "simcore/topology.h"

namespace simcore::detail {

struct ShareKey {
  unsigned __int128 key;

  static ShareKey of(double share, LinkId link) {
    return {(static_cast<unsigned __int128>(std::bit_cast<uint64_t>(share)) << 32) | link};
  }
  double share() const { return std::bit_cast<double>(static_cast<uint64_t>(key >> 32)); }
  LinkId link() const { return static_cast<LinkId>(key); }
  bool operator>(const ShareKey& o) const { return key > o.key; }
  bool operator<(const ShareKey& o) const { return key < o.key; }
};

}  // namespace simcore::detail
