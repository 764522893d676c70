// The job's clock on the calling thread: thread_clock.h's rule fed with the real clocks
// (real_calls.h) and the driver's virtual clock (driver_clock.h), with the per-thread state in
// initial-exec TLS and a recursion guard.
//
// The guard: the driver (and anything it calls while answering) reads clocks too. A clock read
// made while this thread is already inside the shim gets the real value and never re-enters the
// driver, so nothing recurses and the driver's own timing stays real.
#pragma once

#include <time.h>

#include <cstdint>

namespace vgpu::vclock_shim {

// The job's reading of clock index `c`, given the real reading `real_ns` just taken. Returns
// real_ns for threads without a virtual clock.
int64_t job_now_ns(int c, int64_t real_ns);

// An absolute deadline `abs` on clock index `c` that the calling thread computed from its own
// readings, moved onto the real clock: a wait then lasts, in real time, as long as the reading
// said was left. False (and *out untouched) when the thread's readings are the real ones, so
// that the caller passes `abs` through unchanged.
bool real_deadline(int c, const timespec& abs, timespec* out);

// Hand-overs between threads (handoff.h): the calling thread's virtual clock in the driver, in
// seconds, when it has one (false on threads without one, inside a driver call, or inside the
// shim); and moving it to `seconds`, never back (false when nothing was moved or could be).
bool job_virtual_seconds(double* seconds);
bool job_handoff(double seconds);

// Registers the fork handler and resolves the real definitions (the shim's constructor).
void install();

}  // namespace vgpu::vclock_shim
