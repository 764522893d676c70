// VGPU_HOST_SAMPLES: where a job's host threads spend their CPU time, sampled (a debugging aid).
//
// Why: a step under vgpu is its threads' virtual clocks, and the clock report (clock_report.h)
// says how much of a thread's time was its own CPU work between driver calls; when that differs
// from the real machine's, the question is whose code burnt it (the framework's, NCCL's host
// side, the real driver's private tables, which vgpu forwards without timing them). The device
// machines have no profiler, so the driver samples itself: with the setting present, a
// process-wide CPU-time timer (a POSIX timer on CLOCK_PROCESS_CPUTIME_ID sending SIGPROF every 1 ms of
// CPU, in practice at the kernel's tick; deleted by execve) interrupts whichever thread is running
// and the interrupted stack (up to kDepth frames) is kept; at exit each process appends one JSON
// line: per thread, its samples, the libraries on its stacks (inclusive counts) and its most
// frequent stacks, innermost first, as "library!symbol" (symbols the libraries export).
// When the program marks profiling ranges (cuProfilerStart/Stop), only what ran inside them.
// Nothing is installed unless the setting is present; a program that uses SIGPROF itself must
// not set it.
#pragma once

#include <string>

namespace vgpu::timing::host_samples {

// Starts sampling if VGPU_HOST_SAMPLES is set (once per process; cheap after the first call).
void arm_if_wanted();
// Starts sampling regardless of the setting (tests).
void arm();

// The program opened / closed a profiling range: the first opening drops what was sampled
// before it; outside ranges nothing is kept from then on.
void range_start();
void range_stop();

// The report's line (tests; the exit handler writes it when the setting is present).
std::string report();

}  // namespace vgpu::timing::host_samples
