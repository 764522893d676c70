// Where a flow group's arrays written once at its submission live (flow_group.h: members,
// dependencies, their links): blocks handed out in submission order from 64 KiB slabs, a slab
// reused whole once every block in it was released.
//
// Why: a 4096-GPU ring retires a group ~90 steps after its submission, and the next group
// took the retired entry's own arrays (group_pool.h keeps them with the entry): their lines
// had not been touched since, so every submission wrote a group's members and dependencies
// into scattered cold lines, a miss per line that only a fetch issued when the group retired
// could hide (and those fetches, a dozen lines a group, queued behind each other). Here a
// step's arrays are written one after the other, where the hardware's stream prefetcher finds
// them, and releasing a block reads and writes nothing in it (a free list writes its link
// into the block: a cold line again), only its slab's count, kept apart.
// Blocks of a slab are released roughly together (a ring's groups retire about in the order
// they were submitted), so slabs come free; a block that lives on keeps its slab (one 64 KiB
// slab for each such straggler at worst). Blocks over kLargest go to operator new, listed
// until released, as in GroupPool.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>
#include <unordered_set>
#include <vector>

#include "mapped_region.h"

namespace simcore::detail {

class LogPool {
 public:
  LogPool() = default;
  LogPool(const LogPool&) = delete;
  LogPool& operator=(const LogPool&) = delete;
  ~LogPool() {
    for (const auto& [p, bytes] : maps_) unmap(p, bytes);
    for (void* p : large_) ::operator delete(p, std::align_val_t{kAlign});
    for (const Counts& c : counts_) std::free(c.live);
  }

  void* allocate(size_t bytes) {
    if (bytes > kLargest) {
      void* p = ::operator new(bytes, std::align_val_t{kAlign});
      large_.insert(p);
      return p;
    }
    const size_t n = (bytes + kAlign - 1) & ~(kAlign - 1);
    if (bump_ == nullptr || kSlab - offset_ < n) next_slab();
    void* p = bump_ + offset_;
    offset_ += n;
    ++*bump_live_;
    return p;
  }
  void deallocate(void* p, size_t bytes) {
    if (bytes > kLargest) {
      large_.erase(p);
      ::operator delete(p, std::align_val_t{kAlign});
      return;
    }
    if (closing_ || p == nullptr) return;  // (closing: the slabs go as a whole)
    std::byte* s = slab_of(p);
    if (--live_of(s) == 0 && s != bump_) free_.push_back(s);
  }
  // Slabs mapped from now on are advised for huge pages (EngineOptions::huge_pages).
  void set_huge_pages(bool on) { huge_pages_ = on; }
  // From now on, releasing a block does nothing (the owner is being torn down).
  void close() { closing_ = true; }
  // Memory held in slabs (blocks in use, released blocks in slabs still in use, free slabs).
  size_t bytes() const {
    return slabs_.size() * kSlab + slabs_.capacity() * sizeof(std::byte*) + free_.capacity() * sizeof(std::byte*);
  }
  size_t slabs() const { return slabs_.size(); }

 private:
  static constexpr size_t kAlign = 16;
  static constexpr size_t kSlab = size_t{64} << 10;  // slabs are aligned to their size
  static constexpr size_t kLargest = 4096;
  // Each slab's count of blocks not released, in tables by address, apart from the slabs: a
  // count kept in its slab was a miss at nearly every release (the blocks a step retires lie
  // in a hundred slabs, whose lines the step's other work evicts), where a slab's 4 bytes here
  // stay cached. A table covers 2^16 slabs (4 GiB of address space), zeroed by the system as
  // its pages are first touched (calloc of 256 KiB maps fresh pages).
  struct Counts {
    uintptr_t top;
    uint32_t* live;
  };
  static constexpr size_t kPerTable = size_t{1} << 16;
  uint32_t& live_of(const std::byte* slab) {
    const uintptr_t key = reinterpret_cast<uintptr_t>(slab) / kSlab;
    const uintptr_t top = key / kPerTable;
    for (const Counts& c : counts_)
      if (c.top == top) return c.live[key % kPerTable];
    auto* live = static_cast<uint32_t*>(std::calloc(kPerTable, sizeof(uint32_t)));
    if (live == nullptr) throw std::bad_alloc();
    counts_.push_back(Counts{top, live});
    return live[key % kPerTable];
  }
  static std::byte* slab_of(void* p) {
    return reinterpret_cast<std::byte*>(reinterpret_cast<uintptr_t>(p) & ~(uintptr_t{kSlab} - 1));
  }
  void next_slab() {
    // The slab left behind goes back as soon as its last block does (deallocate()), or now.
    if (bump_ != nullptr && *bump_live_ == 0) free_.push_back(bump_);
    if (!free_.empty()) {
      bump_ = free_.back();
      free_.pop_back();
    } else {
      bump_ = new_slab();
    }
    bump_live_ = &live_of(bump_);
    *bump_live_ = 0;
    offset_ = 0;
  }

  // Slabs come from the system kSlabsMapped at a time, in a mapping aligned to 2 MiB
  // (mapped_region.h: so aligned to a slab too; a vgpu-netsim run that reclaims nothing grew by
  // 5 bytes a flow when slabs came from malloc, aligned there with a gap before each).
  static constexpr size_t kSlabsMapped = 64;
  std::byte* new_slab() {
    if (mapped_left_ == 0) {
      const size_t bytes = kSlabsMapped * kSlab;
      void* m = map_aligned(bytes, std::max(kSlab, kMappingAlign), huge_pages_);
      maps_.emplace_back(m, bytes);
      mapped_next_ = static_cast<std::byte*>(m);
      mapped_left_ = kSlabsMapped;
    }
    std::byte* s = mapped_next_;
    if (!huge_pages_) populate(s, kSlab);  // written from now on, block after block (mapped_region.h)
    mapped_next_ += kSlab;
    --mapped_left_;
    slabs_.push_back(s);
    return s;
  }

  std::vector<std::pair<void*, size_t>> maps_;
  std::byte* mapped_next_ = nullptr;
  size_t mapped_left_ = 0;
  std::byte* bump_ = nullptr;  // the slab blocks come from now
  uint32_t* bump_live_ = nullptr;  // its count
  size_t offset_ = 0;
  std::vector<Counts> counts_;
  std::vector<std::byte*> slabs_;  // every slab made
  std::vector<std::byte*> free_;   // slabs with no block in use (not bump_)
  std::unordered_set<void*> large_;
  bool closing_ = false;
  bool huge_pages_ = false;
};

}  // namespace simcore::detail
