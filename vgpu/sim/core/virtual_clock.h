// The virtual CPU clock of each host thread under the sim backend: the rule both backends share
// (timing/thread_clock.h: CPU time between driver calls, never vgpu's own time inside a call,
// and a jump forward to the virtual finish of the work the thread synchronizes with), plus what
// only this backend needs. Every stream op starts no earlier than its issuing thread's clock
// plus kLaunchLatency.
//
// The clock is also the thread's promise to the simcore engine (its rank's floor, see
// sim/core/thread_state.h): it never moves back, and no op the thread submits starts before it.
// The promise is renewed when the clock jumps (synchronization) and, as it creeps forward by
// CPU time, once every kFloorStep, so that ordinary calls do not all take the engine's lock.
#pragma once

#include "timing/launch_latency.h"  // kLaunchLatency

namespace vgpu::vclock {

// How far a thread's clock creeps (by CPU time) before its floor is renewed. A lower floor is
// always a kept promise; it only delays reclaiming the work that finishes in between.
inline constexpr double kFloorStep = 10e-6;

// The brackets of one driver call, as calls too (for code built into both backends,
// front/driver/device_api.cpp, which reaches them through weak references: the passthrough
// library keeps no virtual clocks). The outermost bracket on a thread first adds the CPU time the
// thread spent since it last left the driver, and on exit records the CPU time, so that the time
// spent inside the call is not charged; brackets nest (an entry point calling submit()).
// enter_neutral_call: a call that neither asks about work nor does any (the current context,
// device and attribute calls); enter_query_call: a question about work (cuStreamQuery,
// cuEventQuery). Either keeps a polling thread polling (timing/thread_clock.h).
void enter_call();
void enter_neutral_call();
void enter_query_call();
void leave_call();

template <void (*Enter)()>
class BasicCallScope {
 public:
  BasicCallScope() { Enter(); }
  ~BasicCallScope() { leave_call(); }
  BasicCallScope(const BasicCallScope&) = delete;
  BasicCallScope& operator=(const BasicCallScope&) = delete;
};
using CallScope = BasicCallScope<enter_call>;
using NeutralCallScope = BasicCallScope<enter_neutral_call>;
using QueryCallScope = BasicCallScope<enter_query_call>;

// Work the calling thread must finish before its next driver call does anything (a send/recv
// kernel held from its launch until NCCL names its peers, sim/exec/nccl_p2p.h): `fn` runs once,
// inside the thread's next outermost enter_call or enter_query_call, before the call's own work.
// Not at a neutral call: the NCCL profiler's callbacks, which bring what the work waits for,
// bracket themselves as neutral calls. Outermost: outside NCCL's group too, which the host cost
// model brackets as one call (timing/nccl_group_hooks.h). A thread holds one such function;
// setting it again replaces it (callers keep their own list).
void before_next_call(void (*fn)());

// The calling thread's virtual clock, seconds.
double now();
// Whether the calling thread is inside a driver call (a CallScope is open).
bool in_call();
// Move the calling thread's clock forward to `t` (never backward): synchronization. The thread's
// floor follows at once, or (`floor_now` false: a launch waiting for room in its stream's queue,
// once per launch) only when the clock is kFloorStep past the last promise, as it does when
// the clock creeps by CPU time, so that such waits do not all take the engine's lock.
void advance_to(double t, bool floor_now = true);
// The earliest virtual start of an op the calling thread submits now: its clock plus the launch
// latency. Makes the thread a rank of the engine on its first submission (a thread joining
// late starts at the other ranks' floor, see ThreadRanks::join). Only after cuInit.
double earliest_start();

// VGPU_TIMELINE=<path>: writes the engine's timeline at process exit. Installed once; safe to
// call many times.
void install_timeline_writer();
// The file VGPU_TIMELINE names, or null: none is asked for, or this library is not the process's
// driver but the "real driver" under a passthrough libcuda (the tests' stand-in for a GPU), whose
// own timeline goes to that file.
const char* timeline_path();

}  // namespace vgpu::vclock

// The first line of every entry point (VGPU_EXPORT function) of the execution concern, so that
// no call charges vgpu's own time to the calling thread's virtual clock. Entry points of other
// concerns should open it too.
#define VGPU_CALL_SCOPE() const ::vgpu::vclock::CallScope vgpu_call_scope_
#define VGPU_NEUTRAL_CALL_SCOPE() const ::vgpu::vclock::NeutralCallScope vgpu_call_scope_
#define VGPU_QUERY_CALL_SCOPE() const ::vgpu::vclock::QueryCallScope vgpu_call_scope_
