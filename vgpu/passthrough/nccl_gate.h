// Holding an NCCL collective's kernel back on the GPU until every rank of its communicator has
// launched it (VGPU_NCCL_GATE).
//
// Why: under the passthrough the ranks of a job share one physical GPU, and a rank's NCCL kernel
// starts as soon as its stream reaches it, then spins until its peers' kernels run. The GPU
// time-slices the ranks' contexts, so while one spins, a kernel another rank is measuring takes
// the spinning context's slices: on 8 ranks of one H200 the LM head's GEMM read 2.4 ms at least,
// 5.1 ms median, 18.4 ms at most over 72 launches, and a step took 2.4-4.0 s of wall time.
// Gated, the kernel's stream first waits (cuStreamWaitValue32, in the GPU's front end) on every
// other rank's count of launches of that communicator, kept in host memory the job's processes
// share and the GPU reads: the kernel starts only when all ranks have launched theirs.
//
// Which launches: every rank of a communicator launches the same collectives in the same order
// (NCCL requires it), so the k-th collective kernel of a communicator is the same on every rank.
// The ranks publish their arrival right after queuing the waits, before their own kernel is queued:
// nothing a rank does between the two (the real launch may block on the driver) can then wait on a
// peer that waits on it. A rule that assumes more than NCCL promises could still hold a stream for
// ever; a watchdog thread lets a communicator go when one of this process's ranks has waited on it
// past kStallSeconds (Table::release_stalled), with one log line giving every rank's count.
//
// Point-to-point work is not (a send/recv involves two ranks of many), so a launch with any
// send or receive in it is never gated nor counted. Graph capture is left alone (the caller does
// not time captured launches).
#pragma once

#include <cstdint>
#include <mutex>

#include "front/driver/cuda_api.h"
#include "passthrough/nccl_gate_table.h"

namespace vgpu::pt::nccl_gate {

// The process's gate table over the job's shared file, registered with the real driver so that
// every context's GPU can wait on it; held by the backend root (passthrough.h), made on first use.
class Tables {
 public:
  static constexpr double kStallSeconds = 5.0;

  Table* get();  // nullptr when the job's file is unavailable (one log line says why)
  // Whether this process's GPU can wait on the table (registered with the real driver); when
  // not, its ranks only publish their arrivals, so that peers elsewhere are not held for ever.
  bool can_wait() { return get() != nullptr && can_wait_; }

 private:
  std::once_flag once_;
  Table* table_ = nullptr;  // never freed: launches run during exit
  bool can_wait_ = false;   // set under once_
  void watch();             // the watchdog thread's loop (started under once_, never joined)
};


// VGPU_NCCL_GATE, read once.
bool enabled();

// This rank's arrival, published once its kernel is queued (arrive()).
struct Ticket {
  uint32_t* count = nullptr;  // this rank's count of gated launches of the communicator
  uint32_t value = 0;
};

// For an NCCL kernel launch with plugin launch tag `launch` about to be queued on `stream` (its
// context current): queues the waits for the communicator's other ranks when the launch is a
// collective one. An empty ticket when nothing was gated.
Ticket hold(uint64_t launch, CUstream stream);
// Publishes this rank's arrival (before the real launch is queued: see above).
void arrive(const Ticket& ticket);

}  // namespace vgpu::pt::nccl_gate
