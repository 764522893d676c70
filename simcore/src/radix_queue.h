// A monotone priority queue on virtual time (a radix heap), for the simulator's event queue and
// its finish order. Both only ever take out items in non-decreasing time: the sweep moves
// forward, and the floor only rises. A binary heap pays log(size) cache-missing levels on every
// push and pop; here an item is appended to one of 65 buckets by the highest bit in which its
// time differs from the current instant's, and moves to a lower bucket only when that bucket is
// emptied, so every operation is an append or a sequential scan.
//
// Items at the current instant sit in one FIFO per kind: they come out by kind, then in the
// order they were pushed (the order a binary heap on (time, kind, push count) gives).
// An item pushed with a time before the current instant is due at once: it joins the current
// instant (the simulator handles everything at the instant it pops it, whatever its time).
// restart() (on an empty queue) forgets the current instant, so that a new sweep can start in the
// past of the previous one. When the queue runs empty within a sweep, a push before the current
// instant makes its time the current one.
//
// Item needs `double t` (>= 0) and `uint8_t kind` (< Kinds).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

#include "grow_array.h"

namespace simcore::detail {

template <class Item, int Kinds>
class RadixQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  // Precondition: empty(). The next instant may lie anywhere (a new sweep, maybe in the past).
  void restart() { last_ = 0; }

  void push(Item item) {
    uint64_t k = key(item.t);
    if (size_ == 0 && k < last_) last_ = k;  // a new sweep, in the past of the last one
    if (k <= last_) {
      k = last_;
      item.t = std::bit_cast<double>(last_);
      now_[item.kind].items.push_back(item);
      nonempty_ |= 1u << item.kind;
    } else {
      put(bucket(k), Entry{k, item});
    }
    ++size_;
  }

  // Items left at the current instant (top() and pop() would not move to a later one).
  bool has_current() const { return nonempty_ != 0; }

  // The item k places after top() in its FIFO (the same kind at the current instant), or
  // nullptr: for prefetching what the items coming up will touch. Moves no instant.
  const Item* peek_ahead(size_t k) const {
    if (nonempty_ == 0) return nullptr;
    const Fifo& f = now_[std::countr_zero(nonempty_)];
    return f.head + k < f.items.size() ? &f.items[f.head + k] : nullptr;
  }

  // Precondition: !empty(). Moves to the next instant when the current one is exhausted: a
  // later push before it then joins that instant (so the sweep peeks only between instants).
  const Item& top() {
    const int kind = current_kind();
    return now_[kind].items[now_[kind].head];
  }
  void pop() {
    const int kind = current_kind();
    Fifo& f = now_[kind];
    if (++f.head == f.items.size()) {
      f.items.clear();
      f.head = 0;
      nonempty_ &= ~(1u << kind);
    }
    --size_;
  }

  // Keeps only the items `keep` accepts (order among the kept ones is unchanged).
  template <class Keep> void filter(Keep&& keep) {
    size_t n = 0;
    for (Fifo& f : now_) {
      size_t w = 0;
      for (size_t i = f.head; i < f.items.size(); ++i)
        if (keep(f.items[i])) f.items[w++] = f.items[i];
      f.items.resize(w);
      f.head = 0;
      n += w;
    }
    nonempty_ = 0;
    for (int i = 0; i < Kinds; ++i)
      if (!now_[i].empty()) nonempty_ |= 1u << i;
    full_buckets_ = 0;
    for (int i = 1; i < static_cast<int>(buckets_.size()); ++i) {
      auto& b = buckets_[i];
      size_t w = 0;
      for (const Entry& e : b)
        if (keep(e.item)) b[w++] = e;
      b.resize(w);
      n += w;
      if (w > 0) full_buckets_ |= uint64_t{1} << (i - 1);
    }
    size_ = n;
  }

  size_t memory_bytes() const {
    size_t bytes = 0;
    for (const Fifo& f : now_) bytes += f.items.capacity() * sizeof(Item);
    for (const auto& b : buckets_) bytes += b.capacity() * sizeof(Entry);
    return bytes;
  }

 private:
  struct Entry {
    uint64_t key;
    Item item;
  };
  // A bucket or a FIFO (grow_array.h): appending entries is most of what the queue does: a
  // rollback's sweep moves each item down 3-4 buckets, and a large ring's instant appends a few
  // thousand items to the FIFOs.
  using Bucket = GrowArray<Entry>;
  struct Fifo {
    GrowArray<Item> items;
    size_t head = 0;
    bool empty() const { return head == items.size(); }
  };

  // Non-negative doubles order like their bit patterns (-0 and anything below 0 count as 0).
  static uint64_t key(double t) { return t > 0 ? std::bit_cast<uint64_t>(t) : 0; }
  int bucket(uint64_t k) const { return 64 - std::countl_zero(k ^ last_); }

  // The lowest kind with items at the current instant (a bit per non-empty FIFO: the sweep asks
  // this twice per item, and scanning the FIFOs was a tenth of its instructions).
  int current_kind() {
    while (nonempty_ == 0) advance();
    return std::countr_zero(nonempty_);
  }

  // The current instant is exhausted: the smallest time in the lowest non-empty bucket becomes
  // current, and that bucket's items move down (those at the new instant into the FIFOs).
  void advance() {
    const int b = 1 + std::countr_zero(full_buckets_);
    full_buckets_ &= full_buckets_ - 1;  // b is the lowest: its items all move down
    Bucket& from = buckets_[b];
    uint64_t least = from[0].key;
    for (const Entry& e : from) least = std::min(least, e.key);
    last_ = least;
    // In place: every item here agrees with the new instant above bit b - 1 (both lie in
    // bucket b), so each goes to a lower bucket and none back here. (Swapping the bucket with a
    // scratch array, as before, passed buffers from bucket to bucket: a bucket left with a
    // small one grew it again, copying, and the rollback benchmark spent ~1.7% of its
    // instructions in those copies and their allocations.)
    for (const Entry& e : from) {
      if (e.key == last_) {
        now_[e.item.kind].items.push_back(e.item);
        nonempty_ |= 1u << e.item.kind;
      } else put(bucket(e.key), e);
    }
    from.clear();
  }

  std::array<Fifo, Kinds> now_;
  void put(int b, const Entry& e) {
    buckets_[b].push_back(e);
    full_buckets_ |= uint64_t{1} << (b - 1);
  }

  std::array<Bucket, 65> buckets_;  // 1..64 (0: the current instant, in now_)
  uint64_t full_buckets_ = 0;  // bit b - 1: buckets_[b] has items (advance() skips to the lowest)
  uint64_t last_ = 0;
  size_t size_ = 0;
  uint32_t nonempty_ = 0;  // bit i: now_[i] has items
  static_assert(Kinds <= 32);
};

}  // namespace simcore::detail
