// NCCL kernels on the sim backend: each lasts what the collective model says for its
// collective (simcore/collective_model.h), starting once every rank's kernel of that collective
// has started, as the real kernels wait for one another.
//
// Which collective a launch is: vgpu's NCCL profiler (nccl_plugin/profiler/launch_tags.h) tags
// each NCCL kernel launch and keeps the collective calls of its group (NCCL's CollApi events:
// function, count, datatype, communicator id, size and rank); the driver reads the tag from
// inside the launch and asks the launch's description (describe_launch of the plugin contract,
// contracts/nccl_plugin.h). Without the profiler NCCL kernels keep the fallback duration.
// Send/recv kernels (their group's P2pApi calls) and kernels captured into a CUDA graph last the
// model's time for what the launch does, and the messages a launch receives cross the fabric's
// links (nccl_p2p.h, nccl_link_share.h). A receive starts after its matching send's arrival
// (nccl_p2p.h): on a two-rank communicator at the launch; on a larger one the kernel is held from
// the launch until NCCL's tasks name its peers (the plugin's launch_tasks_done, right after the
// launch; at the latest the thread's next driver call, when it meets no other rank). A graph
// replay of a captured collective meets this process's other ranks' replays of it (the k-th
// replay of the node on every rank is one collective: nccl_graph_meet.h), not other processes'
// ranks; each places its transfers from its node's start (nccl_graph_replay.cpp).
//
// Matching ranks: NCCL launches the kernels of one communicator in the same order on every
// rank, so the k-th NCCL launch of each rank on communicator c is one collective. The ranks of
// one process (threads, or one thread driving all of them in a group) meet here; ranks in
// other processes meet through the job's shared table (nccl_rendezvous.h): a process driving one
// GPU (torchrun) waits there for every rank's arrival and starts its kernel at the latest one,
// for the model's time on every rank's GPU. A process driving several GPUs (one thread may
// launch every rank of a group, and must not wait for itself) learns from the plugin how many
// ranks of the communicator it holds (local_ranks): its ranks meet here first, each posting its
// arrival to the table without waiting, the early ones' kernels held; the last of them waits
// there for the other processes' ranks, and every local kernel then starts at the latest
// arrival of the job and lasts the model's time on every rank's GPU.
//
// On the timeline, per rank r of a collective: an "arrival" op (no duration, after the
// stream's previous work), then the kernel, starting after its own arrival and every arrival of
// the other ranks already known, for the model's duration. The rank that arrives last has seen
// every arrival, so its kernel ends where the collective ends; each rank's stream then gets a
// "collective end" op after every rank's kernel, so later work on any rank starts after the
// collective. The collective's transfers are on the fabric too (nccl_link_share.h): once every
// rank of this process arrived, the bandwidth part of the model's time becomes one flow per
// rank to the next rank's GPU (this process's ranks' and the ones into their GPUs), sharing
// links by max-min with every other flow (other collectives', peer copies); the "collective end"
// op also waits for them. Alone they end just
// before the kernels, so the collective lasts exactly the model's time; on a shared link they
// end later, and so does the collective (two all-reduces over one NIC: each about one bandwidth
// part longer). A process driving one GPU places its own GPU's flows (to the next rank and from
// the previous one: a message it receives then meets the incoming one), followed by the same op.
// That op is appended only while the kernel is still the last op of its stream:
// exact when one thread launches every rank (ncclGroupStart/End over several communicators)
// or the ranks' threads do not run ahead; a rank that submitted more work before the last rank
// arrived keeps that work where it was placed.
// Ranks in other processes under vgpu-run (VGPU_SIMCORE=daemon): each process also keeps its own
// ranks' flows (and the messages it receives from another process) for the job's vgpud
// (nccl_shared_fabric.h), where flows of different processes on one link contend. The "collective
// end" op then waits until the launching thread's NCCL group is over (the plugin's group end hook,
// else its next driver call outside a group): then every collective and message of the group goes
// to vgpud in one request (protocol 7, ShareCollectives), each collective under its key, the
// communicator and its count of shared collectives (counted alike in every process, with vgpud or
// not). vgpud places the flows, moves the process's floor, and holds the reply until every rank of
// each key placed its flows (any process's request; a received message waits for no rank and is answered with its request's collectives), then answers each
// key's latest finish over every rank's flows, the same value to every rank, and releases them;
// every rank ends the collective no earlier. No barrier in the rendezvous table: one request a
// group, whose keys another process may send in another order (vgpud holds no later request behind
// a held one). Bounded: a key not covered within 60 s (a rank dead, hung, or without vgpud) is
// answered from the flows placed, with a line in vgpud's log, and the missing ranks are not waited
// for again on that communicator (one 60 s wait a communicator, not a collective) until they place
// flows there again. A process without vgpud (none at its start, or lost mid-job: one warning)
// sends nothing and keeps its own placement. A tentative answer: it counts the flows of the
// collective and whatever was placed before in real time, not a collective another process
// launches later in real time that overlaps in virtual time. Not a wait for finality: that needs
// every process's floor past the flows, and a process blocked in another collective's
// rendezvous, or issuing asynchronously, does not move its floor.
// Data: each collective kernel, when it runs on its stream, moves the collective's data between
// the ranks' buffers (nccl_data.h), up to VGPU_SIM_NCCL_DATA_BYTES per rank.
//
// When one thread launched every rank of the communicator's previous collective (the group
// pattern) and the stream is an explicit handle, an early rank's kernel is held back until the
// last rank arrives and then placed right after its arrival: every rank's kernel then starts
// when the last rank arrives, as the real kernels run together.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "front/nccl/nccl_plugin_client.h"
#include "front/driver/cuda_api.h"
#include "sim/core/stream_work.h"
#include "sim/exec/nccl_data.h"
#include "sim/exec/nccl_graph_meet.h"
#include "sim/exec/nccl_link_share.h"
#include "sim/exec/nccl_p2p.h"
#include "sim/exec/nccl_rendezvous.h"
#include "sim/exec/nccl_shared_fabric.h"
#include "simcore/collective_model.h"

