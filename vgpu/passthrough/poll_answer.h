// How the passthrough takes a query's answer (cuStreamQuery, cuEventQuery: timed_api.cpp), apart
// from the driver and the thread clock so that its rule can be tested alone
// (tests/passthrough/poll_answer_test.cpp).
//
// The rule is the thread clock's polling (timing/thread_clock.h): "not ready" makes the thread a
// poller of what it asked about, whose waiting is not charged; "ready" after that moves its clock
// to the virtual finish of the work, as the synchronization the polling loop stands for; "ready"
// heard without polling is no synchronization. Only a thread that keeps virtual time polls, and
// an answer about other work than what it polls for moves nothing (PyTorch's allocator asks about
// several events in a row). The poller's clock moves alone: its device's horizon does not follow,
// as it would a synchronization's (pollers are often bystanders, such as NCCL's watchdog). What
// this adds: the work's finish is looked up
// only for that one answer. The lookup takes the virtual timeline's lock, which NCCL's proxy
// threads also take (the plugin asks each transfer for its launch's virtual start), and a
// contended waiter spins, then sleeps: nccl-tests' poller slept there on its "not ready" answers
// and woke on a cold core, and the next iteration's host code ran 5-30x slower (issue 18; the
// first timed iteration's extra host time, median 82 us, is 40 us without the lookup, the real
// machine's 17).
#pragma once

#include <cuda.h>

namespace vgpu::pt {

// `clock`: the calling thread's clock (timing::ThreadClock: polling(), polled_not_ready(awaited),
// polled_ready(awaited, finish)). `finish_of_work()`: the awaited
// work's virtual finish in seconds (< 0: unknown), asked only when the answer moves the clock.
// `awaited` names what was asked about (a stream, an event). Returns whether the clock moved.
template <class Clock, class FinishOfWork>
bool take_answer(CUresult answer, const void* awaited, Clock& clock, FinishOfWork&& finish_of_work) {
  if (answer == CUDA_ERROR_NOT_READY) {
    clock.polled_not_ready(awaited);
    return false;
  }
  if (answer != CUDA_SUCCESS || !clock.polling()) return false;
  return clock.polled_ready(awaited, finish_of_work());
}

}  // namespace vgpu::pt
