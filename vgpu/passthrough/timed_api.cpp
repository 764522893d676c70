// The entry points through which a program observes time, under the passthrough backend: its
// events, its synchronizations, its captures and graph launches. Each is forwarded to the real
// driver as it is (so errors, readiness and ordering stay the real driver's), and virtual_time.h
// is told what happened: cuEventElapsedTime then answers in virtual milliseconds and every
// synchronization moves the calling thread's virtual clock to the virtual finish of the work it
// waited for. Graph launches are measured. (Copies and sets: timed_copy_api.cpp.)
//
// The host time vgpu spends inside every call timed here is not charged to the calling thread's
// clock (thread_clock::Pause), and a real GPU shared by several virtual devices, whose
// synchronizations wait for each other's work, does not leak into it; what the real driver's
// call costs a real machine's thread (a launch, an event record, an async copy:
// timing/driver_call_cost.h) is charged, as on the sim backend (Pause::real).
#include <functional>

#include "common/log.h"
#include "front/driver/cuda_api.h"
#include "passthrough/kernel_recording.h"
#include "passthrough/launch_policy.h"
#include "passthrough/passthrough.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/poll_answer.h"
#include "passthrough/thread_clock.h"
#include "passthrough/timeline_writer.h"
#include "passthrough/virtual_time.h"

using vgpu::pt::KernelDurations;
using vgpu::pt::OpRef;
using vgpu::pt::Passthrough;
using vgpu::pt::PassState;
using vgpu::pt::StreamTarget;
using vgpu::pt::TimelineWriter;
using vgpu::pt::Timing;
using vgpu::pt::VirtualTime;
namespace thread_clock = vgpu::pt::thread_clock;

