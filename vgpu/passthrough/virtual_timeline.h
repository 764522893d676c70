// The virtual timeline of the passthrough backend's streams: real work runs on the real GPU,
// and each op the program submits also gets a place on its stream's virtual timeline. What an op
// waits for is the rule both backends share (timing/stream_order.h: the op before it on its
// stream, what it names, the default streams' barrier); where it goes is simcore's task rule
// (simcore/engine.h: a task starts at the latest of its `not_before`, here its issue time, the
// issuing thread's virtual clock plus the launch latency, and the finish of everything it waits
// for, and lasts its duration).
//
// What is the passthrough's own is the lazy part: durations may be unknown when the op is
// submitted (the launch is being measured on the real GPU and the measurement is read only once
// the real work is done). So an op waits here, in submission order, until its duration and all
// its dependencies are known, and is placed then (every dependency was submitted earlier, so one
// pass over the pending ops places everything that can be). An op whose start is asked before
// its duration is known (an NCCL kernel lasts what its collectives take from its start) gets
// that start first, by the same rule, and its finish once its duration is known.
//
// Why the rule is applied here and not by an engine: the passthrough's ops are tasks only (their
// durations are measured, not priced), which share no link, and each is placed only once what it
// waits for is placed, so the engine's answer for it is final at once and is exactly the rule;
// an engine event per op (add_task, query, a new engine's pages every 1024 events) was two
// fifths of a settled cuLaunchKernel's own cost (issue 21). The sim backend's ops, whose flows
// share links and arrive out of virtual-time order, are the engine's (ARCHITECTURE.md).
//
// Memory: an op is held by its stream's tail, the pending ops and those that wait for it;
// placed ops drop what they waited for, so a long run keeps the last op of each stream.
//
// Event records (record_event) are the one call that adds no work: an op that lasts nothing and
// only marks "everything before, and not before my issue time". Unless every op is written to
// VGPU_TIMELINE, such a record on a created or per-thread stream gets no op of its own (an
// allocation, a free and a second lock on every cuEventRecord, issue 21): the stream's tail
// remembers it as a floor on the issue time of whatever waits for the tail, and the event keeps
// that same tail; an op is made for the event only when someone asks for it (event_op), placed
// exactly where the record's own op would have been (StreamTail below says why).
//
// A thread's settled records (record_memo.h) take no lock: each is two stores to the thread's slot
// here, made on the timeline by whoever takes the lock next, before anything else under it
// (RecordSlot says why nothing that reads the timeline can tell).
//
// No driver calls, no clocks. One lock (a FutexLock); every method is thread-safe.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "passthrough/futex_lock.h"
#include "timing/inline_constants.h"
#include "passthrough/record_memo.h"
#include "common/settings.h"
#include "timing/collective_overlap.h"
#include "timing/stream_order.h"

