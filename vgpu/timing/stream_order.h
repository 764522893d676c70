// The order of stream work: the one rule of both backends for what an op on a stream waits for.
// The sim backend's StreamManager (sim/exec/stream.cpp) hands these predecessors to simcore's
// engine as a task's `after`; the passthrough's VirtualTimeline (passthrough/virtual_timeline.h)
// places its ops by the engine's rule once the real GPU's measurements are read. An op starts at the
// latest of its issue time (the issuing thread's clock plus the launch latency) and the finish of
// every op it waits for:
// - the op before it on its own stream (stream order);
// - what it names itself (the recorded op of an event it waits on: cuStreamWaitEvent);
// - CUDA's default-stream barrier, inside its context: an op on the legacy default stream waits
//   for the last op of every blocking stream, and an op on a blocking stream waits for the last
//   op of the legacy default stream. A per-thread default stream is a blocking stream; a stream
//   created with CU_STREAM_NON_BLOCKING waits for neither and is waited for by neither.
//
// A destroyed stream's queued work still runs (the real driver releases the stream once it is
// done), and the legacy default stream still waits for it: a destroyed blocking stream's last op
// stays in the barrier until the legacy stream's next op, which waits for it (after that op,
// everything waits for the legacy stream's own order instead). At most kRetiredKept destroyed
// streams of a context wait so; beyond, the oldest leave first. Both backends apply this when the
// program destroys the stream, not when its real work drains, so that they agree.
//
// StreamOrder keeps, per stream, its kind and the handle of its last op (`Last`: whatever the
// backend names an op by; a value-initialized Last means "no op yet"). Not thread-safe: the
// owner's lock guards it.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace vgpu::timing {

enum class StreamKind { legacy, blocking, non_blocking };

// Whether an op on a stream of kind `op_stream` waits for the last op of another stream of its
// context of kind `other` (the default-stream barrier above).
constexpr bool default_stream_barrier(StreamKind op_stream, StreamKind other) {
  switch (op_stream) {
    case StreamKind::legacy: return other == StreamKind::blocking;
    case StreamKind::blocking: return other == StreamKind::legacy;
    case StreamKind::non_blocking: return false;
  }
  return false;
}

// What a stream argument of an entry point names: a stream handle, the context's legacy default
// stream, or the calling thread's per-thread default stream. Stream 0 is the per-thread default
// stream for the _ptds/_ptsz entry points (`per_thread_entry`), else the legacy one.
enum class StreamArg { handle, legacy, per_thread };
// cuda.h's CU_STREAM_LEGACY and CU_STREAM_PER_THREAD (this layer does not include cuda.h;
// tests/timing checks the values against it).
inline constexpr uintptr_t kStreamLegacyHandle = 0x1;
inline constexpr uintptr_t kStreamPerThreadHandle = 0x2;
inline StreamArg stream_arg(const void* stream, bool per_thread_entry) {
  const auto v = reinterpret_cast<uintptr_t>(stream);
  if (v == kStreamLegacyHandle) return StreamArg::legacy;
  if (v == kStreamPerThreadHandle) return StreamArg::per_thread;
  if (v == 0) return per_thread_entry ? StreamArg::per_thread : StreamArg::legacy;
  return StreamArg::handle;
}

// The kind of the stream an argument names: the legacy default stream is its own kind, a
// per-thread default stream is a blocking stream, a created stream is non-blocking when created
// with CU_STREAM_NON_BLOCKING (`non_blocking_flag`, read only for a handle).
constexpr StreamKind stream_kind(StreamArg arg, bool non_blocking_flag) {
  switch (arg) {
    case StreamArg::legacy: return StreamKind::legacy;
    case StreamArg::per_thread: return StreamKind::blocking;
    case StreamArg::handle: break;
  }
  return non_blocking_flag ? StreamKind::non_blocking : StreamKind::blocking;
}

template <class Last>
class StreamOrder {
 public:
  struct Key {
    const void* context = nullptr;
    const void* stream = nullptr;  // any value unique within the context (a handle, a thread's id)
    bool operator==(const Key&) const = default;
  };
  // On cache lines of its own: the passthrough's settled event record writes its `last` (64
  // bytes with its kind and lane), which a map node at malloc's 16-byte alignment put on two
  // (issue 21).
  struct alignas(64) Entry {
    StreamKind kind = StreamKind::blocking;
    Last last{};
    int32_t lane = -1;  // free for the owner (the passthrough numbers its timeline's lanes)
  };

  // Destroyed streams of a context whose last op the legacy stream's next op still waits for.
  static constexpr size_t kRetiredKept = 64;

  // The entry of `key`, made on first use; its kind is (re)set to `kind`. The owner calls it to
  // set the entry's last op once it appended one (after for_each_predecessor): an op on the
  // legacy stream has then waited for the destroyed streams, which leave the barrier.
  Entry& stream(const Key& key, StreamKind kind) {
    Context& c = contexts_[key.context];
    Entry& e = c.streams[key.stream];
    e.kind = kind;
    if (kind == StreamKind::legacy) {
      c.legacy = &e;
      c.retired.clear();
    }
    return e;
  }
  const Entry* find(const Key& key) const {
    auto c = contexts_.find(key.context);
    if (c == contexts_.end()) return nullptr;
    auto s = c->second.streams.find(key.stream);
    return s == c->second.streams.end() ? nullptr : &s->second;
  }
  Entry* find(const Key& key) {
    return const_cast<Entry*>(std::as_const(*this).find(key));
  }

