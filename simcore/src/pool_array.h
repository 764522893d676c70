// A flow group's array (flow_group.h): a pointer and two 32-bit counts, 16 bytes, its blocks
// drawn from one of the Simulator's pools (GroupPool, or LogPool for the arrays written once at
// submission), which every call that may allocate or free is handed: always the same one for
// one array.
//
// Why: a group entry held six arrays as std::vector with a pool allocator, 32 bytes each (the
// allocator's pool pointer and three pointers), and the entry was 272 bytes: five cache lines,
// each written when it retires and again when the next group takes it. A 4096-GPU ring makes
// ~370 groups a step and reuses every entry a step later, after ~2 MB of other state went
// through the cache; with these arrays the entry fits two lines.
//
// Elements are trivially copyable (copied with memcpy, never destroyed). Capacities grow as
// std::vector's do (twice the size, or what is asked if more; reserve() and assign() take what
// is asked), so the blocks and the memory figures stay what they were. Nothing is freed by a
// destructor: the owner releases an array (release()) or the pool goes as a whole
// (group_pool.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "group_pool.h"

namespace simcore::detail {

template <class T>
class PoolArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  static_assert(alignof(T) <= 16);

 public:
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }

  void clear() { size_ = 0; }
  template <class Pool>
  void reserve(Pool& pool, size_t n) {
    if (n > cap_) reallocate(pool, n);
  }
  // New elements are value-initialized (T{}), as std::vector::resize() makes them.
  template <class Pool>
  void resize(Pool& pool, size_t n) {
    if (n > cap_) reallocate(pool, std::max<size_t>(2 * size_, n));
    for (size_t i = size_; i < n; ++i) data_[i] = T{};
    size_ = static_cast<uint32_t>(n);
  }
  template <class Pool>
  void push_back(Pool& pool, const T& v) {
    if (size_ == cap_) reallocate(pool, std::max<size_t>(2 * size_, 1));
    data_[size_++] = v;
  }
  template <class Pool>
  T& emplace_back(Pool& pool) {
    push_back(pool, T{});
    return back();
  }
  template <class Pool>
  void assign(Pool& pool, const T* first, const T* last) {
    const size_t n = static_cast<size_t>(last - first);
    if (n > cap_) {
      release(pool);
      reallocate(pool, n);
    }
    if (n != 0) std::memcpy(data_, first, n * sizeof(T));
    size_ = static_cast<uint32_t>(n);
  }
  // [first, last) must not lie in this array.
  template <class Pool>
  void insert(Pool& pool, size_t at, const T* first, const T* last) {
    const size_t n = static_cast<size_t>(last - first);
    if (n == 0) return;
    if (size_ + n > cap_) reallocate(pool, size_ + std::max<size_t>(size_, n));
    std::memmove(data_ + at + n, data_ + at, (size_ - at) * sizeof(T));
    std::memcpy(data_ + at, first, n * sizeof(T));
    size_ += static_cast<uint32_t>(n);
  }
  void erase(size_t at) {
    std::memmove(data_ + at, data_ + at + 1, (size_ - at - 1) * sizeof(T));
    --size_;
  }
  // Back to empty with no block.
  template <class Pool>
  void release(Pool& pool) {
    if (data_ != nullptr) pool.deallocate(data_, size_t{cap_} * sizeof(T));
    data_ = nullptr;
    size_ = cap_ = 0;
  }

 private:
  template <class Pool>
  void reallocate(Pool& pool, size_t cap) {
    T* p = static_cast<T*>(pool.allocate(cap * sizeof(T)));
    if (size_ != 0) std::memcpy(p, data_, size_t{size_} * sizeof(T));
    if (data_ != nullptr) pool.deallocate(data_, size_t{cap_} * sizeof(T));
    data_ = p;
    cap_ = static_cast<uint32_t>(cap);
  }

  T* data_ = nullptr;
  uint32_t size_ = 0, cap_ = 0;
};

}  // namespace simcore::detail
