// Joins CUPTI's two halves of one tagged op: the EXTERNAL_CORRELATION record (correlation id ->
// our tag) and the kernel/memcpy/memset record (correlation id -> device timestamps). They come in
// either order, in the same buffer or in later ones, so each side waits in a bounded window for
// the other. Knows nothing of CUPTI itself, so it is tested with synthetic records.
//
// Not synchronized: the Recorder calls it under its own lock.
#pragma once

#include "cupti_profiler/recorder.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

namespace vgpu::cupti {

class CorrelationMatcher {
 public:
  // `window`: how many distinct correlation ids each side remembers (oldest forgotten first).
  explicit CorrelationMatcher(size_t window = 1u << 16);

  // CUPTI said: correlation id `correlation_id` ran inside begin_op(tag). Ops already waiting for
  // it are appended to `out`. The mapping stays (within the window) because one driver call may
  // produce several device ops, some arriving later.
  void on_tag(uint32_t correlation_id, uint64_t tag, std::vector<Completed>& out);

  // CUPTI reported a device op. Appended to `out` at once if its tag is known, else it waits.
  void on_op(uint32_t correlation_id, OpKind kind, uint64_t start_ns, uint64_t end_ns,
             std::vector<Completed>& out, uint32_t stream_id = 0);

  // The op of `correlation_id` was delivered another way (StreamOrderMatcher). Nothing is
  // delivered here for it; a tag the id has or gets (within the window) counts as a duplicate.
  void claim(uint32_t correlation_id);

  // Ops that aged out of the window without meeting a tag (calls made outside begin_op/end_op).
  uint64_t untagged_dropped() const { return untagged_dropped_; }
  size_t pending_ops() const { return pending_count_; }
  size_t known_tags() const { return tags_.size(); }
  // Claimed ids that also carried a tag.
  uint64_t duplicates() const { return duplicates_; }

 private:
  struct Op {
    OpKind kind;
    uint64_t start_ns, end_ns;
    uint32_t stream_id;
  };

  size_t window_;
  std::unordered_map<uint32_t, uint64_t> tags_;
  std::deque<uint32_t> tag_order_;  // insertion order of tags_ keys, for eviction
  std::unordered_map<uint32_t, std::vector<Op>> pending_;
  // Insertion order of pending_ keys; entries already matched are skipped when they come up.
  std::deque<uint32_t> pending_order_;
  size_t pending_count_ = 0;
  uint64_t untagged_dropped_ = 0;
  std::unordered_map<uint32_t, bool> claimed_;  // id -> its tag was already counted
  std::deque<uint32_t> claimed_order_;
  uint64_t duplicates_ = 0;
};

}  // namespace vgpu::cupti
