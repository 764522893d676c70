// Which NCCL kernel launch each network transfer belongs to, learnt from NCCL's own profiler
// events (vgpu exports an NCCL profiler beside its net plugin: adapters/profiler_vN.cpp).
//
// Why: an NCCL kernel's virtual duration is the virtual finish of the transfers it waited for.
// The host launches collectives far ahead of the GPU, so "the transfers logged since this
// kernel's launch" mixes collectives; NCCL's profiler events name each transfer's collective.
//
// How the events connect (NCCL 2.28+, profiler ABI v5/v6), each arrow an event's parent:
//   transfer (isend/irecv phandle) -> ProxyStep -> ProxyOp -> Coll|P2p task -> CollApi|P2pApi
//   -> GroupApi;   KernelLaunch -> GroupApi;   Coll|P2p also names its plan (a Group event).
// One GroupApi (an outermost ncclGroupStart/End, implicit around a single call) may launch
// several kernels, one per plan and communicator, in order; so the k-th KernelLaunch of a
// GroupApi on a communicator and the k-th plan of that GroupApi on it are the same kernel, and
// share one launch tag. Whichever of the two comes first (a plan's tasks may start before or
// after its launch, on another thread) creates the tag.
//
// Handles: NCCL only stores profiler handles and passes them back, so they are encoded values,
// not pointers: (value << 4) | kind. Task, proxy-op, proxy-step and launch handles carry their
// launch tag in the value, so the proxy thread's many step events cost no lock and no memory;
// GroupApi, Api and plan handles carry the id of a table entry, and an entry whose id is no
// longer in the table (retired long ago) simply yields no tag. A tag of 0 means "unknown": the
// driver then falls back to attributing by launch order.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "contracts/nccl_plugin.h"

namespace vgpu::nccl::prof {

// The version-neutral view of one event descriptor (each adapter fills it from its ABI).
struct Event {
  uint64_t type = 0;       // ncclProfile* bit
  void* parent = nullptr;  // parentObj
  void* plan = nullptr;    // Coll/P2p: the handle of the plan's Group event
  const char* func = nullptr;  // Coll/P2p/CollApi/P2pApi: NCCL's name of the operation ("AllReduce", "Send", ...)
  uint64_t bytes = 0;          // Coll/P2p: its count times the datatype's size
  int peer = -1;               // P2p: the peer rank
  // CollApi, P2pApi, Coll, P2p: the count and datatype (NCCL's strings; copied).
  uint64_t count = 0;
  const char* datatype = nullptr;
  // Coll: its buffers and root; P2p: its buffer (both pointers).
  const void* send = nullptr;
  void* recv = nullptr;
  int root = -1;
};

// The datatype's size from NCCL's profiler name ("ncclFloat32" -> 4); 0 when unknown.
int nccl_type_bytes(const char* datatype);

class LaunchTags {
 public:
  static LaunchTags& get();

  // A communicator's profiler context, and the event types to activate.
  void* open_context(int* activation_mask, uint64_t comm_id = 0, int nranks = 0, int nnodes = 0, int rank = -1);
  void close_context(void* context);
  // How many contexts of communicator `comm_id` are open: this process's ranks of it.
  int local_ranks(uint64_t comm_id) const;
  // The handle of a started event; nullptr for an event vgpu does not follow.
  void* start(void* context, const Event& e);
  void stop(void* handle);

  // Whether NCCL loaded this profiler (a context was opened): only then are the phandles NCCL
  // gives the net plugin known to point at NCCL's step handle pair.
  bool active() const;
  // The launch tag of the NCCL kernel launch under way on the calling thread (0: none), read by
  // the driver from inside that cuLaunchKernel(Ex).
  static uint64_t current_launch();
  // The launch tag of a transfer, from the phandle NCCL passed to isend/irecv (0: unknown).
  uint64_t launch_of_transfer(const void* phandle) const;
  // What launch `tag` does (contracts/nccl_plugin.h, describe_launch): the one description of
  // a launch both backends time its kernel by. False when nothing is known of it.
  bool describe(uint64_t tag, vgpu_nccl_launch* out) const;
  // The tasks (Coll and P2p events) of launch `tag` (contracts/nccl_plugin.h, launch_tasks):
  // 1 once its plan's event ended (every task started), 0 while more may come, -1: not known.
  // When the plan's event ends, stop() tells the driver once (launch_tasks_done, outside mu_):
  // the sim backend holds a larger communicator's send/recv kernel until then.
  int tasks(uint64_t tag, vgpu_nccl_task* out, int max, int* count) const;

