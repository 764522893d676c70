// Work handed from one thread to another through a condition variable carries virtual time.
//
// Why: programs hand work between threads without the driver. PyTorch's main thread calls
// backward() and sleeps on a condition variable while its autograd thread launches the backward
// pass, then wakes when that thread signals the end; FSDP2's backward runs for tens of
// milliseconds of host time there. Each thread's virtual clock counts only its own CPU time, so
// the main thread woke at the virtual time it went to sleep, and the optimizer's host work
// overlapped the backward pass's in virtual time where on the real machine it follows it
// (FSDP2 on 2 × H200: rank 0's backward phase 0.5 ms of host time under vgpu, 28.9 ms real).
//
// So a signal is a message: pthread_cond_signal/broadcast record the signalling thread's
// virtual clock with the condition variable, and a thread that returns from waiting on it (woken,
// not timed out) goes on from there, never back (a Lamport clock over condition variables).
// Only threads that keep virtual time in the driver take part on either side; the driver's own
// threads and calls never do. The table is fixed-size and direct-mapped: a collision replaces
// the older entry, so at worst a hand-over is missed, never invented.
#pragma once

namespace vgpu::vclock_shim::handoff {

// Called before the real signal or broadcast on `cond`.
void signalled(const void* cond);
// Called when a wait on `cond` returned 0 (woken).
void woke(const void* cond);

}  // namespace vgpu::vclock_shim::handoff
