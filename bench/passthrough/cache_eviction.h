// What a framework's work between two driver calls does to vgpu's data: evicts it. The call-rate
// benches (call_overhead_bench.cpp, call_loop.cpp) write one byte every `stride` bytes of a
// buffer before each timed call, through either library alike: back to back over the stand-in
// driver, vgpu's data stays in the L1 cache, while on a GPU host the real driver's call and the
// framework's work evict it (vgpu's own time there was 1.7-3.5x the stand-in's, issue 21).
// A stride of 64 touches every line; 4160 (a page and a line) one line of each page, in every
// cache set, which evicts the TLB's entries too.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

struct CacheEviction {
  CacheEviction(size_t bytes, size_t stride) : buffer(bytes), stride(std::max<size_t>(1, stride)) {}
  // Before a timed call; nothing when no eviction was asked (bytes 0).
  void touch() {
    for (size_t k = 0; k < buffer.size(); k += stride) buffer[k] = static_cast<char>(buffer[k] + 1);
  }
  std::vector<char> buffer;
  size_t stride;
};
