// Where the ranks of one NCCL communicator that live in *different processes* of a job (torchrun:
// one process per rank) meet on the sim backend, so that each NCCL kernel starts when the last
// rank of the job has arrived, not only the last rank of its own process (nccl_collectives.h).
//
// Each process keeps its own simcore engine, and every process's virtual time starts at 0 with
// the job, so arrivals are exchanged as virtual times: rank r of communicator c posts, for its
// k-th collective on c, the virtual time its kernel would start on its own and its global GPU,
// into a shared-memory table of the job (/dev/shm/vgpu-nccl-<uid>-<job id>, created on the first
// collective, removed by vgpu-run at the end). A process that drives one GPU (torchrun's case)
// then waits, in real time and without spinning (a futex on the slot), until every rank of the
// communicator has posted its k-th arrival: the real kernels do the same. (A process driving
// several GPUs must not wait at each rank: one thread may launch every rank of a group, and
// would wait for itself; nccl_collectives.h posts its early ranks with `wait` false, which takes
// the arrivals already posted, and waits at its last rank only.)
//
// Table: per communicator (found by id, open addressing; kMaxComms) one slot per rank: a counter of
// collectives posted (futex word), the last kRing arrivals and the rank's GPU (roster()). A rank waits at collective k for
// every other rank's k-th post, so no rank gets more than one collective ahead of a rank that
// still reads; an arrival that was overwritten all the same (a process that did not wait) is
// detected by the counter and counted as not known.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vgpu {

class NcclRendezvous {
 public:
  struct Arrivals {
    bool complete = false;     // every rank's arrival is known
    double latest = 0;         // the latest known arrival (virtual seconds)
    std::vector<int> gpus;     // every rank's global GPU, -1 where not known
    int known = 0;             // ranks whose arrival is known (this one included)
  };

  // `path`: the shared table; empty: /dev/shm/vgpu-nccl-<uid>-<job id of this job>.
  explicit NcclRendezvous(std::string path = {});
  ~NcclRendezvous();
  NcclRendezvous(const NcclRendezvous&) = delete;
  NcclRendezvous& operator=(const NcclRendezvous&) = delete;

  // Posts rank `rank`'s next collective on `comm` (counted here per (comm, rank)) arriving at
  // virtual time `arrival` on global GPU `gpu`, then collects the other ranks' arrivals at the
  // same collective: waiting for them when `wait` (at most `timeout_s` of real time, then with
  // a warning the ranks known so far), else those already posted. Without a table (it could not
  // be opened, or is full) only this rank is known.
  Arrivals arrive(uint64_t comm, int nranks, int rank, int gpu, double arrival, bool wait,
                  double timeout_s);

  // The communicator's roster: posts rank `rank`'s global GPU `gpu` (counting no collective) and
  // returns every rank's GPU posted so far, here or by arrive(), -1 where not yet. For kernels
  // that meet no other rank (send/recv, graph replays): a pipeline stage's two-rank send/recv
  // communicator spans whatever GPUs its ranks hold, which no guess from this rank's GPU tells.
  // Without a table only this rank is known.
  std::vector<int> roster(uint64_t comm, int nranks, int rank, int gpu);

  static std::string default_path();
  static constexpr int kMaxRanks = 4096;  // per communicator
  // Per job: entries of communicators (one each: its arrivals; the shared flows' answers are
  // vgpud's, nccl_shared_fabric.h). 64 ranks as tensor 8 x pipeline 2 x data 4 have
  // 8 + 32 + 16 = 56 communicators. The table is a sparse file: an entry's pages exist once a rank wrote there
  // (a page or two for a communicator of up to ~80 ranks), however many entries it could hold.
  static constexpr int kMaxComms = 1024;
  static constexpr int kRing = 4;         // arrivals kept per rank

 private:
  // arrive()'s two halves: post() returns the collective's number + 1 (0: no table), collect()
  // the arrivals at it.
  uint64_t post(uint64_t comm, int nranks, int rank, int gpu, double arrival);
  Arrivals collect(uint64_t comm, int nranks, int rank, int gpu, double arrival, uint64_t posted, bool wait,
                   double timeout_s);

  struct Table;
  struct CommBlock;
  CommBlock* block(uint64_t comm, int nranks);  // under mu_; nullptr when unavailable

  std::string path_;
  std::mutex mu_;
  bool tried_ = false;
  Table* table_ = nullptr;
  size_t size_ = 0;
  std::map<std::pair<uint64_t, int>, uint64_t> posted_;  // (comm, rank) -> collectives posted
  std::map<uint64_t, CommBlock*> blocks_;
};

}  // namespace vgpu