namespace {

// An event record that the thread's memo does not stand for (record_memo.h): its stream, capture
// and event device looked up. `thread`'s clock is entered (recorded_event). Out of line: its
// maps and calls made the settled record's frame larger (issue 21).
template <class Call>
[[gnu::noinline]] CUresult recorded_event_looked_up(vgpu::pt::CallThread& thread, CUevent e, CUstream s,
                                                    bool per_thread, Call call) {
  thread_clock::Pause pause(thread, thread_clock::Pause::Entered{});
  // Read before the answers below are looked up: a change among them leaves the memo stale.
  const uint64_t generation = thread.virtual_time != nullptr ? thread.virtual_time->record_generation() : 0;
  StreamTarget t;
  VirtualTime* vt = VirtualTime::for_call(s, per_thread, &t, pause);
  // The real driver refuses an event of another device; two virtual devices on one real GPU are
  // one device to it, so vgpu refuses as it would.
  if (vt != nullptr && e != nullptr) {
    const int event_device = vt->event_device(e, thread.event_device);
    if (event_device >= 0 && event_device != t.device) {
      vgpu::log::warn("cuEventRecord: the event belongs to virtual device {}, the stream to {}", event_device,
                      t.device);
      return CUDA_ERROR_INVALID_HANDLE;
    }
  }
  const CUresult r = pause.real(vgpu::timing::DriverCall::event_record, call);
  if (r == CUDA_SUCCESS && vt != nullptr) {
    // Memoized only with the generation read before its answers, and a device known (an
    // unknown one is asked again next time: VirtualTime::target) that indexes the horizons
    // (the memo's issue time reads its horizon unchecked: VirtualTime::issue_again).
    if (generation != 0 && thread.target.device >= 0 && t.device >= 0 &&
        t.device < thread_clock::detail::kMaxDevices) {
      vt->event_recorded(e, t, pause, thread.record, generation);
      thread.record.charges_driver = thread.charges_driver;  // asked by pause.real above
    } else
      vt->event_recorded(e, t, &pause);
  }
  return r;
}

// The thread's last record again (record_memo.h): its target, capture and event device answers
// stand, and the timeline's mark and entry are at hand. What Pause does for other calls is done
// here on the clock itself, with only what this path needs (~40 of its ~265 instructions were
// the scope's and the issue time's general tests: issue 21). The clock's charges are Pause's:
// entered first, the driver's cost (if charged) after the issue time, left before the record is
// made (below). The record itself goes to the thread's slot, without the timeline's lock
// (record_memo.h's RecordSlot), unless the thread has none.
template <class Call>
CUresult recorded_event(CUevent e, CUstream s, bool per_thread, Call call) {
  vgpu::pt::CallThread& thread = thread_clock::detail::call_thread_with_clock();
  vgpu::timing::ThreadClock& clock = *thread.clock;
  clock.enter();
  // The thread's memos come from the process's VirtualTime only (recorded_event_looked_up).
  const vgpu::pt::RecordMemo& memo = thread.record;
  vgpu::pt::VirtualTimeline* timeline = vgpu::pt::VirtualTimeline::memo_for(memo, e, s);
  if (timeline == nullptr) [[unlikely]]
    return recorded_event_looked_up(thread, e, s, per_thread, call);
  vgpu::pt::RecordSlot* slot = memo.slot;
  if (slot == nullptr) [[unlikely]]
    vgpu::pt::VirtualTimeline::prefetch_record(memo);  // fetched while the real driver runs
  const CUresult r = call();
  double issue = 0;
  if (r == CUDA_SUCCESS) [[likely]]
    issue = VirtualTime::issue_again(memo, clock);
  if (memo.charges_driver > 0) [[unlikely]]
    clock.charge_driver(vgpu::timing::real_driver_seconds(vgpu::timing::DriverCall::event_record,
                                                          vgpu::timing::Backend::passthrough));
  // The scope closes before the record's few stores are made: the clock's reading (a TSC read)
  // overlaps them (without a slot, rather than waiting behind the lock's atomic instruction, ~18%
  // of a record's own time over the stand-in: docs/results.md, callcost12). Those stores are the
  // program's time then, as the entry point's own wrapper is. A lock another thread holds is
  // waited for inside the scope.
  clock.leave();
  if (r != CUDA_SUCCESS) [[unlikely]]
    return r;
  if (slot != nullptr) [[likely]] {
    slot->publish(issue);
    return r;
  }
  if (!timeline->record_again_if_free(memo, issue)) {
    clock.enter();
    thread.virtual_time->event_recorded_again(memo, issue);  // the memo's maker: set
    clock.leave();
  }
  return r;
}

template <class Call>
CUresult stream_waits(CUstream s, CUevent e, bool per_thread, Call call) {
  thread_clock::Pause pause;
  StreamTarget t;
  VirtualTime* vt = VirtualTime::for_call(s, per_thread, &t, pause);
  const CUresult r = call();
  if (r == CUDA_SUCCESS && vt != nullptr) vt->stream_waits(t, e);
  return r;
}

// A synchronization writes the launch counts that went unwritten (launch_policy.h), so that a
// script reading VGPU_LAUNCH_STATS after synchronizing reads them all.
void publish_launch_counts() {
  if (KernelDurations* d = Passthrough::get().durations_if_made()) d->publish_pending();
}

template <class Call>
CUresult stream_synchronized(CUstream s, bool per_thread, Call call) {
  publish_launch_counts();
  thread_clock::Pause pause(/*blocking=*/true);
  VirtualTime* vt = VirtualTime::get();
  StreamTarget t;
  const bool known = vt != nullptr && vt->target(s, per_thread, &t, pause.thread().target);
  const CUresult r = call();
  if (r == CUDA_SUCCESS && known) vt->synchronized(vt->timeline().tail(t.key), t.device);
  return r;
}

CUresult context_synchronized(CUcontext ctx, CUresult (*real)(CUcontext), bool explicit_ctx) {
  publish_launch_counts();
  thread_clock::Pause pause(/*blocking=*/true);
  VirtualTime* vt = VirtualTime::get();
  if (ctx == nullptr) VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&ctx);
  const CUresult r = explicit_ctx ? real(ctx) : VGPU_REAL("cuCtxSynchronize", CUresult (*)())();
  if (r == CUDA_SUCCESS && vt != nullptr && ctx != nullptr) {
    PassState* s = PassState::get();
    vt->context_synchronized(ctx, s ? std::max(0, s->device_of(ctx)) : 0);
  }
  return r;
}

template <class Call>
CUresult graph_launch(CUstream s, bool per_thread, Call call) {
  thread_clock::Pause pause;
  StreamTarget t;
  VirtualTime::Bracket bracket;
  Timing timing;
  timing.source = Timing::Source::measured;
  if (TimelineWriter::get() != nullptr) timing.label = "graph launch";
  VirtualTime* vt = VirtualTime::for_call(s, per_thread, &t, pause);
  if (vt != nullptr) bracket = vt->begin(t, timing);
  const CUresult r = pause.real(vgpu::timing::DriverCall::launch, call);
  if (vt == nullptr) return r;
  if (r == CUDA_SUCCESS)
    vt->submit(t, std::move(timing), bracket);
  else
    vt->abandon(bracket);
  return r;
}

#define REAL(name, ...) VGPU_REAL(#name, CUresult (*)(__VA_ARGS__))

