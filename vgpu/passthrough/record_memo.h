// A thread's memo of its last settled event record under the passthrough backend: the event, the
// stream handle, and everything the record resolved for them (the stream's context and virtual
// device, the timeline's mark for the event and entry for the stream), valid while the
// timeline's record generation is the one it was taken at.
//
// Why: a framework re-records the same event on the same stream from the same thread step after
// step; each record resolved its stream through the thread's target cache, asked whether a
// capture is open, checked the event's device through a second cache (each validated by a
// generation of its own, on VirtualTime's lines), and found its mark and entry again through
// the timeline's last record (issue 21). One compare of four fields and one generation, read
// from the timeline's line that the record locks anyway, stand for all of it.
//
// The generation (VirtualTimeline::record_generation) moves with anything that could change an
// answer: a stream, a context or an event created or destroyed, a capture opened or closed. A
// memo's generation is read before its answers are looked up, so a change made while they were
// looked up leaves it stale at once. Only a record on a non-blocking stream handle is memoized:
// it waits for no other stream (no legacy barrier to read), and a handle's kind never changes.
// No CUDA types here: the timeline, which knows no driver, fills its part.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>

namespace vgpu::pt {

// A thread's settled records, made without the timeline's lock (issue 21: its `lock cmpxchg` was
// ~10-15 ns of a record's 66-87 ns own time on the GPU hosts). The thread that owns the slot is
// its only writer: each record stores its issue time and then moves `seq`, two plain stores on
// x86. The record's effect on the timeline (its stream's tail and its event's mark: what
// record_on_tail writes) is made by whoever takes the timeline's lock next, before anything else
// under it (VirtualTimeline::fold_slots): every reader and writer of tails and marks holds that
// lock, so each sees the record made before its own work. The record is thus placed at that fold
// rather than at the call, which moves nothing: a record changes only what is read under the lock
// afterwards, and the owner's own later calls take the lock after their records (program order).
// A record from another thread that its program ordered after this one (a mutex, a join, an
// atomic) sees the slot's stores through that ordering and folds them first; one that raced with
// it is placed before or after it, as the real driver places two racing calls.
// What the fold needs (the mark, the entry, the device, the generation, the event and stream to
// look up again if the generation moved) is copied here under the lock when the owner's memo is
// made. On a cache line of its own: only its owner writes it.
struct alignas(64) RecordSlot {
  std::atomic<uint32_t> seq{0};  // moved by each record (after `issue`)
  // The latest issue of the owner's records of its memo, at least (the greatest since the memo was
  // made: records folded together place as the same records folded one by one, since a record
  // only raises its tail's floor and copies it to its mark).
  std::atomic<double> issue{-std::numeric_limits<double>::infinity()};
  // Under the timeline's lock:
  uint32_t folded = 0;       // `seq` as last folded
  uint64_t generation = 0;   // the memo's (RecordMemo::generation)
  void* mark = nullptr;      // the memo's mark and entry
  void* entry = nullptr;
  const void* event = nullptr;
  const void* stream = nullptr;
  const void* context = nullptr;
  int device = -1;

  // The owner's record at `at` (its memo holds: VirtualTimeline::memo_for).
  void publish(double at) {
    issue.store(std::max(issue.load(std::memory_order_relaxed), at), std::memory_order_relaxed);
    seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
};

// What a settled record reads comes first, 53 bytes: with the thread's clock pointer before it
// (call_thread.h) one cache line, which a framework's work evicts between two driver calls
// (issue 21). The mark and entry (read only where the thread has no slot) and the context (read
// only when the memo went stale) come last.
struct RecordMemo {
  void* owner = nullptr;        // the VirtualTimeline whose mark and entry these are; null: empty
  uint64_t generation = 0;      // its record generation when the answers were looked up
  const void* event = nullptr;
  const void* stream = nullptr;   // a stream handle (never the legacy or per-thread default)
  // The thread's slot in the owner (above), set with the memo; null where the owner's slots ran
  // out (its records then take the lock: VirtualTimeline::record_again_if_free).
  RecordSlot* slot = nullptr;
  int device = -1;                // the stream's virtual device
  // The thread's clock charges the real driver's cost of a record (Pause::real's answer, fixed
  // for the process): the caller's answer when it made the memo.
  int8_t charges_driver = 0;
  void* mark = nullptr;           // the timeline's mark for the event (VirtualTimeline::EventMark)
  void* entry = nullptr;          // the timeline's entry for the stream (StreamOrder's Entry)
  const void* context = nullptr;  // the stream's context (its key in the timeline)
};

}  // namespace vgpu::pt
