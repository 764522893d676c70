// Virtual time under the passthrough backend: the owner of the streams' virtual timeline
// (virtual_timeline.h), of the real events that measure ops on the real GPU, and of what the
// program's own events mean. The entry points (launch_api.cpp, timed_api.cpp) tell it what they
// forwarded; it answers cuEventElapsedTime and moves the calling thread's virtual clock
// (thread_clock.h) when the program synchronizes, so that a program's own timing reports the
// virtual cluster.
//
// Measuring: an op whose duration is not known in advance is bracketed on its real stream by a
// pair of real events; its duration is their elapsed time, read once the real work is done (at
// the latest when the program synchronizes with it). On a busy stream this is the time the op
// held the stream, gaps between back-to-back kernels included, which is what a program's own
// event timing of a real run adds up.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "front/driver/cuda_api.h"
#include "passthrough/gate_latency.h"
#include "timing/inline_constants.h"
#include "passthrough/nccl_timing.h"
#include "passthrough/thread_clock.h"
#include "passthrough/virtual_timeline.h"
#include "timing/launch_latency.h"

namespace vgpu::pt {

// Where an op on a stream argument goes.
struct StreamTarget {
  StreamKey key;
  StreamKind kind = StreamKind::legacy;
  CUcontext context = nullptr;
  CUstream real = nullptr;       // the handle as the program passed it
  CUstream record_on = nullptr;  // the same stream for vgpu's own event records
  int device = -1;          // virtual device
};

// How an op's duration becomes known.
struct Timing {
  enum class Source { known, measured, nccl };
  Source source = Source::known;
  bool kernel = false;                       // a kernel launch (statistics)
  double seconds = 0;                        // Source::known
  // Source::measured: told the measured duration, returns the duration the op takes (<= it).
  std::function<double(double)> on_measured;
  int nccl_gpu = -1;                         // Source::nccl: the rank's global GPU
  nccl_timing::Attribution nccl;             //   and which transfers are the kernel's
  std::string label;                         // for VGPU_TIMELINE; set only when one is written

  // As a Timing{} of `source`, in place: a launch's reused plan is cleared without a Timing made
  // and move-assigned (a std::function, a shared_ptr, a string) on every launch (issue 21). A
  // field added above is cleared here too (TimingReset.ClearsEveryField, virtual_time_test.cpp).
  void reset(Source s) {
    source = s;
    kernel = false;
    seconds = 0;
    if (on_measured) on_measured = nullptr;
    nccl_gpu = -1;
    nccl.launch = nccl.since = 0;
    if (nccl.until) nccl.until.reset();
    label.clear();
  }
};

class VirtualTime {
 public:
  // The process's virtual time (the backend root's, passthrough.h); nullptr before a
  // successful cuInit.
  static VirtualTime* get();
  // get() as the calling thread's call state keeps it once known (call_thread.h): not looked up
  // through the backend's root on every timed call.
  static VirtualTime* of_thread(CallThread& thread) {
    return thread.virtual_time != nullptr ? thread.virtual_time : (thread.virtual_time = get());
  }
  // The virtual time and the target of a call on stream `s` when the call can be timed (a live
  // stream that is not being captured); nullptr otherwise. `pause`: the call's, whose thread
  // state serves (call_thread.h: no thread-local lookup). Inline, as target()'s and
  // capturing()'s common cases: a call and its saved registers a layer (issue 21).
  static VirtualTime* for_call(CUstream s, bool per_thread, StreamTarget* t, const thread_clock::Pause& pause) {
    CallThread& thread = pause.thread();
    VirtualTime* vt = of_thread(thread);
    if (vt == nullptr || !vt->target(s, per_thread, t, thread.target) || vt->capturing(*t)) return nullptr;
    return vt;
  }