// A query of a stream's or an event's work, taken as poll_answer.h says: `awaited` names what is
// asked about (the stream, the event), `work` finds its op, asked only when "ready" ends polling.
template <class Call>
CUresult queried(const void* awaited, const std::function<OpRef(VirtualTime&)>& work, Call call) {
  thread_clock::Pause pause(thread_clock::Pause::Query{});
  const CUresult r = call();
  const bool moved = vgpu::pt::take_answer(r, awaited, *pause.thread().clock, [&work] {
    VirtualTime* vt = VirtualTime::get();
    const OpRef op = vt != nullptr ? work(*vt) : nullptr;
    if (!op) return -1.0;
    vt->resolve_for_poll(op);
    const std::optional<double> f = vt->timeline().finish(op);
    return f ? *f : -1.0;
  });
  if (moved) vgpu::log::trace("vtime: a poller heard ready and moved to the awaited work's finish");
  return r;
}

// What a stream query asks about: the stream, the per-thread default stream standing apart from
// the legacy one (both may be passed as 0).
const void* stream_asked(CUstream s, bool per_thread) {
  if (per_thread && s == nullptr) return CU_STREAM_PER_THREAD;
  return s;
}

OpRef stream_tail(VirtualTime& vt, CUstream s, bool per_thread) {
  StreamTarget t;
  return vt.target(s, per_thread, &t) ? vt.timeline().tail(t.key) : nullptr;
}

}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream s) {
  return queried(stream_asked(s, false), [s](VirtualTime& vt) { return stream_tail(vt, s, false); },
                 [&] { return REAL(cuStreamQuery, CUstream)(s); });
}
VGPU_EXPORT CUresult CUDAAPI cuStreamQuery_ptsz(CUstream s) {
  return queried(stream_asked(s, true), [s](VirtualTime& vt) { return stream_tail(vt, s, true); },
                 [&] { return REAL(cuStreamQuery_ptsz, CUstream)(s); });
}
VGPU_EXPORT CUresult CUDAAPI cuEventQuery(CUevent e) {
  return queried(e, [e](VirtualTime& vt) { return vt.event_op(e); }, [&] { return REAL(cuEventQuery, CUevent)(e); });
}

// ---- events ----
// (The calls capture their arguments by value: by reference they were stored to the stack and
// their addresses passed to recorded_event_looked_up on every record, ~8 instructions.)
VGPU_EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  return recorded_event(e, s, false, [e, s] { return REAL(cuEventRecord, CUevent, CUstream)(e, s); });
}
VGPU_EXPORT CUresult CUDAAPI cuEventRecord_ptsz(CUevent e, CUstream s) {
  return recorded_event(e, s, true, [e, s] { return REAL(cuEventRecord_ptsz, CUevent, CUstream)(e, s); });
}
VGPU_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream s, unsigned flags) {
  return recorded_event(e, s, false,
                        [e, s, flags] { return REAL(cuEventRecordWithFlags, CUevent, CUstream, unsigned)(e, s, flags); });
}
VGPU_EXPORT CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned flags) {
  return recorded_event(e, s, true, [e, s, flags] {
    return REAL(cuEventRecordWithFlags_ptsz, CUevent, CUstream, unsigned)(e, s, flags);
  });
}

VGPU_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  publish_launch_counts();
  thread_clock::Pause pause(/*blocking=*/true);
  const CUresult r = REAL(cuEventSynchronize, CUevent)(e);
  if (r != CUDA_SUCCESS) return r;
  if (VirtualTime* vt = VirtualTime::get())
    if (const OpRef op = vt->event_op(e)) vt->synchronized(op, op->device);
  return r;
}

namespace {
CUresult elapsed(float* ms, CUevent a, CUevent b, CUresult (*real)(float*, CUevent, CUevent)) {
  thread_clock::Pause pause(/*blocking=*/true);  // may wait for measurements
  // The real driver checks the handles, the timing flags and that both events completed.
  const CUresult r = real(ms, a, b);
  if (r != CUDA_SUCCESS) return r;
  if (VirtualTime* vt = VirtualTime::get())
    if (const std::optional<float> v = vt->elapsed_ms(a, b)) *ms = *v;
  return r;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  return elapsed(ms, a, b, REAL(cuEventElapsedTime, float*, CUevent, CUevent));
}
VGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  return elapsed(ms, a, b, REAL(cuEventElapsedTime_v2, float*, CUevent, CUevent));
}

