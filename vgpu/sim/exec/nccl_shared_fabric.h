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
// reads how long they take from the shared engine: a tentative answer (nccl_collectives.h says
// when it is read, how the ranks agree on it and what it can miss). No rank is registered there: no floor, every answer
// counts the flows placed so far, in any order (simcore rolls back).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>

namespace simcore {
class Engine;
}

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
  // The latest finish of `ids` in the shared engine as known now; nullopt when the engine was
  // lost (warned once, not used again) or an id is unknown there.
  std::optional<double> finish(std::span<const uint64_t> ids);
  // After a call that may have failed: false (and one warning) when the engine is lost.
  bool alive();

 private:
  const bool wanted_;
  std::mutex mu_;
  bool tried_ = false;
  std::unique_ptr<simcore::Engine> engine_;
  std::atomic<simcore::Engine*> ready_{nullptr};  // engine_ while usable
  std::atomic<bool> gave_up_{false};               // not used again (setting, no vgpud, lost)
};

}  // namespace vgpu
