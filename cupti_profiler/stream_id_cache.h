// Which CUPTI stream (context id, stream id) a launch's context and stream handle are, asked of
// CUPTI once per stream and remembered. The special handles are normalized first: 0 (the
// context's NULL stream, or the calling thread's per-thread default stream for _ptsz entry points),
// CU_STREAM_LEGACY and CU_STREAM_PER_THREAD. A per-thread default stream is a different stream on
// every host thread, so its ids are remembered per thread (in thread-local storage, which dies with
// the thread: a new thread never sees an old thread's stream).
//
// CUPTI-free (the question is asked through `Resolve`), so it is tested without CUPTI.
// Thread-safe; `Resolve` is called without any lock held.
#pragma once

#include "cupti_profiler/stream_order_matcher.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace vgpu::cupti {

class StreamIdCache {
 public:
  // Asks CUPTI about `stream` of `context`: a real handle, or null for the context's NULL stream
  // (the calling thread's per-thread default stream when `per_thread`). False: CUPTI cannot say.
  using Resolve = std::function<bool(void* context, void* stream, bool per_thread, StreamKey* out)>;

  // `capacity`: streams remembered at most (all are forgotten when it is reached: a program that
  // creates streams without destroying them, or a caller that never calls forget_stream).
  explicit StreamIdCache(Resolve resolve, size_t capacity = 4096);

  // `stream` and `per_thread_default` as in KernelLaunch.
  bool lookup(void* context, void* stream, bool per_thread_default, StreamKey* out);

  // The handle may now be reused for another stream (whatever `context` is given: a real handle
  // is one stream).
  void forget_stream(void* context, void* stream);
  // The context's NULL and per-thread streams (those of all threads); real handles are asked again.
  void forget_context(void* context);

  // How often Resolve was called (for tests: proves the cache works).
  uint64_t resolutions() const { return resolutions_.load(std::memory_order_relaxed); }
  size_t size() const;

 private:
  struct Key {
    void* context;  // null for a real handle
    void* stream;   // null for a context's NULL stream
    bool operator==(const Key& o) const { return context == o.context && stream == o.stream; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<void*>()(k.context) * 31 + std::hash<void*>()(k.stream);
    }
  };

  bool resolve(void* context, void* stream, bool per_thread, StreamKey* out);
  bool lookup_per_thread(void* context, StreamKey* out);

  Resolve resolve_;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<Key, StreamKey, KeyHash> shared_;  // real handles and NULL streams
  // Changes on forget_context; entries cached under an older one are stale. Unique over all caches
  // of the process, so a thread's entries never pass for another cache's.
  std::atomic<uint64_t> generation_;
  std::atomic<uint64_t> resolutions_{0};
};

}  // namespace vgpu::cupti
