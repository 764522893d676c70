// Graph replays of a captured NCCL collective meet the other ranks' replays (issue 23), within a
// process that holds several ranks of its communicator (ncclCommInitAll, one thread per rank).
//
// A directly launched collective starts when every rank's kernel has arrived (nccl_collectives.h).
// A captured one is a graph node; its replays meet the same way: the node's key is its
// communicator and its index among the rank's captured collectives on it (every rank captures the
// communicator's collectives in the same order, as NCCL launches them), and each rank counts its
// replays of it, so the k-th replay of that node on every rank is one collective. A replay places
// the node's arrival (an op after what the node starts after) and asks here (Work::on_meet):
// - an early rank is held: its graph's placement stops at the node (its stream's last op is the
//   arrival) and is kept here;
// - the last rank's node starts after every rank's arrival, and the held ranks' nodes and the
//   rest of their graphs are placed then, after the same arrivals: every rank's kernel starts at
//   the last arrival and ends with the collective's model time, its transfers placed from there
//   (nccl_graph_replay.cpp), and each stream goes on after its rank's node.
// A held rank whose peers have not replayed by its thread's next driver call (other than a graph
// launch on another stream: one thread launching each rank's graph in turn) is placed there on
// its own, after the arrivals known, as before this meeting existed: a thread that synchronizes
// its stream never waits for a replay that its own later call would make.
//
// Ranks in other processes (torchrun: one process a rank; or 2 processes x 4 GPUs): once this
// process's ranks of the node have arrived (at once, for a process of one rank), the meeting is
// not released here but handed to the thread (take_across): the streams' lock is held while a
// graph is placed, and the other processes' arrivals are waited for in real time. The caller,
// after the placement (cuGraphLaunch, or the thread's next driver call), posts each local rank's
// arrival in the job's table and waits for the others' (NcclCollectives::meet_graph_replays_across,
// as a direct launch does: nccl_rendezvous.h), then places the held ranks' rests after every
// arrival: each rank's kernel starts at the job's last arrival.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "front/driver/cuda_api.h"
#include "sim/core/stream_work.h"

namespace vgpu {

class StreamManager;

class NcclGraphMeetings {
 public:
  // `arm`: has the calling thread's next driver call run flush_thread (vclock::before_next_call
  // of the NCCL collectives' one function).
  explicit NcclGraphMeetings(void (*arm)()) : arm_(arm) {}
  // A captured collective's node: communicator, its index among the rank's captured collectives
  // on it (next_index at capture), the rank, and how many ranks of it this process holds.
  // `nranks`, `gpu` (the rank's global GPU) and `across` (ranks of the communicator live in other
  // processes too) are for the meeting across processes.
  struct Node {
    uint64_t comm = 0;
    uint64_t index = 0;
    int rank = 0;
    int meeting = 0;
    int nranks = 0;
    int gpu = -1;
    bool across = false;
  };
  // A replay whose process's ranks all arrived, to meet the other processes' ranks (see above).
  struct Across {
    uint64_t comm = 0;
    int nranks = 0;
    std::vector<std::pair<int, int>> members;  // each local rank and its global GPU, as they arrived
    std::vector<uint64_t> arrivals;            // each one's arrival op, in the same order
    std::vector<Work::PlaceRest> rests;        // the graphs still held at the node, from it on (a rank
                                               // placed alone meanwhile has none, but is posted)
  };
  // The index the next collective `rank` captures on `comm` takes.
  uint64_t next_index(uint64_t comm, int rank);
  // The node's Work::on_meet; empty where no other rank of this process meets it.
  decltype(Work::on_meet) hook(const Node& node);
  // Places the calling thread's held ranks on their own, unless the thread is launching a graph
  // on another stream than theirs (GraphLaunchMark): those stay held, flush_thread armed again.
  void flush_thread(StreamManager& streams);
  // The calling thread's meetings to finish across processes, taken (empty: none).
  std::vector<Across> take_across();

  // Set by cuGraphLaunch around its call: the stream it launches onto (a held rank on another
  // stream keeps waiting for this replay), else none.
  struct GraphLaunchMark {
    explicit GraphLaunchMark(CUstream stream);
    ~GraphLaunchMark();
  };

 private:
  using Key = std::tuple<uint64_t, uint64_t, uint64_t>;  // comm, index, replay
  struct Held {
    int rank = 0;
    CUstream stream = nullptr;
    std::thread::id thread;
    Work::PlaceRest rest;
  };
  struct Pending {
    std::vector<uint64_t> arrivals;
    std::vector<std::pair<int, int>> members;  // each arrival's rank and global GPU
    std::vector<Held> held;
  };
  Work::Meeting arrive(const Node& node, uint64_t arrival, CUstream stream, Work::PlaceRest rest);

  void (*arm_)();
  std::mutex mu_;
  std::map<std::tuple<uint64_t, uint64_t, int>, uint64_t> replays_;  // (comm, index, rank) -> replays
  std::map<std::pair<uint64_t, int>, uint64_t> captured_;            // (comm, rank) -> captured collectives
  std::map<Key, Pending> pending_;
};

}  // namespace vgpu