  // Entries kept after NCCL stopped them (their children may still start later: a plan's tasks
  // start after its API events ended, proxy ops after their task ended).
  static constexpr size_t kKeepRetired = 8192;

 private:
  LaunchTags() = default;
  enum Kind : uint8_t { none = 0, launch = 1, task = 2, op = 3, step = 4, group_api = 5, api = 6, plan = 7 };
  static void* encode(uint64_t value, Kind k);
  static bool decode(const void* handle, Kind k, uint64_t* value);

  struct Slots {  // one communicator's kernels within one GroupApi
    void* context = nullptr;
    uint32_t launches = 0, plans = 0;
    std::vector<uint64_t> tags;
  };
  struct Call {  // one CollApi or P2pApi of a GroupApi
    void* context = nullptr;
    std::string func;
    uint64_t count = 0;
    int type_bytes = 0;
    bool p2p = false;  // a P2pApi ("Send", "Recv")
  };
  struct Node {
    Kind kind = none;
    uint64_t group = 0;  // api: its GroupApi's id
    uint64_t tag = 0;    // plan: its launch tag once known
    std::vector<Slots> slots;  // group_api
    std::vector<Call> calls;   // group_api: its collective and send/recv calls, every communicator's
  };
  // One launch, as describe() tells it: its communicator's shape and its operations.
  // Collectives: the group's calls on the communicator (CollApi) once the launch is known to be
  // the group's first on it (api_collectives), until then the kernel's own Coll tasks.
  // Send/Recv: one operation per kind, from the group's calls on the communicator (P2pApi) once
  // the launch is known to be the group's first on it (api_p2p): NCCL starts a send/recv
  // kernel's P2p tasks only after its launch, and the sim backend times the kernel at the launch.
  // The calls name no peer: a rank that sends to every rank of the communicator (an all-to-all,
  // its own share included) is taken as one; other calls each as a peer. Once the kernel's P2p
  // tasks come (they name the peers and the rank's own share), they describe it instead: what
  // the passthrough reads after the kernel completed.
  struct Operation {
    std::string func;
    uint64_t bytes = 0;
    int peers = 0;
    bool self = false;
    bool p2p = false;
    uint64_t peer_mask = 0;  // P2p: other ranks seen, rank mod 64
  };
  struct LaunchRecord {
    uint64_t comm_id = 0;
    int nranks = 0, nnodes = 0, rank = -1;
    bool api_collectives = false;
    bool api_p2p = false;
    std::vector<Operation> ops;
    std::vector<vgpu_nccl_task> tasks;  // its Coll/P2p events, as started (at most VGPU_NCCL_MAX_TASKS)
    bool tasks_done = false;            // its plan's event ended: every task started
  };
  LaunchRecord& record(uint64_t tag, void* context);  // under mu_; created on first use
  static constexpr size_t kKeepLaunches = kKeepRetired;
  void record_launch(uint64_t tag, Node& group, void* context, bool first);  // under mu_
  void record_p2p_calls(LaunchRecord& r, const Node& group, void* context);  // under mu_
  uint64_t fresh();
  // The live entry of kind `k` (by id, or by a handle of that kind), else nullptr; under mu_.
  Node* node(uint64_t id, Kind k);
  Node* node(const void* handle, Kind k);
  Node* group_of(const void* api_or_group);  // under mu_
  uint64_t slot_tag(Node& group, void* context, bool is_launch, uint32_t* index = nullptr);  // under mu_
  void retire(uint64_t id);                  // under mu_

  void note_work(uint64_t tag, void* context, const Event& e);  // under mu_

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Node> nodes_;
  std::deque<uint64_t> retired_;
  std::unordered_map<uint64_t, LaunchRecord> launches_;  // by tag, the latest kKeepLaunches
  std::deque<uint64_t> launch_order_;
  std::unordered_map<uint64_t, int> open_contexts_;  // by communicator id: this process's ranks
  uint64_t next_ = 0;  // under mu_
};

}  // namespace vgpu::nccl::prof
