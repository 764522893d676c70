// An array that only grows, of entries copied bit for bit, whose large blocks are brought into
// memory a stretch at a time (the radix queue's buckets and FIFOs, the index of moving groups).
//
// Why not std::vector: its push_back was not inlined where the queue appends (its growth path
// came with it), and appending is most of what the queue does. Why raw storage: `new T[cap]`
// ran the default member initializers of every entry (a FinishEntry's kind), writing the whole
// new block at once and keeping its unused half resident. Why stretches: a whole 1024-GPU ring
// submitted before one query grows its finish order to 2^22 entries and its group index to
// hundreds of thousands; each first write of a fresh page was a fault of its own (~10 us on the
// virtual machines the benchmarks run on, against ~0.8 us a page brought in by one
// MADV_POPULATE_WRITE: mapped_region.h). So once a block is large, the pages of the next
// kStretch bytes are brought in together as appends reach them; the fast path's one comparison
// (against `limit_`, the end of what is brought in, not the capacity) stays as it was, and no
// page is made resident before an append reaches it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "mapped_region.h"

namespace simcore::detail {

template <class T>
class GrowArray {
  static_assert(std::is_trivially_copy_constructible_v<T> && std::is_trivially_destructible_v<T>);

 public:
  GrowArray() = default;
  // A moved-from array is empty (its counts go with its block: appending to it then grows anew).
  GrowArray(GrowArray&& o) noexcept
      : data_(std::move(o.data_)),
        size_(std::exchange(o.size_, 0)),
        cap_(std::exchange(o.cap_, 0)),
        limit_(std::exchange(o.limit_, 0)) {}
  GrowArray& operator=(GrowArray&& o) noexcept {
    data_ = std::move(o.data_);
    size_ = std::exchange(o.size_, 0);
    cap_ = std::exchange(o.cap_, 0);
    limit_ = std::exchange(o.limit_, 0);
    return *this;
  }

  void push_back(const T& e) {
    if (size_ == limit_) [[unlikely]] make_room();
    ::new (static_cast<void*>(data_.get() + size_++)) T(e);
  }
  T* begin() { return data_.get(); }
  T* end() { return data_.get() + size_; }
  const T* begin() const { return data_.get(); }
  const T* end() const { return data_.get() + size_; }
  T& operator[](size_t i) { return data_.get()[i]; }
  const T& operator[](size_t i) const { return data_.get()[i]; }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  bool empty() const { return size_ == 0; }
  void clear() { size_ = 0; }
  void resize(size_t n) { size_ = std::min(n, size_); }  // never more than size()

  // Blocks from this size on are brought in a stretch at a time.
  static constexpr size_t kLargeBlock = size_t{256} << 10;
  static constexpr size_t kStretch = size_t{64} << 10;

 private:
  static bool large(size_t entries) { return entries * sizeof(T) >= kLargeBlock; }
  [[gnu::noinline]] void make_room() {
    if (size_ == cap_) grow();
    if (!large(cap_)) {
      limit_ = cap_;
      return;
    }
    limit_ = std::min(cap_, size_ + std::max<size_t>(1, kStretch / sizeof(T)));
    populate(data_.get() + size_, (limit_ - size_) * sizeof(T));
  }
  void grow() {
    const size_t cap = cap_ == 0 ? 8 : 2 * cap_;
    Storage data(static_cast<T*>(::operator new(cap * sizeof(T), std::align_val_t{alignof(T)})));
    if (large(cap)) populate(data.get(), size_ * sizeof(T));  // the pages the copy writes
    std::uninitialized_copy(begin(), end(), data.get());
    data_ = std::move(data);
    cap_ = cap;
  }
  struct Free {
    void operator()(T* p) const { ::operator delete(p, std::align_val_t{alignof(T)}); }
  };
  using Storage = std::unique_ptr<T, Free>;
  Storage data_;
  size_t size_ = 0, cap_ = 0;
  size_t limit_ = 0;  // appends up to here need nothing done first (<= cap_)
};

}  // namespace simcore::detail
