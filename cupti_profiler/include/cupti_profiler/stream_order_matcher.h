// Joins announced kernel launches (Recorder::expect_kernel) with CUPTI's kernel records by stream
// order: one CUDA stream runs its kernels in the order they were launched, and the launching thread
// announces each launch before forwarding it, so the first waiting announcement of a stream that
// has the record's name and shape is the record's launch. No correlation ids are involved, so it
// works for kernels the CUDA runtime launched (their records carry the runtime call's id, not the
// id of the driver call vgpu forwarded).
//
// Knows nothing of CUPTI, so it is tested with synthetic records. Not synchronized: the Recorder
// calls it under its own lock.
#pragma once

#include "cupti_profiler/recorder.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vgpu::cupti {

// A 64-bit hash of a kernel's (mangled) name; never 0 for a non-empty name, 0 for an empty one.
uint64_t kernel_name_hash(std::string_view name);

// What must agree between an announcement and a record. name_hash 0 means "name unknown" and
// matches any name.
struct KernelShape {
  uint64_t name_hash = 0;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};

  bool matches(const KernelShape& other) const;
};

// A CUPTI stream: stream ids are unique only within a context.
struct StreamKey {
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint64_t packed() const { return (uint64_t(context_id) << 32) | stream_id; }
};

class StreamOrderMatcher {
 public:
  struct Limits {
    // An announcement is forgotten (counted dropped) once this many later announcements were made,
    // over all streams: bounds memory to about twice this many announcements.
    size_t window = 1u << 16;
    // How many later kernels of its stream may overtake an announcement before it is dropped.
    size_t overtake_tolerance = 16;
    // How far into a stream's waiting announcements a record is looked for: a record that matches
    // none of the first `scan` is taken as unannounced.
    size_t scan = 256;
  };

  StreamOrderMatcher() : StreamOrderMatcher(Limits{}) {}
  explicit StreamOrderMatcher(const Limits& limits);

  // A launch of `shape` on `stream` is about to be forwarded under `tag`.
  void expect(StreamKey stream, const KernelShape& shape, uint64_t tag);

  // Forgets the newest waiting announcement of `tag` on `stream` (its launch was not made).
  // False when there is none.
  bool cancel(StreamKey stream, uint64_t tag);

  // CUPTI reported a kernel of `shape` on `stream`. When it is an announced launch, its Completed
  // is appended to `out` and true returned; false: it matched nothing (nothing is kept of it).
  bool on_kernel(StreamKey stream, const KernelShape& shape, uint64_t start_ns, uint64_t end_ns,
                 std::vector<Completed>& out);

  uint64_t matched() const { return matched_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t unannounced() const { return unannounced_; }
  size_t pending() const { return pending_; }
  size_t streams() const { return streams_.size(); }

 private:
  struct Announcement {
    KernelShape shape;
    uint64_t tag;
    uint64_t seq;        // order of announcement over all streams
    uint32_t overtaken;  // later kernels of the stream that completed before this one
  };
  using Queue = std::deque<Announcement>;

  // Drops the announcements of `q` that are older than the window (they sit at its front).
  void expire_front(Queue& q);
  // Drops every announcement older than the window, in all streams, and empty streams.
  void sweep();

  Limits limits_;
  std::unordered_map<uint64_t, Queue> streams_;  // StreamKey::packed() -> waiting, oldest first
  uint64_t next_seq_ = 0;
  size_t pending_ = 0;
  uint64_t matched_ = 0, dropped_ = 0, unannounced_ = 0;
};

}  // namespace vgpu::cupti
