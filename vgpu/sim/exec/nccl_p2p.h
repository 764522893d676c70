// Send/recv kernels on the sim backend meet their peers (issue 23): a receive starts no earlier
// than the matching send's kernel arrived, as the real receive kernel waits for the data; each
// kernel then lasts the model's time for its transfers (nccl_collectives.h, timed_alone).
//
// Matching: NCCL pairs the k-th send from rank A to rank B of a communicator with the k-th
// receive on B from A. Here a launch is one unit per direction (a launch that sends to a peer
// counts one send to it, whatever number of calls it holds; likewise receives), which matches as
// long as both sides group their calls alike (the pipeline and ring patterns do).
// Who the peers are:
// - a two-rank communicator (the pipeline stages' pairs, PyTorch's send/recv communicators): the
//   other rank, known at the launch, which is matched at once (submit). The same counting of
//   calls reads a two-rank launch's call to the rank itself as one to its peer: a rank exchanging
//   with itself alone, its peer launching nothing, waits out kTimeoutS (an all-to-all of two ranks
//   where one has nothing to send to anyone).
// - a larger communicator (torch.distributed.pipelining, Megatron's batch_isend_irecv on a PP
//   group of 4 or 8): only the launch's P2p tasks name the peers, and NCCL starts them after the
//   launch returned (hostStreamPlanTask, on the launching thread, before its next CUDA call).
//   So the launch places only its arrival op (arrive), and the kernel is held until the plugin
//   says the tasks are all known (contracts/nccl_plugin.h launch_tasks_done, when the plan's
//   profiler event ends); it then meets the peers the tasks name, with each one's bytes (meet,
//   nccl_collectives.h). Held kernels are placed right after their own arrival: nothing of the
//   thread can come between, because a held kernel is placed at the latest at the start of its
//   thread's next driver call (vclock::before_next_call; an event recorded right after the
//   launch comes after it; "next" is outside NCCL's call, whose group the driver brackets as
//   one call of the thread's clock: NCCL's own calls after its launches, such as its event
//   record on the launch stream, would come before a kernel still held then, which only the
//   host-stream path leaves so). There, when the tasks did not come first (NCCL's host-stream path,
//   which it takes while a CUDA graph of the communicator's is running, or an NCCL that starts
//   them later), it is placed on its own, as before (one log line), with no wait; when its tasks
//   come after all (from the host stream), its arrivals are posted then (post_late), so that a
//   peer that met them does not wait kTimeoutS for it nor match later launches with the wrong
//   one (a peer that waits meanwhile waits in real time until then). Another thread that
//   synchronizes with the stream in between may see the stream without it. An all-to-all is
//   matched too: its tasks name each peer with its bytes (PyTorch leaves out the calls of zero
//   bytes of an uneven split on both sides alike). Its calls at the launch would not do: they
//   name no peer, and ranks of one uneven all-to-all would tell it apart differently.
//
// A send of more than kCreditBytes waits for its receiver as well (NCCL's Simple protocol: past
// the receiver's buffer the sender needs the receiver's credits): it starts no earlier than the
// matching receive's arrival. A smaller send does not (below the buffer a real send completes
// into the receiver's buffers without it, and two ranks that both send first complete in real
// NCCL; so must they here). Both sides decide alike: the receive knows the message's size too.
//
// Why at the launch (or, held, before the thread's next call): the sim backend places a kernel on
// its stream's timeline when it is submitted, and the program may record an event or synchronize
// right after; a kernel placed later (the data mover runs when the stream reaches it) would come
// after that work. So each launch first posts its own arrival (an "arrival" op on its stream:
// the send's, and the receive's when the message is large), then gets the arrivals it waits for
// before it returns (a held kernel: before the plugin's call returns):
// - peer in this process, driven by another thread: it waits (real time, at most kTimeoutS) for
//   the peer's launch to post them, and starts after those ops;
// - peer in this process, driven by this thread (one thread driving both ranks in an NCCL group,
//   which NCCL requires; or the peer's previous launch came from this thread): it must not wait
//   for itself, so its kernel is held, as a collective's early ranks are, and the peer's launch
//   places it right after its own arrival (or at its stream's end, if work came since);
// - peer in another process (torchrun): the arrivals' virtual times go through the job's
//   exchange folder (nccl_data_exchange.h), and the launch waits for them there (at most
//   kTimeoutS); a thread whose NCCL group drives several ranks does not wait (its launches of
//   several pairs could wait on each other across processes) and takes an arrival only if it is
//   already posted.
// The messages a launch receives cross the fabric too (nccl_link_share.h): once its kernel is
// placed, a flow from each sender's GPU to its own, after what the kernel waits for and the
// model's latency part, sized so that alone it ends by the model's send/recv time for that pair;
// an "nccl p2p end" op after the kernel waits for them, so that a receive sharing a link with a
// collective or a copy ends later, and one alone exactly when its kernel does. The receiving side
// places them, once per message, in its own process (a sender in another process adds nothing to
// this process's links); the send kernels place none. A pair whose model time exceeds the kernel's
// (the kernel timed before its peers were known) gets no flow.
// An arrival that never comes (a timeout, a peer that never launches) leaves the kernel at its
// own arrival, as before, with one log line. The price of waiting in the launch, which the real
// launch does not: a program whose sender waits on the host for the receiver after the receive
// was launched (a host barrier between them) waits out kTimeoutS; a one-GPU process's collective
// rendezvous (nccl_rendezvous.h) has the same limit.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "front/driver/cuda_api.h"
#include "sim/core/stream_work.h"
#include "sim/exec/nccl_data_exchange.h"
#include "sim/exec/nccl_link_share.h"

