// An append-only array in fixed chunks: elements never move once created, so growing it costs
// one allocation per chunk instead of relocating every element (a 1 GiB ring all-reduce over
// 1024 GPUs submitted at once keeps 2.1 M 256-byte records live: a vector relocated about
// 1 GB of them while doubling, and faulted in each new copy). Chunks of 256 elements: an engine
// whose floors keep a few dozen events live holds one 64 KiB chunk, not more.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace simcore::detail {

template <class T, int kShift = 8>
class ChunkedStore {
 public:
  static constexpr size_t kChunk = size_t{1} << kShift;

  T& operator[](size_t i) { return chunks_[i >> kShift][i & (kChunk - 1)]; }
  const T& operator[](size_t i) const { return chunks_[i >> kShift][i & (kChunk - 1)]; }
  size_t size() const { return size_; }
  size_t capacity() const { return chunks_.size() * kChunk; }

  // A value-initialized element at index size().
  T& emplace_back() {
    if (size_ == capacity()) chunks_.push_back(std::make_unique<T[]>(kChunk));
    return (*this)[size_++];
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace simcore::detail