namespace vgpu::pt {

struct TimedOp {
  double issue = 0;      // earliest start, virtual seconds
  double duration = -1;  // < 0: not known yet
  double start = 0, finish = 0;
  bool resolved = false;  // placed: start and finish are known
  bool started = false;   // its start is placed (resolved, or asked for before its duration was known)
  int device = -1;       // the virtual device it runs on
  bool kernel = false;   // a kernel launch (for the per-device statistics)
  bool start_first = false;  // its duration depends on its start (an NCCL kernel)
  // An NCCL kernel: when its collective's transfers began (every rank had arrived); before, it
  // waits for its peers. Set by the measurement (-1: unknown, the whole kernel counts as moving).
  double moving_from = -1;
  // A kernel: the work earlier kernels of its device lost beside a collective, booked on it
  // (timing/collective_overlap.h: the debt), seconds at full rate; its span holds it besides its
  // own duration (the timeline writes it apart: "carried_us").
  double carried = 0;
  int32_t lane = 0;      // its stream's number within the process (the timeline's lanes)
  std::string label;     // what it is, for VGPU_TIMELINE (empty unless one is written)
  // What set_duration needs to find it again (the measurement's owner keeps its own state).
  uint64_t measurement = 0;
  std::vector<std::shared_ptr<TimedOp>> deps;  // dropped once resolved
};
using OpRef = std::shared_ptr<TimedOp>;

// Which stream an op goes to: its kind says which default-stream barrier it takes part in
// (timing/stream_order.h). The key's stream is a real stream handle, or a per-thread default
// stream's id.
using StreamKind = timing::StreamKind;

// What waits for a stream's tail waits for: its last op, and what event records since it add
// without an op of their own (see above). An op waiting for it starts no earlier than
// `not_before` (the latest record's issue; -inf: none) and after `op` and `also` (the legacy
// stream's last op when the latest record was made: a record on a blocking stream waits for
// it). That is the record's own op's finish, max(issue, finishes of what it waits for), unrolled
// into whatever waits for it: identical placement. Several records in a row keep the latest
// `also` (the legacy stream's later op finishes after its earlier one) and the latest issue.
// A last op placed without an op of its own (append_unless_placed) leaves no `op`, only its
// finish in `not_before`: what waits for a placed op starts no earlier than its finish.
struct StreamTail {
  OpRef op;
  double not_before = -std::numeric_limits<double>::infinity();
  OpRef also;
  int device = -1;  // the latest record's virtual device (for an op made for it)
  bool plain() const { return !also && not_before == -std::numeric_limits<double>::infinity(); }
  static StreamTail of(OpRef op) {  // a stream whose last op is `op`, and nothing recorded since
    StreamTail t;
    t.op = std::move(op);
    return t;
  }
};
using StreamKey = timing::StreamOrder<StreamTail>::Key;

class VirtualTimeline {
 public:
  VirtualTimeline() = default;
  VirtualTimeline(const VirtualTimeline&) = delete;
  VirtualTimeline& operator=(const VirtualTimeline&) = delete;

  // Appends an op to `stream`. `duration` < 0: unknown until set_duration(). `waits`: ops that
  // must finish first (null entries are ignored). `start_first`: its duration depends on its
  // start, which resolve() then places first and hands to `measure`. Resolves it at once when it
  // can.
  OpRef append(const StreamKey& stream, StreamKind kind, int device, double issue, double duration,
               const std::vector<OpRef>& waits = {}, uint64_t measurement = 0, bool kernel = false,
               std::string label = {}, bool start_first = false);

  // As append() without waits, for a caller that does not need the op (a settled launch): when
  // its duration is known and everything it waits for is placed, it is placed at once (reported
  // to on_resolved as any op) and no op is made: the stream's tail keeps its finish as a floor
  // (StreamTail::not_before), exactly as an event record's issue time, and nullptr is returned.
  // An op was an allocation, a free of the one before it and several reference counts on every
  // settled cuLaunchKernel (issue 21). Otherwise (or while ops are written out:
  // set_elide_event_records(false)) it is append().
  // `label` is moved from only when an op is made (by reference: a placed op, the common case,
  // constructs and destroys no string).
  OpRef append_unless_placed(const StreamKey& stream, StreamKind kind, int device, double issue, double duration,
                             bool kernel, std::string&& label = {});

  // The start of `op` if its dependencies are resolved (its duration may still be unknown).
  // `wait` false: nullopt at once when another thread holds the timeline (a resolve forced by a
  // synchronization may hold it until the GPU finishes, and NCCL's proxy thread, which the GPU
  // may be waiting for, must never wait on it).
  std::optional<double> start_if_ready(const OpRef& op, bool wait = true);

  // The measurement of `op` came back.
  void set_duration(const OpRef& op, double seconds);

