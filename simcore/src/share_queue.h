// The max-min filling's queue of links by fair share (ShareKey, share_key.h): pop the smallest,
// push back a link whose share grew. Components of up to kSortedLimit links (a dense 64-GPU
// fabric's are ~90) keep a vector sorted largest first: one sort, then each pop is O(1) and the
// many links found fully frozen cost nothing, where a heap pays a sift per pop; a push back
// (about a third of the links) is a binary search and a short move. Larger components use a
// binary heap, whose push stays O(log n). Keys are unique, so both pop the same sequence.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

#include "share_key.h"

namespace simcore::detail {

class ShareQueue {
 public:
  static constexpr size_t kSortedLimit = 256;

  explicit ShareQueue(size_t sorted_limit = kSortedLimit) : sorted_limit_(sorted_limit) {}

  void clear() { v_.clear(); }
  bool empty() const { return v_.empty(); }
  size_t capacity() const { return v_.capacity(); }
  // Bulk load: append() every link, then order() once before the first pop.
  void append(ShareKey k) { v_.push_back(k); }
  void order() {
    sorted_ = v_.size() <= sorted_limit_;
    if (sorted_)
      std::sort(v_.begin(), v_.end(), std::greater<>());
    else
      std::make_heap(v_.begin(), v_.end(), std::greater<>());
  }
  const ShareKey& top() const { return sorted_ ? v_.back() : v_.front(); }
  ShareKey pop() {
    if (!sorted_) std::pop_heap(v_.begin(), v_.end(), std::greater<>());
    const ShareKey k = v_.back();
    v_.pop_back();
    return k;
  }
  void push(ShareKey k) {
    if (sorted_) {
      v_.insert(std::upper_bound(v_.begin(), v_.end(), k, std::greater<>()), k);
    } else {
      v_.push_back(k);
      std::push_heap(v_.begin(), v_.end(), std::greater<>());
    }
  }

 private:
  size_t sorted_limit_;
  bool sorted_ = true;
  std::vector<ShareKey> v_;
};

}  // namespace simcore::detail
