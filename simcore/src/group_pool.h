// Where a flow group's list of dependents lives (flow_group.h; its other arrays are in
// LogPools, log_pool.h: written in submission order, not into a free list's cold blocks):
// slabs owned by the Simulator, handed out in blocks of a multiple of 16 bytes up to 4 KiB, a
// freed block kept on its size's free list for the next group.
// (Power-of-two blocks cost the ring submitted at once a fifth more memory, and as much more
// time in first-touch page faults as the pool saved.)
//
// Why: a 1 GiB ring all-reduce over 1024 GPUs submitted at once makes ~140 k groups of five
// arrays each. Through malloc, those 700 k blocks cost a tenth of the engine's time in
// malloc and free, and tearing the engine down freed each of them again, a cold chunk header
// apiece (~50 ms of the ~0.5 s run). Here a block is a pointer bump or a free-list pop, and
// closing the pool (Simulator's destructor) makes every later release a no-op: the slabs go
// in one sweep. Larger arrays (groups of more than a few hundred members) go to operator new,
// listed until released so that the pool frees what its owner still holds when it goes (the
// arrays, pool_array.h, free nothing themselves).
// The memory held is the peak of the groups' pooled arrays until the engine goes (an engine
// whose floors keep a few steps live holds a few slabs: its groups reuse the same blocks).
// Simulator::stats() counts the slabs whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <unordered_set>
#include <vector>

namespace simcore::detail {

class GroupPool {
 public:
  GroupPool() = default;
  GroupPool(const GroupPool&) = delete;
  GroupPool& operator=(const GroupPool&) = delete;
  ~GroupPool() {
    for (std::byte* s : slabs_) ::operator delete(s, std::align_val_t{kAlign});
    for (void* p : large_) ::operator delete(p, std::align_val_t{kAlign});
  }

  void* allocate(size_t bytes) {
    const int c = size_class(bytes);
    if (c < 0) {
      void* p = ::operator new(bytes, std::align_val_t{kAlign});
      large_.insert(p);
      return p;
    }
    if (void* p = free_[c]) {
      free_[c] = *static_cast<void**>(p);
      return p;
    }
    const size_t n = class_bytes(c);
    if (left_ < n) new_slab();
    void* p = bump_;
    bump_ += n;
    left_ -= n;
    return p;
  }
  void deallocate(void* p, size_t bytes) {
    const int c = size_class(bytes);
    if (c < 0) {
      large_.erase(p);
      ::operator delete(p, std::align_val_t{kAlign});
      return;
    }
    if (closing_) return;  // the slabs go as a whole
    *static_cast<void**>(p) = free_[c];
    free_[c] = p;
  }
  // From now on, releasing a pooled block does nothing (the owner is being torn down).
  void close() { closing_ = true; }
  // Memory held in slabs (blocks in use and on free lists alike).
  size_t bytes() const { return slabs_.size() * kSlab + slabs_.capacity() * sizeof(std::byte*); }

 private:
  static constexpr size_t kAlign = 16;
  static constexpr size_t kStep = 16, kLargest = 4096;
  static constexpr int kClasses = kLargest / kStep;  // 16, 32, 48, .. 4096
  static constexpr size_t kSlab = size_t{64} << 10;

  static int size_class(size_t bytes) {
    if (bytes > kLargest) return -1;
    return bytes == 0 ? 0 : static_cast<int>((bytes - 1) / kStep);  // 1..16 -> 0, 17..32 -> 1, ...
  }
  static size_t class_bytes(int c) { return kStep * static_cast<size_t>(c + 1); }
  void new_slab() {
    // What is left of the current slab (less than a block of this size) is not used.
    bump_ = static_cast<std::byte*>(::operator new(kSlab, std::align_val_t{kAlign}));
    slabs_.push_back(bump_);
    left_ = kSlab;
  }

  void* free_[kClasses] = {};
  std::byte* bump_ = nullptr;
  size_t left_ = 0;
  std::vector<std::byte*> slabs_;
  std::unordered_set<void*> large_;  // blocks from operator new, until released
  bool closing_ = false;
};

}  // namespace simcore::detail