  // `event` was recorded on `stream` at `issue`: it now stands for everything submitted to the
  // stream before (and the default-stream barrier's ops), not before `issue`. Makes an op
  // (as append with a duration of 0) only on the legacy stream or when ops are written out
  // (set_elide_event_records(false)).
  void record_event(const void* event, const StreamKey& stream, StreamKind kind, int device, double issue);
  // The same, and when the record can be memoized (record_memo.h: a non-blocking stream, records
  // elided) `memo`'s owner, generation, mark and entry are filled (its other fields are the
  // caller's), `generation` being record_generation() as the caller read it before it looked
  // its answers up; otherwise the memo is emptied.
  void record_event(const void* event, const StreamKey& stream, StreamKind kind, int device, double issue,
                    RecordMemo& memo, uint64_t generation);
  // The record `memo` stands for, again, at `issue` (as record_event would make it); false, and
  // nothing recorded, when the memo went stale (its generation moved).
  bool record_again(const RecordMemo& memo, double issue);
  // The same when the timeline's lock is free at once; false, nothing recorded, when another
  // thread holds it or the memo went stale (the caller then waits with record_again). For a
  // caller that reads its leaving time just before (timed_api.cpp), a wait for the lock must
  // not come after that reading.
  [[gnu::always_inline]] bool record_again_if_free(const RecordMemo& memo, double issue) {
    if (!mu_.try_lock()) return false;
    if (memo.generation != record_generation_.load(std::memory_order_relaxed)) {
      mu_.unlock();
      return false;
    }
    record_on_tail(*static_cast<EventMark*>(memo.mark),
                   *static_cast<timing::StreamOrder<StreamTail>::Entry*>(memo.entry), memo.device, issue);
    mu_.unlock();
    return true;
  }
  // The lines a memo's record writes under the lock (a thread without a slot), asked for ahead
  // (before the real driver's call, which then hides their fetch): the timeline's lock line is
  // read by the memo's check already.
  static void prefetch_record(const RecordMemo& memo) {
    __builtin_prefetch(memo.mark, 1);
    __builtin_prefetch(&static_cast<timing::StreamOrder<StreamTail>::Entry*>(memo.entry)->last, 1);
  }
  // What a memo is valid under: moved by every change that could change a memo's answers (the
  // timeline's own below, and VirtualTime's: a capture opened or closed, an event created).
  uint64_t record_generation() const { return record_generation_.load(std::memory_order_acquire); }
  // Whether `memo` stands for recording `event` on the stream handle `stream` now.
  bool memo_holds(const RecordMemo& memo, const void* event, const void* stream) const {
    return memo.event == event && memo.stream == stream && memo.owner == this && memo.generation == record_generation();
  }
  // The timeline `memo` stands for recording `event` on `stream` in now, or null: memo_holds
  // for a caller whose memos only ever come from one timeline (the calling thread's, made by
  // the process's VirtualTime), which need not be looked up first (timed_api.cpp).
  static VirtualTimeline* memo_for(const RecordMemo& memo, const void* event, const void* stream) {
    auto* owner = static_cast<VirtualTimeline*>(memo.owner);
    if (memo.event != event || memo.stream != stream || owner == nullptr) return nullptr;
    return memo.generation == owner->record_generation() ? owner : nullptr;
  }
  void invalidate_record_memos() { record_generation_.fetch_add(1, std::memory_order_acq_rel); }
  // The most threads whose records take no lock (RecordSlot): a thread's slot is its own for the
  // timeline's life (CallThread has no destructor to give it back); threads beyond them record
  // under the lock, as before slots.
  static constexpr uint32_t kSlots = 16;
  // The op the event's last record stands for (made on first ask), or null if never recorded.
  OpRef event_op(const void* event);
  // The event is gone: a later event with the same handle starts fresh.
  void forget_event(const void* event);
  // Whether event records may go without an op (above); true unless told. Set before use.
  void set_elide_event_records(bool elide) {
    elide_records_ = elide;
    invalidate_record_memos();
  }

  // The last op of a stream (an op made for records since its last op), or null.
  OpRef tail(const StreamKey& stream);
  // The last op of every stream of `context`.
  std::vector<OpRef> tails_of_context(const void* context);

