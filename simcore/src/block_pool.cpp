#include "block_pool.h"

#include <algorithm>

#include "mapped_region.h"

namespace simcore::detail {

// A mapping holds at least kMappingAlign bytes and 16 blocks.
BlockPool::BlockPool(size_t block_bytes)
    : block_((std::max<size_t>(block_bytes, 1) + 63) & ~size_t{63}),
      per_mapping_(std::max<size_t>(16, kMappingAlign / block_)) {}

BlockPool::~BlockPool() {
  for (const auto& [p, bytes] : maps_) unmap(p, bytes);
}

void* BlockPool::carve() {
  if (left_ == 0) {
    const size_t bytes = (per_mapping_ * block_ + kMappingAlign - 1) & ~(kMappingAlign - 1);
    void* m = map_aligned(bytes, kMappingAlign, huge_pages_);
    maps_.emplace_back(m, bytes);
    next_ = static_cast<char*>(m);
    left_ = bytes / block_;
  }
  void* p = next_;
  if (!huge_pages_) populate(p, block_);  // about to be written (mapped_region.h)
  next_ += block_;
  --left_;
  ++made_;
  return p;
}

}  // namespace simcore::detail
