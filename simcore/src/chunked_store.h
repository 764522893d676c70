// An append-only array in fixed chunks: elements never move once created, so growing it costs
// one chunk instead of relocating every element (a 1 GiB ring all-reduce over 1024 GPUs
// submitted at once keeps 2.1 M 256-byte records live: a vector relocated about 1 GB of them
// while doubling, and faulted in each new copy). Chunks of 2^kShift elements come from a
// BlockPool (block_pool.h: no relocation, so a 4096-GPU ring's 60 MB of group handles is
// faulted in once, not again at every doubling), the first one when the first element is made.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "block_pool.h"

namespace simcore::detail {

template <class T, int kShift = 8>
class ChunkedStore {
 public:
  static constexpr size_t kChunk = size_t{1} << kShift;
  static_assert(alignof(T) <= 64);  // (the pool's blocks are aligned to 64 bytes)

  ChunkedStore() = default;
  ChunkedStore(const ChunkedStore&) = delete;
  ChunkedStore& operator=(const ChunkedStore&) = delete;
  ~ChunkedStore() {
    for (T* c : chunks_) std::destroy_n(c, kChunk);
  }

  void set_huge_pages(bool on) { pool_.set_huge_pages(on); }

  T& operator[](size_t i) { return chunks_[i >> kShift][i & (kChunk - 1)]; }
  const T& operator[](size_t i) const { return chunks_[i >> kShift][i & (kChunk - 1)]; }
  size_t size() const { return size_; }
  size_t capacity() const { return chunks_.size() * kChunk; }

  // A value-initialized element at index size().
  T& emplace_back() {
    if (size_ == capacity()) {
      T* c = static_cast<T*>(pool_.allocate());
      std::uninitialized_value_construct_n(c, kChunk);
      chunks_.push_back(c);
    }
    return (*this)[size_++];
  }

 private:
  BlockPool pool_{kChunk * sizeof(T)};
  std::vector<T*> chunks_;
  size_t size_ = 0;
};

}  // namespace simcore::detail