namespace vgpu {

class DriverState;
struct PreparedLaunch;

bool is_nccl_kernel_name(const std::string& name);

class NcclCollectives {
 public:
  explicit NcclCollectives(DriverState& driver);
  ~NcclCollectives();

  // Submits an NCCL kernel launch `p` on `stream` as its collective, when the profiler knows
  // which one it is: returns true and sets *rc. False: not an NCCL collective known here, the
  // caller submits the launch as any other.
  bool submit(CUstream stream, bool per_thread, const PreparedLaunch& p, CUresult* rc);

  // The driver's half of the plugin contract (the sim backend's side: its current device).
  contracts::NcclPluginClient& plugin() { return plugin_; }

  // The plugin's launch_tasks_done (contracts/nccl_plugin.h): every task of launch `tag` was
  // started. A send/recv kernel held for them (a communicator of more than two ranks) meets the
  // peers they name now.
  void tasks_done(uint64_t tag);
  // Places every send/recv kernel the calling thread launched and still holds for its tasks
  // (they did not come before the thread's next driver call: vclock::before_next_call).
  void flush_thread();
  // Places the calling thread's graph replays held for their other ranks' (nccl_graph_meet.h).
  void flush_graph_meetings();
  // Meets the other processes' ranks for the calling thread's graph replays whose process's ranks
  // all arrived (nccl_graph_meet.h, "Ranks in other processes"): posts and waits in the job's table,
  // then places them after the last arrival. Called with no lock held.
  void meet_graph_replays_across();
  // The task a collective's kernel starts after when a rank of another process arrived later
  // (`latest`, virtual seconds) than this process's: direct launches and graph replays alike.
  uint64_t every_rank_arrived(int gpu, double latest);

  // A collective of a process of one GPU whose transfers are also in the job's shared engine
  // (nccl_shared_fabric.h): its "collective end" op, held until the thread's NCCL group is over.
  struct SharedEnd {
    uint64_t comm = 0;
    int nranks = 0, gpu = 0;
    std::vector<int> ranks;             // this process's ranks of it (their flows are placed)
    // Each kernel's stream (and per-thread flag): where its end goes when work came behind the
    // kernel meanwhile (NCCL's own stream joins, inside its group).
    std::vector<std::pair<CUstream, bool>> streams;
    std::vector<uint64_t> kernels;      // this process's ranks' kernels (an end right after each)
    std::vector<uint64_t> after;        // its arrivals
    std::vector<uint64_t> end_after;    // what the ends wait for besides the shared answer
    std::vector<simcore::FlowSpec> flows;  // the ranks' flows for the shared engine, sent at the group's end
    uint64_t seq = 0;                   // the communicator's count of shared collectives: the key in vgpud
    const char* label = "nccl collective end";
  };
  // Sends the calling thread's collectives' flows to vgpud in one request, after the thread's NCCL
  // group (or at its next driver call outside one), and submits their ends at the answers (once
  // every rank of each placed its flows: vgpud's bounded wait).
  void flush_shared_ends();

