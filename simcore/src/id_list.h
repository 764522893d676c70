// A short list of event ids: an event's dependencies or its dependents. Two fit inline (a ring
// step's flow has two of each); more spill to the heap. boost's small_vector appended through
// an out-of-line call of ~27 instructions, four per ring flow at submission (3% of a ring's
// instructions); this one appends inline.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "simcore/engine.h"

namespace simcore::detail {

class IdList {
 public:
  static constexpr uint32_t kInline = 2;

  IdList() = default;
  IdList(IdList&& o) noexcept { take(o); }
  IdList& operator=(IdList&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  IdList(const IdList&) = delete;
  IdList& operator=(const IdList&) = delete;
  ~IdList() { release(); }

  EventId* begin() { return spilled() ? heap_ : inline_; }
  EventId* end() { return begin() + size_; }
  const EventId* begin() const { return spilled() ? heap_ : inline_; }
  const EventId* end() const { return begin() + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }

  void push_back(EventId id) {
    if (size_ == cap_) [[unlikely]] grow();
    begin()[size_++] = id;
  }
  // Keeps a spilled buffer (as small_vector does); Record::clear() drops it.
  void clear() { size_ = 0; }
  // Removes every entry equal to `id` (order of the rest kept).
  void remove_all(EventId id) {
    EventId* out = std::remove(begin(), end(), id);
    size_ = static_cast<uint32_t>(out - begin());
  }

 private:
  bool spilled() const { return cap_ > kInline; }
  [[gnu::noinline]] void grow() {
    const uint32_t cap = 2 * cap_;
    EventId* heap = new EventId[cap];
    std::copy(begin(), end(), heap);
    release();
    heap_ = heap;
    cap_ = cap;
  }
  void release() {
    if (spilled()) delete[] heap_;
  }
  void take(IdList& o) {
    size_ = o.size_;
    cap_ = o.cap_;
    if (o.spilled()) heap_ = o.heap_;
    else std::copy(o.inline_, o.inline_ + o.size_, inline_);
    o.size_ = 0;
    o.cap_ = kInline;
  }

  union {
    EventId inline_[kInline] = {};
    EventId* heap_;
  };
  uint32_t size_ = 0, cap_ = kInline;
};

}  // namespace simcore::detail
