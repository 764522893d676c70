// (start, slot) entries kept sorted only when asked: an append to add, a count to remove.
//
// Why: the index of moving flow groups (Simulator::groups_by_start_) is written for every group
// and read only when a rollback reaches a link where a simulated group moved. A large ring adds
// a group every dozen flows and never reads the index (its links' group bounds settle every
// question first); a tree (a node and a cache-missing descent per group) was a tenth of a
// 2048-GPU ring, a vector kept sorted much worse (the drifting ring inserts far from the end).
// So entries are appended unsorted, removals only counted (the owner tells a stale entry by
// its record), and the whole is sorted, merged and cleared of stale entries the first time a
// search needs it after a change.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "grow_array.h"
#include "simcore/engine.h"

namespace simcore::detail {

class LazyStartIndex {
 public:
  using Entry = std::pair<Time, uint32_t>;

  void insert(const Entry& e) { v_.push_back(e); }

  // The owner made one entry stale. `live(e)` tells a live entry; stale ones are dropped once
  // they are as many as the live ones (and at least kSlack), so memory stays within twice.
  template <class Live> void erase(Live&& live) {
    if (++stale_ < kSlack || 2 * stale_ < v_.size()) return;
    compact(live);
  }

  // Every live entry, sorted by (start, slot), each once.
  template <class Live> std::span<const Entry> sorted(Live&& live) {
    if (stale_ != 0) compact(live);
    if (sorted_ < v_.size()) {
      const auto mid = v_.begin() + static_cast<std::ptrdiff_t>(sorted_);
      std::sort(mid, v_.end());
      std::inplace_merge(v_.begin(), mid, v_.end());
      // A slot reused by a group starting at the same time makes a stale entry equal to a
      // live one.
      v_.resize(static_cast<size_t>(std::unique(v_.begin(), v_.end()) - v_.begin()));
      sorted_ = v_.size();
    }
    return {v_.begin(), v_.end()};
  }

  size_t memory_bytes() const { return v_.capacity() * sizeof(Entry); }

 private:
  static constexpr size_t kSlack = 1024;

  // Keeps the live entries in their order (the sorted prefix stays sorted).
  template <class Live> void compact(Live&& live) {
    size_t keep = 0, keep_sorted = 0;
    for (size_t i = 0; i < v_.size(); ++i) {
      if (!live(v_[i])) continue;
      v_[keep++] = v_[i];
      if (i < sorted_) keep_sorted = keep;
    }
    v_.resize(keep);
    sorted_ = keep_sorted;
    stale_ = 0;
  }

  GrowArray<Entry> v_;  // (a whole ring submitted before one query: hundreds of thousands)
  size_t sorted_ = 0;  // entries before it are sorted
  size_t stale_ = 0;   // removals counted since the last compaction
};

}  // namespace simcore::detail