  // The model's duration of the calls of one launch.
  static double duration(const simcore::ClusterSpec& cluster, const std::vector<simcore::CollectiveCall>& calls);

 private:
  struct Held {  // an early rank's kernel, submitted when the last rank arrives
    CUstream stream = nullptr;
    bool per_thread = false;
    uint64_t arrival = 0;
    Work kernel;
  };
  struct Pending {
    int nranks = 0;
    std::vector<uint64_t> arrivals;  // simcore events
    std::vector<uint64_t> kernels;
    std::vector<std::pair<CUstream, bool>> streams;  // each kernel's
    std::vector<Held> held;
    std::vector<int> ranks;          // the ranks that arrived here, in arrival order
    std::vector<uint64_t> gates;     // the other processes' latest arrivals (across processes)
    double across_start = -1;        // across processes: the job's latest arrival, once known
    std::thread::id thread;          // the first rank's launching thread
    bool one_thread = true;          // every rank so far launched from it
  };
  // The global GPU of every rank of a communicator as learnt so far; unknown ranks guessed as
  // consecutive GPUs around a known one.
  std::vector<int> gpus_of(uint64_t comm, int nranks, int rank, int gpu);  // under mu_
  // The model's calls for everything launch `got` does on `device` (its sends and receives
  // included) over the communicator's GPUs as known (from the job's roster where this process
  // holds fewer than all `got.nranks` ranks: `local_ranks`); empty when it does nothing the
  // model times.
  // `peers` (ranks of the communicator, from the rank's previous send/recv launch on it: see
  // peers_seen): a send/recv is timed between this rank's GPU and the slowest of theirs rather
  // than between the communicator's first two GPUs.
  std::vector<simcore::CollectiveCall> modelled_calls(const vgpu_nccl_launch& got, int device, int local_ranks,
                                                      const std::vector<int>& peers = {});
  // The other ranks this rank's previous send/recv launch on `got`'s communicator sent to or
  // received from (its P2p tasks, which NCCL starts after each launch, name them), and `tag` noted
  // as the latest: a pipeline stage exchanges with the same neighbours launch after launch.
  std::vector<int> peers_seen(const vgpu_nccl_plugin_side* plugin, const vgpu_nccl_launch& got, uint64_t tag);


  // A send/recv kernel of a communicator of more than two ranks, held from its launch (its
  // arrival op placed) until its tasks name its peers (nccl_p2p.h).
  struct Deferred {
    CUstream stream = nullptr;
    bool per_thread = false;
    uint64_t arrival = 0;
    Work kernel;
    vgpu_nccl_launch got{};  // the launch as described at the launch
    int device = 0;
    int local_ranks = 0;
    NcclP2p::Launch base;  // its communicator, rank and threads; no peers yet
  };
  // Holds kernel `k` of send/recv launch `tag` for its tasks; false when it cannot be (the plugin
  // cannot tell them, or no arrival was placed): the caller submits it as before.
  bool defer(CUstream stream, bool per_thread, uint64_t tag, const vgpu_nccl_launch& got, int device, int local,
             NcclP2p::Launch base, Work& k, CUresult* rc);
  // Places held launch `tag`: meeting the peers its tasks name once they are all known, else on
  // its own (`why`: the log's reason).
  void place_deferred(uint64_t tag, Deferred d, const char* why);
  std::optional<Deferred> take_deferred(uint64_t tag);
  // The peers launch `tag`'s tasks name (into l's send_to / receive_from and sizes); false while
  // its tasks are not all known.
  bool peers_of(uint64_t tag, NcclP2p::Launch* l);
  struct Flushed {  // a held kernel placed on its own before its tasks came
    uint64_t arrival = 0;
    NcclP2p::Launch base;
  };

  // Places the transfers of `ranks` of collective `calls` on the fabric after `after` (every
  // arrival), `start_at_most` no later than its start, the latency task on `gpu`; returns what
  // the collective's end waits for besides its kernels (nccl_link_share.h).
  std::vector<uint64_t> place_transfers(const std::vector<simcore::CollectiveCall>& calls, std::span<const int> ranks,
                                        std::vector<uint64_t> after, double start_at_most, int gpu);