  // Resolves every pending op that can be. `measure(op, start, force)` is asked for the
  // duration of each pending op whose duration is unknown and whose dependencies are resolved,
  // with its start when it was appended `start_first` (else nullopt: other ops need no start):
  // it returns the duration (>= 0), or < 0 when it cannot tell yet.
  // `force` is true for `target` and every op it depends on: the caller synchronized with
  // `target` for real, so their measurements are complete and must be read now.
  // `wait` false: does nothing when another thread holds the timeline (as start_if_ready).
  using Measure = std::function<double(TimedOp& op, std::optional<double> start, bool force)>;
  void resolve(const Measure& measure, const OpRef& target = nullptr, bool wait = true);

  // The finish of `op` when resolved.
  std::optional<double> finish(const OpRef& op) const;

  // Ops waiting for a duration or a dependency (tests, logs).
  size_t pending() const;

  // The rate of kernels beside a collective's kernel on their GPU (timing/collective_overlap.h;
  // VGPU_COMPUTE_BESIDE_COLLECTIVE and VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE unless told; 1 and
  // 1: the rule off). Set before use.
  void set_compute_beside_collective(double moving, double waiting) {
    overlap_ = timing::CollectiveOverlap(moving, waiting);
  }

  // Called (under the timeline's lock: keep it short) for every op as it resolves.
  void set_on_resolved(std::function<void(const TimedOp&)> f) { on_resolved_ = std::move(f); }

  // The program destroyed the stream: later ops on a new stream with the same handle start
  // fresh (its last op stays in the default-stream barrier: timing/stream_order.h).
  void destroy_stream(const StreamKey& stream);
  void forget_context(const void* context);

 private:
  // Places `op`'s start once every op it waits for is resolved; nullopt before.
  static std::optional<double> place_start(TimedOp& op);
  // Whether every op `op` waits for is resolved (or its start is placed).
  static bool ready(const TimedOp& op);
  // Places `op` if its duration and dependencies allow; true when resolved.
  bool try_resolve(TimedOp& op);
  // append() under the lock.
  OpRef append_locked(const StreamKey& key, StreamKind kind, int device, double issue, double duration,
                      const std::vector<OpRef>& waits, uint64_t measurement, bool kernel, std::string label,
                      bool start_first);
  // An op of no duration standing for `tail` (placed as soon as what it waits for is), or the
  // tail's op itself when nothing was recorded after it. Under the lock. (Its lane is 0: ops are
  // made so only while none is written to VGPU_TIMELINE.)
  OpRef op_for(const StreamTail& tail);

  // An event's last record: the stream tail it stands for until its op is made. On a cache line
  // of its own (it is 64 bytes): a record reads and writes all of it, and a map node at malloc's
  // 16-byte alignment put it on two (issue 21).
  struct alignas(64) EventMark {
    StreamTail tail;
    OpRef op;
  };

  // record_event's last lookups: a thread re-records the same event on the same stream over and
  // over (a framework's per-step markers), and the events' map and the stream order's two maps
  // were a third of a record's own work. Only for a non-blocking stream, whose record waits for
  // no other stream. Both maps are node-based (entries never move); cleared with anything that
  // erases an event, a stream or a context.
  struct LastRecord {
    const void* event = nullptr;
    StreamKey key;
    EventMark* mark = nullptr;
    timing::StreamOrder<StreamTail>::Entry* stream = nullptr;
  };
  // The record whose mark is `m` on the stream whose entry is `s` (record_event past its lookups).
  // Inline in every form of the common case (its call and saved registers were ~20 instructions
  // of an event record, issue 21).
  [[gnu::always_inline]] static void record_on_tail(EventMark& m, timing::StreamOrder<StreamTail>::Entry& s,
                                                    int device, double issue) {
    StreamTail& tail = s.last;
    const double not_before = std::max(tail.not_before, finite_or_zero(issue));  // no constant from memory
    tail.not_before = not_before;
    tail.device = device;
    // Re-recording an event on an unchanged stream changes no reference count.
    if (m.tail.op != tail.op) m.tail.op = tail.op;
    if (m.tail.also != tail.also) m.tail.also = tail.also;
    m.tail.not_before = not_before;  // (not read back after the stores above)
    m.tail.device = device;
    if (m.op) m.op.reset();  // mostly null already: no store then
  }
  // record_event past last_record_: its lookups, under the lock.
  // Returns the mark and the entry when the record may be memoized (a non-blocking stream).
  [[gnu::noinline]] LastRecord record_looked_up(const void* event, const StreamKey& key, StreamKind kind, int device,
                                                double issue);
  // record_event's both forms, under the lock: the last record's mark and entry when the record
  // may be memoized (the memo's answers), else an empty LastRecord.
  LastRecord record_locked(const void* event, const StreamKey& key, StreamKind kind, int device, double issue);

