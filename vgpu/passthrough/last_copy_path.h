// The path of a thread's last copy between two addresses (host to device, or within a device),
// remembered for the next copy between the same two: a loop of copies mostly repeats its ends (a
// staging buffer to the same tensor), and the two lookups behind the answer
// (PassState::is_device_pointer: a lock and two ordered-map searches each) were a tenth of an
// async copy's own cost (issue 21). The answer stands while the device allocations and mappings
// are unchanged: the caller passes PassState::address_generation, read before its lookups (a
// change racing with them files its answer under the older generation, never a stale answer
// under the newer). Not thread-safe: one per thread (timed_copy_api.cpp).
#pragma once

#include <cstdint>

#include "passthrough/last_answer.h"

namespace vgpu {
// front/launch/copy_cost.h's (declared only: this header is in every timed call's thread state,
// call_thread.h, and copy_cost.h brings simcore's headers with it).
enum class CopyPath;
}  // namespace vgpu

namespace vgpu::pt {

class LastCopyPath {
 public:
  // The path between `dst` and `src`: the remembered one if it was given for the same two under
  // the same `owner` and `generation`, else `lookup(dst, src)`, remembered.
  template <class Lookup>
  CopyPath path(const void* owner, uint64_t generation, uint64_t dst, uint64_t src, Lookup&& lookup) {
    return last_.of(Ends{owner, generation, dst, src}, [&] { return lookup(dst, src); });
  }

 private:
  struct Ends {
    const void* owner = nullptr;
    uint64_t generation = 0;
    uint64_t dst = 0, src = 0;
    bool operator==(const Ends&) const = default;
  };
  LastAnswer<Ends, CopyPath> last_;
};

// The price of the thread's last copy (its seconds on the virtual GPU), remembered for the next
// copy of as many bytes on the same path and virtual device: a loop of copies mostly repeats
// them, and the device's lookup and the price's arithmetic (a division) were ~60 instructions of
// every copy (issue 21). A device's model never changes once `owner` (the backend's state, made
// once) is made. Not thread-safe: one per thread.
class LastCopyPrice {
 public:
  // `price()`'s answer for (`owner`, `device`, `path`, `bytes`), remembered.
  template <class Price>
  double seconds(const void* owner, int device, CopyPath path, uint64_t bytes, Price&& price) {
    return last_.of(Key{owner, device, path, bytes}, [&] { return price(); });
  }

 private:
  struct Key {
    const void* owner = nullptr;
    int device = -1;
    CopyPath path{};
    uint64_t bytes = 0;
    bool operator==(const Key&) const = default;
  };
  LastAnswer<Key, double> last_;
};

}  // namespace vgpu::pt