  // What the node of a collective captured into a graph (launch `got`, tag `tag`, on `device`, of
  // which this process holds `local_ranks` ranks; its kernel lasts `seconds`) places on the fabric
  // on each replay: Work::on_replay (nccl_graph_replay.cpp); empty when it places nothing.
  decltype(Work::on_replay) replay_transfers(const vgpu_nccl_launch& got, uint64_t tag, int device, int local_ranks,
                                             double seconds);

  // A captured send/recv of a communicator of more than two ranks: the messages its node places
  // on each replay, known once the launch's tasks name its peers (right after the launch, as for
  // a directly launched one: resolve_captured). Shared by the node's replays (every copy of the
  // node: clones, instantiations) and the resolution.
  struct CapturedMessages {
    std::mutex mu;
    std::vector<simcore::CollectiveCall> messages;  // each from its sender's GPU to this rank's
  };
  struct Captured {
    std::shared_ptr<CapturedMessages> out;
    vgpu_nccl_launch got{};
    int gpu = 0;
    double seconds = 0;  // the kernel's duration: a message the kernel is not timed for adds nothing
  };
  // Fills captured launch `tag`'s messages once its tasks are all known; false (kept) while not.
  bool resolve_captured(uint64_t tag);
  // Has launch `tag` looked at again before the calling thread's next driver call (flush_thread),
  // in case its tasks_done came first or never comes.
  void look_again_before_next_call(uint64_t tag);

  // The cluster's GPU of each rank of `l.receive_from` as known (l.receive_gpus), for the
  // transfers of the messages it receives.
  void receive_gpus(NcclP2p::Launch& l);

  // True when this process has contexts on one GPU only, so that it holds at most one rank of
  // any communicator and may wait for the other processes' ranks without waiting for itself.
  bool drives_one_gpu() const;

  // NcclP2p's Share: a received message's flows in the shared engine too, its end held.
  bool share_messages(const std::vector<simcore::CollectiveCall>& messages, const NcclP2p::Launch& l,
                      uint64_t kernel, CUstream stream, bool per_thread, uint64_t arrival,
                      std::vector<uint64_t> end_after);

  // Gives kernel `k` of launch `tag` its real effect: the collective's data (nccl_data.h).
  void move_data(Work& k, const vgpu_nccl_plugin_side* plugin, uint64_t tag, const vgpu_nccl_launch& got,
                 const std::string& kernel_name);

  DriverState& driver_;
  contracts::NcclPluginClient plugin_;
  NcclData data_;  // the collectives' data
  NcclRendezvous rendezvous_;  // ranks in other processes of the job
  NcclLinkShare links_;        // collectives' and received messages' transfers on the fabric's links
  NcclP2p p2p_;                // send/recv kernels meeting their peers
  NcclSharedFabric shared_;    // the job's engine, where rank processes place their flows too
  NcclGraphMeetings meetings_;  // graph replays of captured collectives meeting this process's other ranks'
  std::mutex mu_;
  std::map<std::pair<uint64_t, int>, uint64_t> launches_;  // (comm, rank) -> NCCL launches so far
  std::map<uint64_t, std::vector<int>> comm_gpus_;          // comm -> gpu of each rank (-1 unknown)
  std::map<std::pair<uint64_t, uint64_t>, Pending> pending_;  // (comm, k) -> the collective
  std::map<uint64_t, bool> one_thread_;  // comm -> its last complete collective came from one thread
  std::map<std::pair<uint64_t, int>, uint64_t> last_p2p_;  // (comm, rank) -> its latest send/recv launch
  std::map<uint64_t, Deferred> deferred_;  // by launch tag: send/recv kernels held for their tasks
  std::map<uint64_t, Flushed> flushed_;    // by launch tag: placed before their tasks came (the latest)
  std::map<uint64_t, Captured> captured_;  // by launch tag: captured send/recv nodes waiting for their tasks
  std::map<uint64_t, uint64_t> shared_seq_;  // comm -> collectives whose flows go to the job's vgpud
  // The next key of `comm`'s collectives in vgpud (counted alike in every process of the job).
  uint64_t next_shared(uint64_t comm) {
    std::lock_guard l(mu_);
    return shared_seq_[comm]++;
  }
};

}  // namespace vgpu