namespace {
template <class Call>
CUresult created_event(CUevent* e, Call call) {
  const CUresult r = call();
  if (r != CUDA_SUCCESS || e == nullptr || *e == nullptr) return r;
  VirtualTime* vt = VirtualTime::get();
  PassState* s = PassState::get();
  CUcontext ctx = nullptr;
  if (vt != nullptr && s != nullptr && VGPU_REAL("cuCtxGetCurrent", CUresult (*)(CUcontext*))(&ctx) == CUDA_SUCCESS &&
      ctx != nullptr)
    vt->event_created(*e, s->device_of(ctx));
  return r;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned flags) {
  return created_event(e, [&] { return REAL(cuEventCreate, CUevent*, unsigned)(e, flags); });
}

VGPU_EXPORT CUresult CUDAAPI cuEventDestroy_v2(CUevent e) {
  const CUresult r = REAL(cuEventDestroy_v2, CUevent)(e);
  if (r == CUDA_SUCCESS)
    if (VirtualTime* vt = VirtualTime::get()) vt->event_destroyed(e);
  return r;
}
VGPU_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }

// ---- streams and contexts ----
VGPU_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  return stream_waits(s, e, false, [&] { return REAL(cuStreamWaitEvent, CUstream, CUevent, unsigned)(s, e, flags); });
}
VGPU_EXPORT CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned flags) {
  return stream_waits(s, e, true,
                      [&] { return REAL(cuStreamWaitEvent_ptsz, CUstream, CUevent, unsigned)(s, e, flags); });
}
VGPU_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  return stream_synchronized(s, false, [&] { return REAL(cuStreamSynchronize, CUstream)(s); });
}
VGPU_EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream s) {
  return stream_synchronized(s, true, [&] { return REAL(cuStreamSynchronize_ptsz, CUstream)(s); });
}
VGPU_EXPORT CUresult CUDAAPI cuStreamDestroy_v2(CUstream s) {
  if (VirtualTime* vt = VirtualTime::get()) vt->stream_destroyed(s);
  if (vgpu::pt::KernelRecording* rec = vgpu::pt::KernelRecording::get()) {
    CUcontext ctx = nullptr;
    if (REAL(cuStreamGetCtx, CUstream, CUcontext*)(s, &ctx) == CUDA_SUCCESS) rec->forget_stream(ctx, s);
  }
  return REAL(cuStreamDestroy_v2, CUstream)(s);
}
VGPU_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream s) { return cuStreamDestroy_v2(s); }

VGPU_EXPORT CUresult CUDAAPI cuCtxSynchronize() { return context_synchronized(nullptr, nullptr, false); }
VGPU_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  if (CUresult r = vgpu::pt::real_context_arg(&ctx); r != CUDA_SUCCESS) return r;
  return context_synchronized(ctx, REAL(cuCtxSynchronize_v2, CUcontext), true);
}

// ---- stream capture: only counted, so that launches ask about capture only while one is open ----
namespace {
CUresult capture_begun(CUresult r) {
  if (r == CUDA_SUCCESS)
    if (VirtualTime* vt = VirtualTime::get()) vt->capture_opened();
  return r;
}
CUresult capture_ended(CUresult r) {
  // Ended, successfully or invalidated; any other error leaves the capture open.
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    if (VirtualTime* vt = VirtualTime::get()) vt->capture_closed();
  return r;
}
}  // namespace

VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream s) {
  return capture_begun(REAL(cuStreamBeginCapture, CUstream)(s));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream s) {
  return capture_begun(REAL(cuStreamBeginCapture_ptsz, CUstream)(s));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  return capture_begun(REAL(cuStreamBeginCapture_v2, CUstream, CUstreamCaptureMode)(s, mode));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  return capture_begun(REAL(cuStreamBeginCapture_v2_ptsz, CUstream, CUstreamCaptureMode)(s, mode));
}
using BeginToGraphFn = CUresult (*)(CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                                    CUstreamCaptureMode);
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode* deps,
                                                         const CUgraphEdgeData* data, size_t n,
                                                         CUstreamCaptureMode mode) {
  return capture_begun(VGPU_REAL("cuStreamBeginCaptureToGraph", BeginToGraphFn)(s, g, deps, data, n, mode));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode* deps,
                                                              const CUgraphEdgeData* data, size_t n,
                                                              CUstreamCaptureMode mode) {
  return capture_begun(VGPU_REAL("cuStreamBeginCaptureToGraph_ptsz", BeginToGraphFn)(s, g, deps, data, n, mode));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph* g) {
  return capture_ended(REAL(cuStreamEndCapture, CUstream, CUgraph*)(s, g));
}
VGPU_EXPORT CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) {
  return capture_ended(REAL(cuStreamEndCapture_ptsz, CUstream, CUgraph*)(s, g));
}

// ---- graphs ----
VGPU_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec g, CUstream s) {
  return graph_launch(s, false, [&] { return REAL(cuGraphLaunch, CUgraphExec, CUstream)(g, s); });
}
VGPU_EXPORT CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec g, CUstream s) {
  return graph_launch(s, true, [&] { return REAL(cuGraphLaunch_ptsz, CUgraphExec, CUstream)(g, s); });
}
