// The job's shared engine (vgpud) for the sim backend's collectives, when ranks are processes
// (torchrun under vgpu-run): each process keeps its own engine for its streams, so a flow it
// places there contends only with flows of its own ranks; the job's vgpud sees every process's
// flows of every collective, so a link that ranks of two processes cross (two communicators
// whose rings cross one node's NIC from two GPUs) is shared there as in one process's engine.
//
// Used when VGPU_SIMCORE=daemon (vgpu-run sets it; the NCCL plugin uses the same vgpud): the
// connection is made at the first collective that needs it (vgpud started on demand if none
// answers). With another setting, or no vgpud within the connect timeout, one info line, and
// collectives keep their own process's placement (nccl_link_share.h). A vgpud lost mid-job (its
// calls fail): one warning, and the same from then on.
//
// Each process places its own ranks' flows only (every rank's process places its own), and
// reads how long every rank's flows take from the shared engine: a tentative answer
// (nccl_collectives.h says when it is read and what it can miss). The flows of a thread's NCCL
// group go in one request at the group's end (vgpud protocol 7, simcore::share_collectives): each
// collective names its key (communicator, count of its shared collectives: alike on every rank)
// and this process's ranks of it; vgpud places the flows, moves this process's floor, holds the
// reply until every rank of each key placed its flows (any process's request) and answers the
// latest finish of all of them; it releases the flows then. No barrier of the processes' own.
//
// Bounded memory in vgpud: each process registers one rank there and moves that rank's floor as
// its own engine's floor moves, so that vgpud finalizes and reclaims the flows of past
// collectives, and forgets their ids once released: the rank, when a floor may move and how it
// goes out are simcore/job_rank_floor.h's (shared with the NCCL plugin). The floor this process
// promises is its engine's lowest thread floor. Why no later placement of any process is refused
// by it:
// - This process: every flow it places in vgpud starts at or after an arrival op its own engine
//   placed in its launch call (the job's latest arrival, plus the model's latency part), and an
//   arrival starts at or after its thread's clock, which is at or above every promise the thread
//   made. The flows go to vgpud at the end of the thread's NCCL group (at the latest its next
//   driver call), in the request that also carries the floor, placed before the floor moves:
//   since the launch the thread's clock moved by the group's own host time (its launch calls,
//   microseconds), so its promises stay within that of the arrival. Another thread's flows still
//   held (its group not over) are as close to its own arrival. The floor sent is this process's
//   lowest thread floor less kFloorLag (1 ms, far above a group's host time): below every flow
//   it places later.
// - The other processes: vgpud's floor is the least of the registered ranks' floors, so a
//   registered process holds it back by its own floor (above); one not registered yet holds
//   nothing back, hence no floor moves before vgpud has seen every process registered
//   (job_rank_floor.h).
// A process that hangs, alive, holds vgpud's floor where it stopped: memory grows again as it did
// without floors, and nothing waits for it (no caller here waits for finality in vgpud).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "simcore/job_rank_floor.h"
#include "simcore/remote_engine.h"

namespace vgpu {

class NcclSharedFabric {
 public:
  NcclSharedFabric();
  ~NcclSharedFabric();

  // VGPU_SIMCORE=daemon: the job has (or should have) a vgpud.
  bool wanted() const { return wanted_; }
  // The job's engine; null when not used (setting, no vgpud, lost). The first call of a process
  // that needs it connects, or says in one info line why not.
  simcore::Engine* engine();
  // One request: `collectives`' flows placed, this process's floor in vgpud moved to `own_floor`
  // (its engine's lowest thread floor) less JobRankFloor::kFloorLag when allowed, and once every rank
  // of each collective placed its flows (vgpud's bounded wait), each one's latest finish of all
  // of them (no finish when none, or every one when the engine was lost: warned once, not used
  // again).
  std::vector<simcore::SharedResult> share(std::span<const simcore::SharedCollective> collectives, double own_floor);
  // Requests made so far (one per share()), for the debug log and tests.
  uint64_t answer_calls() const { return answer_calls_.load(std::memory_order_relaxed); }

  // After a call that may have failed: false (and one warning) when the engine is lost.
  bool alive();

 private:
  const bool wanted_;
  std::mutex mu_;
  bool tried_ = false;
  std::unique_ptr<simcore::Engine> engine_;
  std::atomic<simcore::Engine*> ready_{nullptr};  // engine_ while usable
  std::atomic<bool> gave_up_{false};               // not used again (setting, no vgpud, lost)
  std::atomic<uint64_t> answer_calls_{0};
  simcore::JobRankFloor floor_{simcore::JobRankFloor::User::sim_collectives};
};

}  // namespace vgpu