namespace vgpu {

class DriverState;
class StreamManager;

// An NCCL kernel's "arrival" on `stream`: an op of no duration after the stream's previous work,
// where the kernel would start on its own (a collective's rank and a send/recv alike wait for
// their peers' arrivals); *arrival its simcore event once placed, 0 when none was.
CUresult submit_arrival(StreamManager& streams, CUstream stream, bool per_thread, const char* label,
                        uint64_t* arrival);

class NcclP2p {
 public:
  // What one send/recv launch does, as far as the matching goes.
  struct Launch {
    uint64_t comm = 0;
    int nranks = 0, rank = -1;
    int gpu = 0;                 // the cluster's GPU of this rank
    std::vector<int> send_to;       // the ranks it sends to...
    std::vector<int> receive_from;  // ...receives from
    uint64_t send_bytes = 0;        // what it sends to each
    uint64_t receive_bytes = 0;     // what it receives from each
    std::vector<uint64_t> send_sizes, receive_sizes;  // per peer of send_to / receive_from, when they differ
    std::vector<int> receive_gpus;  // the cluster's GPU of each of receive_from (empty: unknown, no transfers)
    bool peer_here = false;         // its peers live in this process (false: each in another one)
    int thread_ranks = 1;        // the ranks the calling thread's NCCL group names (profiler contexts); 0: not known
    bool one_gpu = false;        // this process drives one GPU (one rank of any communicator)
    double start = -1;           // peers in other processes: the kernel's start as the arrivals say
  };

  // Where a process whose peer lives in another one also places the messages it receives: the
  // job's shared engine (nccl_shared_fabric.h). Given the messages (each a send/recv call from
  // its sender's GPU to this rank's), the kernel's start, the kernel, its stream and arrival,
  // and what the "nccl p2p end" op waits for here; true when it took the end op over (held
  // until the shared answer is read), false when the caller appends it as before.
  using Share = std::function<bool(const std::vector<simcore::CollectiveCall>& messages, const Launch& l,
                                   uint64_t kernel, CUstream stream, bool per_thread, uint64_t arrival,
                                   std::vector<uint64_t> end_after)>;
  void set_share(Share share) { share_ = std::move(share); }

  // Past this many bytes a send waits for its receiver (NCCL's default Simple-protocol buffer of
  // one connection, NCCL_BUFFSIZE).
  static constexpr uint64_t kCreditBytes = 4u << 20;

  // `dir`: the exchange folder for arrivals across processes (empty: the job's).
  // `links`: where received messages cross the fabric (null: nowhere).
  explicit NcclP2p(DriverState& driver, NcclLinkShare* links = nullptr, std::string dir = {});

  // Whether launch `l` is one the matching handles: peers named, none of them itself.
  static bool matched(const Launch& l);

