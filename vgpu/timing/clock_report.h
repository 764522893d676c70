// VGPU_CLOCK_REPORT: where each host thread's virtual time came from, written at exit.
//
// Why: a job's step under vgpu is its threads' virtual clocks, and when it reads differently from
// the real machine the first question is which part of a thread's time differs: its CPU time
// between driver calls (inflated when the physical host is busier than the real one would be),
// the real driver's own work charged per call, jumps to the work it synchronized with or polled
// for, raises to a device's horizon, hand-overs from another thread (a condition variable it
// signalled), or spin time dropped while polling. One JSON line per thread that kept virtual
// time, for every process of the job:
//   {"pid", "tid", "name", "calls", "cpu_s", "driver_s", "sync_s", "poll_s", "horizon_s",
//    "handoff_s", "dropped_s", "raised_s"}
// (raised_s: how far the thread's synchronizations moved its device's horizon, which other
// threads of the process are raised to when they submit: the passthrough's VGPU_HORIZON)
// When the program marks a range (cuProfilerStart ... cuProfilerStop, i.e. cudaProfilerStart/Stop or
// torch.cuda.profiler.start/stop, as it would for Nsight Systems), each line counts only what
// happened inside its ranges (all of them added up) and says so ("range": true): a training
// loop's steady steps without its start-up.
// Nothing is registered, and nothing costs, unless the setting is present.
#pragma once

#include <string>

namespace vgpu::timing {
class ThreadClock;
}

namespace vgpu::timing::clock_report {

// The calling thread started keeping time on `clock` (its own): listed in the report if one is
// asked for. Once per thread.
void register_thread(const ThreadClock& clock);

// The program opened / closed a profiling range (cuProfilerStart / cuProfilerStop, any thread).
// A start inside a range and a stop outside one are ignored.
void range_start();
void range_stop();

// The report's lines for every thread registered so far (tests; the exit handler writes these).
std::string lines();

}  // namespace vgpu::timing::clock_report