  // Calls f(last, own) for every op a new op on `key` (of `kind`) waits for besides what it
  // names itself: the last op of its own stream (own: true), then the last op of every other
  // stream of its context that the default-stream barrier names. `last` may be "no op".
  template <class F>
  void for_each_predecessor(const Key& key, StreamKind kind, F&& f) const {
    auto c = contexts_.find(key.context);
    if (c == contexts_.end()) return;
    auto s = c->second.streams.find(key.stream);
    const Entry* self = s == c->second.streams.end() ? nullptr : &s->second;
    if (self != nullptr) f(self->last, true);
    others_waited_for(c->second, self, kind, f);
  }

  // for_each_predecessor(key, kind, f), then stream(key, kind): for an owner that appends its op
  // at once, one lookup of the context and of the stream instead of two each (the passthrough's
  // every timed call). The stream's own last op is handed over as a non-const `Last&`: the owner
  // replaces it with its new op right after, so `f` may move it out.
  // The stream appended to last is found without either lookup (recent_ below).
  template <class F>
  Entry& append(const Key& key, StreamKind kind, F&& f) {
    bool fresh = false;
    if (recent_.entry == nullptr || !(recent_.key == key)) {
      Context& found = contexts_[key.context];
      auto [s, made] = found.streams.try_emplace(key.stream);
      recent_ = {key, &found, &s->second};
      fresh = made;
    }
    Context& c = *recent_.context;
    Entry& self = *recent_.entry;
    if (!fresh) f(self.last, true);
    others_waited_for(c, &self, kind, f);
    self.kind = kind;
    if (kind == StreamKind::legacy) {
      c.legacy = &self;
      c.retired.clear();
    }
    return self;
  }

  // f(key, entry) for every stream of `context` / of every context.
  template <class F>
  void for_each_in_context(const void* context, F&& f) const {
    auto c = contexts_.find(context);
    if (c == contexts_.end()) return;
    for (const auto& [stream, e] : c->second.streams) f(Key{context, stream}, e);
  }
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [context, c] : contexts_)
      for (const auto& [stream, e] : c.streams) f(Key{context, stream}, e);
  }

  // The stream is gone: a later stream with the same key starts fresh.
  void forget_stream(const Key& key) { remove(key, false); }
  // The program destroyed the stream: a later stream with the same key starts fresh, and its
  // last op, if it was a blocking stream, stays in the legacy stream's barrier (see above).
  void destroy_stream(const Key& key) { remove(key, true); }
  void forget_context(const void* context) {
    recent_ = {};
    contexts_.erase(context);
  }

  StreamOrder() = default;
  // A copy finds its own entries (recent_ points into the original's).
  StreamOrder(const StreamOrder& o) : contexts_(o.contexts_) {}
  StreamOrder& operator=(const StreamOrder& o) {
    contexts_ = o.contexts_;
    recent_ = {};
    return *this;
  }

 private:
  struct Context {
    std::unordered_map<const void*, Entry> streams;
    Entry* legacy = nullptr;  // the legacy default stream's entry (stable: node-based map)
    std::vector<Last> retired;  // destroyed blocking streams' last ops, oldest first
  };

  // The predecessors of an op on `self` (of `kind`; nullptr: a stream with no entry yet) that are
  // other streams' last ops: f(last, false) for each.
  template <class F>
  static void others_waited_for(const Context& c, const Entry* self, StreamKind kind, F&& f) {
    // The legacy stream, found at once (a blocking stream's every op asks for it)...
    const Entry* legacy = c.legacy;
    if (default_stream_barrier(kind, StreamKind::legacy) && legacy != nullptr &&
        legacy->kind == StreamKind::legacy && legacy != self)
      f(legacy->last, false);
    // ...the other streams by a scan, only for a kind whose barrier names any of them.
    if (!default_stream_barrier(kind, StreamKind::blocking) && !default_stream_barrier(kind, StreamKind::non_blocking))
      return;
    for (const auto& [stream, e] : c.streams)
      if (&e != self && e.kind != StreamKind::legacy && default_stream_barrier(kind, e.kind)) f(e.last, false);
    if (default_stream_barrier(kind, StreamKind::blocking))
      for (const Last& last : c.retired) f(last, false);
  }

  void remove(const Key& key, bool retire) {
    recent_ = {};
    auto c = contexts_.find(key.context);
    if (c == contexts_.end()) return;
    auto s = c->second.streams.find(key.stream);
    if (s == c->second.streams.end()) return;
    if (c->second.legacy == &s->second) c->second.legacy = nullptr;
    if (retire && s->second.kind == StreamKind::blocking) {
      std::vector<Last>& r = c->second.retired;
      if (r.size() == kRetiredKept) r.erase(r.begin());
      r.push_back(std::move(s->second.last));
    }
    c->second.streams.erase(s);
    if (c->second.streams.empty() && c->second.retired.empty()) contexts_.erase(c);
  }
  std::unordered_map<const void*, Context> contexts_;
  // append()'s last stream and its context: a thread mostly appends to the stream it appended to
  // last, and the two hash lookups were ~40 instructions of every launch and copy (issue 21).
  // Both maps are node-based (an insertion moves no entry); cleared by every erase.
  struct Recent {
    Key key;
    Context* context = nullptr;
    Entry* entry = nullptr;
  } recent_;
};

}  // namespace vgpu::timing
