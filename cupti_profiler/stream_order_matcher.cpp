#include "cupti_profiler/stream_order_matcher.h"

#include <algorithm>

namespace vgpu::cupti {

uint64_t kernel_name_hash(std::string_view name) {
  if (name.empty()) return 0;
  // FNV-1a: names are compared, not stored, and a 64-bit hash of a few thousand kernel names
  // does not collide in practice (a collision would also need equal grid and block).
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

bool KernelShape::matches(const KernelShape& other) const {
  if (name_hash != 0 && other.name_hash != 0 && name_hash != other.name_hash) return false;
  return std::equal(grid, grid + 3, other.grid) && std::equal(block, block + 3, other.block);
}

StreamOrderMatcher::StreamOrderMatcher(const Limits& limits) : limits_(limits) {
  limits_.window = std::max<size_t>(limits_.window, 1);
  limits_.scan = std::max<size_t>(limits_.scan, 1);
}

void StreamOrderMatcher::expect(StreamKey stream, const KernelShape& shape, uint64_t tag) {
  streams_[stream.packed()].push_back({shape, tag, next_seq_++, 0});
  ++pending_;
  // Streams nobody reports on again (destroyed, or their kernels lost) are cleaned here.
  if (next_seq_ % limits_.window == 0) sweep();
}

bool StreamOrderMatcher::cancel(StreamKey stream, uint64_t tag) {
  auto it = streams_.find(stream.packed());
  if (it == streams_.end()) return false;
  Queue& q = it->second;
  for (auto a = q.rbegin(); a != q.rend(); ++a) {
    if (a->tag != tag) continue;
    q.erase(std::next(a).base());
    --pending_;
    if (q.empty()) streams_.erase(it);
    return true;
  }
  return false;
}

bool StreamOrderMatcher::on_kernel(StreamKey stream, const KernelShape& shape, uint64_t start_ns,
                                   uint64_t end_ns, std::vector<Completed>& out) {
  auto it = streams_.find(stream.packed());
  if (it == streams_.end()) {
    ++unannounced_;
    return false;
  }
  Queue& q = it->second;
  expire_front(q);
  const size_t n = std::min(q.size(), limits_.scan);
  size_t i = 0;
  while (i < n && !q[i].shape.matches(shape)) ++i;
  if (i == n) {
    ++unannounced_;
    if (q.empty()) streams_.erase(it);
    return false;
  }

  out.push_back({q[i].tag, OpKind::kernel, start_ns, end_ns, stream.stream_id});
  ++matched_;
  // Everything announced before it on this stream should have completed first: each was
  // overtaken once more. Survivors keep their order at the front.
  size_t kept = 0;
  for (size_t j = 0; j < i; ++j) {
    if (++q[j].overtaken > limits_.overtake_tolerance) {
      ++dropped_;
    } else {
      q[kept++] = q[j];
    }
  }
  q.erase(q.begin() + static_cast<std::ptrdiff_t>(kept), q.begin() + static_cast<std::ptrdiff_t>(i + 1));
  pending_ -= i + 1 - kept;
  if (q.empty()) streams_.erase(it);
  return true;
}

void StreamOrderMatcher::expire_front(Queue& q) {
  // Announcement order is kept within a queue, so the oldest are at its front.
  while (!q.empty() && q.front().seq + limits_.window < next_seq_) {
    q.pop_front();
    --pending_;
    ++dropped_;
  }
}

void StreamOrderMatcher::sweep() {
  for (auto it = streams_.begin(); it != streams_.end();) {
    expire_front(it->second);
    it = it->second.empty() ? streams_.erase(it) : std::next(it);
  }
}

}  // namespace vgpu::cupti