  // The timeline's lock: a FutexLock (futex_lock.h: one atomic instruction uncontended) that
  // folds the threads' slots into the timeline as it is taken, so that every method's work under
  // it comes after the records made before (RecordSlot). Every `std::lock_guard l(mu_)` below is
  // one of these.
  class TimelineLock {
   public:
    explicit TimelineLock(VirtualTimeline& timeline) : timeline_(timeline) {}
    void lock() {
      lock_.lock();
      folded();
    }
    bool try_lock() {
      if (!lock_.try_lock()) return false;
      folded();
      return true;
    }
    void unlock() noexcept { lock_.unlock(); }

   private:
    // A fold that throws (a lookup's allocation) leaves the lock free, as a method that throws
    // under its std::lock_guard does.
    void folded() {
      try {
        timeline_.fold_slots();
      } catch (...) {
        lock_.unlock();
        throw;
      }
    }
    FutexLock lock_;
    VirtualTimeline& timeline_;
  };
  // Under the lock: the records each claimed slot holds since its last fold, made (inline: a
  // load and a compare a claimed slot, the common case none moved).
  void fold_slots() {
    for (uint32_t i = 0; i < claimed_; ++i) {
      RecordSlot& s = slots_[i];
      const uint32_t seq = s.seq.load(std::memory_order_acquire);
      if (seq != s.folded) [[unlikely]]
        fold(s, seq);
    }
  }
  void fold(RecordSlot& s, uint32_t seq);
  // `memo`'s slot if it is one of this timeline's, else a new one while any is left (null after).
  RecordSlot* slot_for(const RecordMemo& memo);

  // What a settled record reads (record_generation_) and what every method's lock reads, on one
  // cache line (a framework's own work between calls evicts them; three lines before, issue 21).
  alignas(64) mutable TimelineLock mu_{*this};
  uint32_t claimed_ = 0;  // slots_ handed out (under mu_)
  bool elide_records_ = true;  // also: append_unless_placed makes no op
  // record_generation(); moved under mu_ wherever a mark or an entry may go (so a memo checked
  // under mu_ points at live ones), and by VirtualTime outside it.
  std::atomic<uint64_t> record_generation_{1};
  LastRecord last_record_;  // under mu_
  std::array<RecordSlot, kSlots> slots_;  // the threads' (RecordSlot), each on a line of its own

  std::function<void(const TimedOp&)> on_resolved_;
  timing::StreamOrder<StreamTail> streams_;  // each stream's kind and tail
  std::unordered_map<const void*, EventMark> events_;  // the program's events' last records
  TimedOp placed_;  // what on_resolved is shown for an op placed without one (append_unless_placed)
  std::deque<OpRef> pending_;  // submission order
  int32_t next_lane_ = 0;
  std::vector<OpRef> spare_deps_;  // empty; a resolved op's buffer, for the next op's deps
  // Kernels beside collectives' kernels on one GPU progress slower (timing/collective_overlap.h).
  timing::CollectiveOverlap overlap_{settings::real(settings::Id::compute_beside_collective),
                                     settings::real(settings::Id::compute_beside_waiting_collective)};
};

}  // namespace vgpu::pt
