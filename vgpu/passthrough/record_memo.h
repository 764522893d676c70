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

#include <cstdint>

namespace vgpu::pt {

// What a settled record reads comes first, 61 bytes: with the thread's clock pointer before it
// (call_thread.h) one cache line, which a framework's work evicts between two driver calls
// (issue 21). The context, read only when the memo went stale, comes last.
struct RecordMemo {
  void* owner = nullptr;        // the VirtualTimeline whose mark and entry these are; null: empty
  uint64_t generation = 0;      // its record generation when the answers were looked up
  const void* event = nullptr;
  const void* stream = nullptr;   // a stream handle (never the legacy or per-thread default)
  void* mark = nullptr;           // the timeline's mark for the event (VirtualTimeline::EventMark)
  void* entry = nullptr;          // the timeline's entry for the stream (StreamOrder's Entry)
  int device = -1;                // the stream's virtual device
  // The thread's clock charges the real driver's cost of a record (Pause::real's answer, fixed
  // for the process): the caller's answer when it made the memo.
  int8_t charges_driver = 0;
  const void* context = nullptr;  // the stream's context (its key in the timeline)
};

}  // namespace vgpu::pt
