// Send/recv kernels on the sim backend meet their peers (issue 23): a receive starts no earlier
// than the matching send's kernel arrived, as the real receive kernel waits for the data; each
// kernel then lasts the model's time for its transfers (nccl_collectives.h, timed_alone).
//
// Matching: NCCL pairs the k-th send from rank A to rank B of a communicator with the k-th
// receive on B from A. Here a launch is one unit per direction (a launch that sends to its peer
// counts one send, whatever number of calls it holds; likewise receives), which matches as long
// as both sides group their calls alike (the pipeline and ring patterns do). Only two-rank
// communicators are matched (the pipeline stages' pairs, PyTorch's send/recv communicators): the
// peer is then the other rank, known at the launch; on larger communicators the peers are named
// only by the P2p tasks NCCL starts after the launch returned, on the launching thread, when the
// kernel's virtual place is already taken, so those kernels keep meeting no other rank.
//
// Why at the launch: the sim backend places a kernel on its stream's timeline when it is
// submitted, and the program may record an event or synchronize right after; a kernel placed
// later (the data mover runs when the stream reaches it) would come after that work. So the
// receiving launch gets the send's arrival before it returns:
// - peer in this process, driven by another thread: it waits (real time, at most kTimeoutS) for
//   the send's launch to post its arrival (an "arrival" op on the sender's stream), and starts
//   after that op;
// - peer in this process, driven by this thread (one thread driving both ranks in an NCCL group,
//   which NCCL requires; or the peer's previous launch came from this thread): it must not wait
//   for itself, so its kernel is held, as a collective's early ranks are, and the send's launch
//   places it right after the receive's own arrival (or at its stream's end, if work came since);
// - peer in another process (torchrun): the send's launch posts its arrival's virtual time
//   through the job's exchange folder (nccl_data_exchange.h), and the receive waits for it (at
//   most kTimeoutS) there; a thread whose NCCL group drives several ranks does not wait (its
//   launches of several pairs could wait on each other across processes) and takes the arrival
//   only if it is already posted.
// A send does not wait for its receiver: below NCCL's buffer size a real send completes into the
// receiver's buffers without it, and a send that waited could deadlock two ranks that both send
// first, which real NCCL completes. A receive that never finds its send (a timeout, a peer that
// never sends) starts at its own arrival, as before, with one log line.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "front/driver/cuda_api.h"
#include "sim/core/stream_work.h"
#include "sim/exec/nccl_data_exchange.h"

namespace vgpu {

class DriverState;

class NcclP2p {
 public:
  // What one send/recv launch does, as far as the matching goes.
  struct Launch {
    uint64_t comm = 0;
    int nranks = 0, rank = -1;
    int gpu = 0;             // the cluster's GPU of this rank
    bool sends = false;      // it sends to its peer
    bool receives = false;   // it receives from its peer
    bool peer_here = false;  // the peer rank lives in this process (false: in another one)
    int thread_ranks = 1;    // the ranks the calling thread's NCCL group names (profiler contexts); 0: not known
    bool one_gpu = false;    // this process drives one GPU (one rank of any communicator)
  };

  // `dir`: the exchange folder for arrivals across processes (empty: the job's).
  explicit NcclP2p(DriverState& driver, std::string dir = {});

  // Whether launch `l` is one the matching handles (a two-rank communicator's send/recv).
  static bool matched(const Launch& l);

  // Submits kernel `k` (its duration already the model's) of launch `l` on `stream`: an arrival
  // op, then the kernel after it and, for a receive, after the matching send's arrival (see the
  // header). CUDA_SUCCESS also when the kernel is held for a send this thread launches later.
  CUresult submit(CUstream stream, bool per_thread, const Launch& l, Work k);

  // How long (real time) a receive waits for its send's launch: as long as a collective's ranks
  // wait for each other (nccl_collectives.cpp).
  static constexpr double kTimeoutS = 600;
  // Receives held or arrivals kept unmatched beyond this: the oldest go (a peer that never came).
  static constexpr size_t kMaxKept = 4096;

 private:
  // (communicator, sending rank, receiving rank, k-th launch of that direction)
  using Key = std::tuple<uint64_t, int, int, uint64_t>;
  struct Held {  // a receive waiting for a send this thread launches later
    CUstream stream = nullptr;
    bool per_thread = false;
    uint64_t arrival = 0;  // its own arrival op
    Work kernel;
  };
  // Places held receive `h` after its arrival and the matching send's arrival `send_arrival`.
  void place(Held h, uint64_t send_arrival);
  // Whether the peer's kernels may come from the calling thread, which must then not wait for
  // them: its group names several ranks, or the peer's previous launch came from it, or its group
  // is not known in a process driving several GPUs. Under mu_.
  bool peer_on_this_thread(const Launch& l) const;
  // Whether the calling thread may wait for another process's send (see the header).
  static bool may_wait_elsewhere(const Launch& l);

  DriverState& driver_;
  NcclDataExchange exchange_;  // arrivals across processes
  std::mutex mu_;
  std::condition_variable posted_;  // a send's arrival was posted in this process
  std::map<std::tuple<uint64_t, int, int>, uint64_t> sends_, receives_;  // (comm, src, dst) -> launches
  std::map<Key, uint64_t> arrivals_;  // sends' arrival ops not yet taken by their receive (this process)
  std::map<Key, Held> held_;          // by the send they wait for
  std::map<std::pair<uint64_t, int>, std::thread::id> thread_of_;  // (comm, rank) -> its last launching thread
};

}  // namespace vgpu
