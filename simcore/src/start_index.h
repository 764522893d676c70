// A link's flows sorted by start time: (start, slot) pairs. The simulator appends as a sweep
// starts flows (nearly always at the end) and removes them as they are retired (nearly always
// near the front, in finish order), so a removal shifts whichever side of the vector is shorter:
// removing the oldest entries costs O(1), not a move of every later one.
// Searches start where the wanted entry nearly always is: a search for "after time t" during a
// sweep looks from the back (t is about the latest start), a removal in finish order looks at the
// front. Only a miss there falls back to a binary search, whose probes are cache misses on a
// long index (a 2048-GPU ring spent a quarter of its time in them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "simcore/engine.h"

namespace simcore::detail {

class StartIndex {
 public:
  using Entry = std::pair<Time, uint32_t>;

  Entry* begin() { return v_.data() + head_; }
  Entry* end() { return v_.data() + v_.size(); }
  const Entry* begin() const { return v_.data() + head_; }
  const Entry* end() const { return v_.data() + v_.size(); }
  bool empty() const { return head_ == v_.size(); }
  // A copy kept beside the vector's pointers: an append compares with it, and reading it from
  // the vector's buffer was a cache miss per link for every flow of a large ring.
  const Entry& back() const { return back_; }

  void push_back(const Entry& e) {
    v_.push_back(e);
    back_ = e;
  }

  // The first entry > e (as std::upper_bound), probing the last few entries first.
  Entry* upper_bound(const Entry& e) {
    Entry* p = end();
    for (int probes = 0; probes < kProbes; ++probes) {
      if (p == begin() || !(e < *(p - 1))) return p;
      --p;
    }
    return std::upper_bound(begin(), p, e);
  }
  // The first entry >= e (as std::lower_bound), probing the last few entries first.
  Entry* lower_bound(const Entry& e) {
    Entry* p = end();
    for (int probes = 0; probes < kProbes; ++probes) {
      if (p == begin() || *(p - 1) < e) return p;
      --p;
    }
    return std::lower_bound(begin(), p, e);
  }
  // The entry equal to e, or end(); looks at the front first (removals come in finish order).
  Entry* find(const Entry& e) {
    if (!empty() && *begin() == e) return begin();
    Entry* it = lower_bound(e);
    return it != end() && *it == e ? it : end();
  }
  void insert(const Entry* at, const Entry& e) {
    v_.insert(v_.begin() + (at - v_.data()), e);
    back_ = v_.back();
  }
  void erase(Entry* at) {
    if (at + 1 == end() && at != begin()) back_ = *(at - 1);
    const size_t before = static_cast<size_t>(at - begin());
    if (before < static_cast<size_t>(end() - at)) {
      std::move_backward(begin(), at, at + 1);
      ++head_;
      if (head_ == v_.size()) {
        v_.clear();
        head_ = 0;
      } else if (head_ >= 64 && 2 * head_ >= v_.size()) {
        v_.erase(v_.begin(), v_.begin() + static_cast<long>(head_));
        head_ = 0;
      }
    } else {
      v_.erase(v_.begin() + (at - v_.data()));
    }
  }
  size_t memory_bytes() const { return v_.capacity() * sizeof(Entry); }

 private:
  static constexpr int kProbes = 4;
  std::vector<Entry> v_;
  size_t head_ = 0;  // entries before it are gone
  Entry back_{};     // the last entry, when not empty
};

}  // namespace simcore::detail