  // Resolves a stream argument (`per_thread`: a _ptsz/_ptds entry point). Errors as the real
  // driver would give them for a bad handle are left to the forwarded call itself: false here
  // only means "do not time this".
  bool target(CUstream stream, bool per_thread, StreamTarget* out) {
    return target(stream, per_thread, out, this_call_thread().target);
  }
  // The same with the calling thread's cache (CallThread::target) at hand. The cache's common
  // answer, the thread's last stream handle with its context's device known, is taken here,
  // inline; anything else is looked up (target_looked_up).
  bool target(CUstream stream, bool per_thread, StreamTarget* out, TargetCache& cache) {
    if (stream == nullptr || stream != cache.stream || cache.owner != this || cache.device < 0 ||
        cache.device_context != cache.context || cache.generation != generation_.load(std::memory_order_acquire))
      return target_looked_up(stream, per_thread, out, cache);
    // cache.stream is only ever a handle (not CU_STREAM_LEGACY or CU_STREAM_PER_THREAD): as
    // target_looked_up's handle branch fills it.
    out->key = {cache.context, stream};
    out->kind = cache.kind;
    out->context = cache.context;
    out->real = stream;
    out->record_on = stream;
    out->device = cache.device;
    return true;
  }
  // Whether the stream is being captured into a graph (its work then does not run now). Asks
  // the real driver only while some capture is open (capture_opened/closed below).
  bool capturing(const StreamTarget& t) {
    // No capture open in this process: nothing is being captured (the common case, no driver call).
    return open_captures_.load(std::memory_order_acquire) != 0 && capturing_now(t);
  }
  void capture_opened();
  void capture_closed();

  // Brackets one forwarded op: begin() before forwarding it, then submit() after it was
  // forwarded successfully (abandon() if it failed).
  //
  // `gated`: the stream is held shut (a cuStreamWaitValue32 on a host flag) until the op and
  // its end event are queued behind the begin event, and opened by submit()/abandon(). On an
  // idle stream the begin event would otherwise complete at once and the measurement would
  // include the host's launch latency; gated, the op starts right after its begin event, as a
  // launch queued behind busy work does. For launches measured alone (measure_lock.h).
  class Bracket {
   public:
    Bracket() = default;
    bool active() const { return begin_ != nullptr; }

   private:
    friend class VirtualTime;
    CUevent begin_ = nullptr;
    CUcontext context_ = nullptr;
    volatile uint32_t* gate_ = nullptr;
    uint32_t gate_value_ = 0;
    GateLatency latency_;  // what the gate adds to the measurement (gate_latency.h)
  };
  Bracket begin(const StreamTarget& t, const Timing& timing, bool gated = false);
  // `keep_op` false: the caller does not use the op, so one whose duration is known may be
  // placed without one (VirtualTimeline::append_unless_placed; nullptr is returned then).
  // `pause`: the caller's (the calling thread's clock, looked up once: issue_time). `timing` is
  // moved from only where it is kept (a measurement); taken by reference, not by value: a
  // Timing's move and destruction (a std::function, a string) on every launch (issue 21).
  OpRef submit(const StreamTarget& t, Timing&& timing, Bracket& bracket, bool keep_op = true,
               const thread_clock::Pause* pause = nullptr);
  void abandon(Bracket& bracket);

  // Waits (for real, at most `timeout_s`) until the measured op has run: measure_lock.h.
  void wait_measured(const OpRef& op, double timeout_s);

  // issue_time(memo.device) for the thread whose memo `memo` is (record_memo.h), inside its call
  // (`clock` entered): the memo was made by an issue time on that device, so the thread keeps
  // time and submits to it already (thread_clock::detail::now_inside).
  static double issue_again(const RecordMemo& memo, timing::ThreadClock& clock) {
    return thread_clock::detail::now_inside(clock, memo.device) + immediate(vclock::kLaunchLatency);
  }
  // The earliest virtual start of an op the calling thread submits now to `device`; `pause`: the
  // scope the call is in, if the caller has it (its clock is looked up already).
  double issue_time(int device, const thread_clock::Pause* pause = nullptr) {
    // The latency as an immediate: not a .rodata line of its own to fetch again (inline_constants.h).
    return (pause != nullptr ? pause->now(device) : thread_clock::now(device)) + immediate(vclock::kLaunchLatency);
  }

  // The virtual start of `op` once everything before it resolved; if not yet, resolves what
  // the real GPU has finished (at most every kStartResolveSeconds: callers are on hot paths) and
  // asks again. Never waits for the timeline: nullopt when it is busy or the start still
  // unknown. For NCCL's proxy thread (through the plugin's launch clock), which the GPU may be
  // waiting for while a synchronizing thread holds the timeline.
  std::optional<double> start_of(const OpRef& op);
  static constexpr double kStartResolveSeconds = 50e-6;