  // Submits kernel `k` (its duration already the model's) of launch `l` on `stream`: an arrival
  // op, then the kernel after it and after the arrivals it waits for (see the header).
  // CUDA_SUCCESS also when the kernel is held for a launch this thread makes later.
  CUresult submit(CUstream stream, bool per_thread, const Launch& l, Work k);

  // submit() in two halves, for a kernel held from its launch until its peers are known (a
  // communicator of more than two ranks, see the header): its arrival op on `stream` at the
  // launch (*arrival: its simcore event, 0 when the stream placed none)...
  CUresult arrive(CUstream stream, bool per_thread, uint64_t* arrival);
  // ...and later the kernel right after that arrival (at the stream's end if work came behind
  // it meanwhile), meeting the peers `l` names; `held`: placed after the launch returned.
  CUresult meet(CUstream stream, bool per_thread, const Launch& l, Work k, uint64_t arrival, bool held);
  // Places held kernel `k` right after its arrival op `arrival` (at its stream's end if work
  // came behind it meanwhile), meeting no other rank.
  void place_alone(CUstream stream, bool per_thread, uint64_t arrival, Work k);
  // For a kernel placed on its own before its peers were known (its arrival op `arrival`), once
  // they are (`l`): counts its sends and receives and posts its arrivals, as meet() would have,
  // so that its peers, which may have met theirs, neither wait for it nor match it with the
  // wrong launch; waits for nothing.
  void post_late(const Launch& l, uint64_t arrival);

  // How long (real time) a receive waits for its send's launch: as long as a collective's ranks
  // wait for each other (nccl_collectives.cpp).
  static constexpr double kTimeoutS = 600;
  // Kernels held or arrivals kept unmatched beyond this: the oldest go (a peer that never came).
  static constexpr size_t kMaxKept = 4096;

 private:
  // One side's arrival at a message: (communicator, sending rank, receiving rank, k-th launch
  // of that direction, whether the receive's (else the send's)).
  using Key = std::tuple<uint64_t, int, int, uint64_t, bool>;
  struct Held {  // a kernel waiting for arrivals this thread posts later
    CUstream stream = nullptr;
    bool per_thread = false;
    uint64_t arrival = 0;  // its own arrival op
    Work kernel;
    int missing = 0;  // arrivals not posted yet
    Launch launch;    // for its received messages' transfers
  };
  // Counts launch `l`'s sends and receives (the k-th of each direction) into the arrivals it
  // posts and those it waits for. Under mu_.
  void count(const Launch& l, std::vector<Key>* posts, std::vector<Key>* needs);
  // Places held kernel `h` (its awaited arrivals among its also_after) after its own arrival.
  void place(Held& h);
  // Places kernel `k` of launch `l` (its also_after final): right after its arrival op `arrival`
  // when `held` (else at its stream's end), then the transfers of the messages it receives and
  // an end op after both (see the header).
  CUresult place_kernel(CUstream stream, bool per_thread, uint64_t arrival, bool held, Work k, const Launch& l);
  // Posts arrival op `event` under `key` in this process: it goes to the held kernel waiting
  // for it (into *ready once that has all it waits for) or stays for a later launch. Under mu_.
  void post(const Key& key, uint64_t event, std::vector<std::shared_ptr<Held>>* ready);
  // Whether the peer's kernels may come from the calling thread, which must then not wait for
  // them: its group names several ranks, or the peer's previous launch came from it, or its group
  // is not known in a process driving several GPUs. Under mu_.
  bool peer_on_this_thread(const Launch& l) const;
  // Whether the calling thread may wait for another process's arrivals (see the header).
  static bool may_wait_elsewhere(const Launch& l);

  DriverState& driver_;
  NcclLinkShare* links_;
  Share share_;
  NcclDataExchange exchange_;  // arrivals across processes
  std::mutex mu_;
  std::condition_variable posted_;  // an arrival was posted in this process
  std::map<std::tuple<uint64_t, int, int>, uint64_t> sends_, receives_;  // (comm, src, dst) -> launches
  std::map<Key, uint64_t> arrivals_;  // arrival ops not yet taken by the launch that waits for them
  std::multimap<Key, std::shared_ptr<Held>> held_;  // by an arrival each waits for
  std::map<std::pair<uint64_t, int>, std::thread::id> thread_of_;  // (comm, rank) -> its last launching thread
};

}  // namespace vgpu
