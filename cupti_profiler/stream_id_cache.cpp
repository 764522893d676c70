#include "stream_id_cache.h"

#include "common/log.h"

namespace vgpu::cupti {
namespace {

// cuda.h's special stream handles.
void* const kStreamLegacy = reinterpret_cast<void*>(1);
void* const kStreamPerThread = reinterpret_cast<void*>(2);

uint64_t new_generation() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

// The calling thread's per-thread default streams, a few contexts' worth. Plain data: no
// destructor to register, and it dies with its thread (the stream does too).
struct PerThreadEntry {
  uint64_t generation;  // 0: empty
  void* context;
  StreamKey key;
};
constexpr int kPerThreadEntries = 4;
thread_local PerThreadEntry t_per_thread[kPerThreadEntries];
thread_local unsigned t_per_thread_next;

}  // namespace

StreamIdCache::StreamIdCache(Resolve resolve, size_t capacity)
    : resolve_(std::move(resolve)), capacity_(capacity == 0 ? 1 : capacity), generation_(new_generation()) {}

bool StreamIdCache::resolve(void* context, void* stream, bool per_thread, StreamKey* out) {
  resolutions_.fetch_add(1, std::memory_order_relaxed);
  try {
    return resolve_ && resolve_(context, stream, per_thread, out);
  } catch (...) {
    return false;
  }
}

bool StreamIdCache::lookup(void* context, void* stream, bool per_thread_default, StreamKey* out) {
  bool per_thread = false;
  if (stream == kStreamLegacy) {
    stream = nullptr;
  } else if (stream == kStreamPerThread) {
    stream = nullptr;
    per_thread = true;
  } else if (stream == nullptr) {
    per_thread = per_thread_default;
  }
  if (stream == nullptr && per_thread) return lookup_per_thread(context, out);

  // A real handle names one stream whatever context is current; a NULL stream is per context.
  const Key key{stream == nullptr ? context : nullptr, stream};
  uint64_t generation;
  {
    std::lock_guard lock(mutex_);
    if (auto it = shared_.find(key); it != shared_.end()) {
      *out = it->second;
      return true;
    }
    generation = generation_.load(std::memory_order_relaxed);
  }
  StreamKey found;
  if (!resolve(context, stream, false, &found)) return false;
  std::lock_guard lock(mutex_);
  // A forget_context meanwhile: the answer may be of the dying context; use it, do not keep it.
  if (generation == generation_.load(std::memory_order_relaxed)) {
    if (shared_.size() >= capacity_) {
      log::once(log::Level::warn, "cupti.stream_cache",
                "cupti: many streams never destroyed (or forget_stream not called); stream id cache reset");
      shared_.clear();
    }
    shared_.emplace(key, found);
  }
  *out = found;
  return true;
}

bool StreamIdCache::lookup_per_thread(void* context, StreamKey* out) {
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  for (const PerThreadEntry& e : t_per_thread) {
    if (e.generation == generation && e.context == context) {
      *out = e.key;
      return true;
    }
  }
  StreamKey found;
  if (!resolve(context, nullptr, true, &found)) return false;
  t_per_thread[t_per_thread_next++ % kPerThreadEntries] = {generation, context, found};
  *out = found;
  return true;
}

void StreamIdCache::forget_stream(void* context, void* stream) {
  if (stream == nullptr || stream == kStreamLegacy || stream == kStreamPerThread) return;
  (void)context;  // a real handle is remembered by itself (see lookup)
  std::lock_guard lock(mutex_);
  shared_.erase(Key{nullptr, stream});
}

void StreamIdCache::forget_context(void* context) {
  std::lock_guard lock(mutex_);
  // Its NULL stream; its real streams are remembered by handle alone, so all go (they are asked
  // again at their next launch, once).
  std::erase_if(shared_, [context](const auto& kv) {
    return kv.first.context == context || kv.first.stream != nullptr;
  });
  // Per-thread entries live in other threads' storage: invalidate them all.
  generation_.store(new_generation(), std::memory_order_release);
}

size_t StreamIdCache::size() const {
  std::lock_guard lock(mutex_);
  return shared_.size();
}

}  // namespace vgpu::cupti