  // Events: recorded on a stream, waited for by a stream, forgotten.
  void event_recorded(CUevent event, const StreamTarget& t, const thread_clock::Pause* pause = nullptr) {
    timeline_.record_event(event, t.key, t.kind, t.device, issue_time(t.device, pause));
  }
  // The same, memoizing the record in `memo` (the calling thread's, record_memo.h) when it can
  // be: `generation` is record_generation() as read before the call's target, capture and event
  // device were looked up.
  void event_recorded(CUevent event, const StreamTarget& t, const thread_clock::Pause& pause, RecordMemo& memo,
                      uint64_t generation) {
    memo.event = event;
    memo.stream = t.real;
    memo.context = t.context;
    memo.device = t.device;
    timeline_.record_event(event, t.key, t.kind, t.device, issue_time(t.device, &pause), memo, generation);
    if (event == nullptr || t.real != t.record_on) memo.owner = nullptr;  // handles only
  }
  uint64_t record_generation() const { return timeline_.record_generation(); }
  // Whether the thread's memo stands for recording `event` on `stream` now: the same pair,
  // nothing changed since (its target resolved, no capture open, the event's device agreeing).
  bool memo_holds(const RecordMemo& memo, CUevent event, CUstream stream) const {
    return timeline_.memo_holds(memo, event, stream);
  }
  // The memo's record again (after the real driver recorded it), at `issue` (issue_time's).
  void event_recorded_again(const RecordMemo& memo, double issue) {
    // Gone stale since memo_holds (another thread destroyed a stream or an event): looked up.
    if (!timeline_.record_again(memo, issue))
      timeline_.record_event(memo.event, StreamKey{memo.context, memo.stream}, StreamKind::non_blocking, memo.device,
                             issue);
  }
  void stream_waits(const StreamTarget& t, CUevent event);
  void event_destroyed(CUevent event);
  // The virtual device an event was created on (the program's cuEventCreate), -1 if unknown:
  // several virtual devices share one real GPU, whose driver cannot tell them apart.
  void event_created(CUevent event, int device);
  // `cache`: the calling thread's (CallThread::event_device), whose answer is taken inline.
  int event_device(CUevent event, EventDeviceCache& cache) {
    if (cache.event == event && cache.owner == this &&
        cache.generation == event_generation_.load(std::memory_order_acquire))
      return cache.device;
    return event_device_looked_up(event, cache);
  }
  OpRef event_op(CUevent event);
  // Virtual ms between two recorded events whose real work is complete; nullopt when either
  // was never recorded through vgpu.
  std::optional<float> elapsed_ms(CUevent start, CUevent end);

  // The calling thread waited for real until `op` (and all it depends on) completed: its
  // virtual clock moves to the op's virtual finish.
  void synchronized(const OpRef& op, int device);
  // A poller heard "ready" for `op`: its real work is done, so its measurement can be read.
  void resolve_for_poll(const OpRef& op) { resolve(op); }
  // The same for every stream of a context (cuCtxSynchronize).
  void context_synchronized(CUcontext context, int device);

  void stream_destroyed(CUstream stream);
  void context_destroyed(CUcontext context);

  VirtualTimeline& timeline() { return timeline_; }

 private:
  friend class Passthrough;
  VirtualTime() = default;
  static VirtualTime* make();  // the root's, on first use
  struct Impl;
  // `start_if_needed`: an NCCL kernel's start (appended start_first), nullopt for other ops.
  double measure(TimedOp& op, std::optional<double> start_if_needed, bool force);
  static void open_gate(Bracket& b);
  // target(), event_device() and capturing() past their common cases (out of line).
  bool target_looked_up(CUstream stream, bool per_thread, StreamTarget* out, TargetCache& cache);
  int event_device_looked_up(CUevent event, EventDeviceCache& cache);
  bool capturing_now(const StreamTarget& t);
  void resolve(const OpRef& target, bool wait = true);

  VirtualTimeline timeline_;
  Impl* impl_ = nullptr;
  std::atomic<int> open_captures_{0};
  std::atomic<int64_t> last_start_resolve_ns_{0};
  std::atomic<uint64_t> generation_{0};  // bumped when a stream or context is destroyed (target())
  std::atomic<uint64_t> event_generation_{0};  // bumped when an event is created or destroyed (event_device())
};

}  // namespace vgpu::pt
