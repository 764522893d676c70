// NCCL kernels on the sim backend, timed by the collective model (nccl_collectives.h says how:
// the ranks of a collective meet; a send/recv meets its peers in nccl_p2p.h, on a communicator of
// more than two ranks once its tasks named them; graph-captured kernels meet no other rank).
#include "sim/exec/nccl_collectives.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "common/log.h"
#include "common/settings.h"
#include "sim/core/driver_state.h"
#include "sim/exec/module_registry.h"
#include "sim/exec/nccl_reduce.h"
#include "sim/exec/stream.h"
#include "sim/core/context.h"
#include "sim/core/thread_state.h"
#include "sim/core/virtual_clock.h"
#include "timing/nccl_group_hooks.h"
#include "simcore/engine.h"

namespace vgpu {
namespace {

constexpr size_t kMaxPending = 4096;   // collectives some rank of which has not arrived
// How long (real time) a rank waits for the ranks of other processes at one collective before
// going on with those it knows (a rank that died or never launches it): NCCL itself would wait
// forever; long enough for 64 ranks sharing 2 cores.
constexpr double kRendezvousTimeoutS = 600;

// "AllReduce 1048576 B, ...": a launch's operations, for its kernel's timeline label and the log.
std::string operations_text(const vgpu_nccl_launch& got) {
  std::string what;
  for (int i = 0; i < std::min(got.count, VGPU_NCCL_MAX_OPERATIONS); ++i)
    what += fmt::format("{}{} {} B", what.empty() ? "" : ", ",
                        std::string_view(got.op[i].func, strnlen(got.op[i].func, sizeof got.op[i].func)), got.op[i].bytes);
  return what;
}

// The Send and Recv operations of a launch that name another rank (null where it has none).
struct P2pOps {
  const vgpu_nccl_operation* send = nullptr;
  const vgpu_nccl_operation* receive = nullptr;
  bool any() const { return send != nullptr || receive != nullptr; }
};
P2pOps p2p_ops(const vgpu_nccl_launch& got) {
  P2pOps ops;
  for (int i = 0; i < std::min(got.count, VGPU_NCCL_MAX_OPERATIONS); ++i) {
    if (got.op[i].peers <= 0) continue;  // to itself only
    const std::string_view func = nccl_data::field(got.op[i].func, sizeof got.op[i].func);
    if (func == "Send") ops.send = &got.op[i];
    if (func == "Recv") ops.receive = &got.op[i];
  }
  return ops;
}

// The send/recv kernels the calling thread launched that are held for their tasks (by launch
// tag; some may have been placed by their tasks' arrival since): placed, whatever is known of
// them, before the thread's next driver call (vclock::before_next_call).
thread_local std::vector<uint64_t> t_deferred;

// The calling thread's collectives whose transfers are in the job's shared engine and whose
// "collective end" waits for the shared answer (nccl_shared_fabric.h): read once the thread's
// NCCL group is over (flush_shared_ends).
thread_local std::vector<NcclCollectives::SharedEnd> t_shared_ends;
// How deep the calling thread is in NCCL groups (the plugin's group hooks): a group's kernels
// are all launched before its end, so that the shared answer of one counts the others' flows.
thread_local int t_group_depth = 0;

// The ranks of `got`'s communicator this process holds (its plugin's open contexts); 0: unknown.
int local_ranks_of(const vgpu_nccl_plugin_side* plugin, const vgpu_nccl_launch& got) {
  return plugin != nullptr && plugin->local_ranks != nullptr ? plugin->local_ranks(got.comm_id) : 0;
}

}  // namespace

bool is_nccl_kernel_name(const std::string& name) {
  return name.starts_with("ncclDevKernel") || name.starts_with("ncclKernel") ||
         name.starts_with("_Z13ncclDevKernel") || name.find("ncclDevKernel_") != std::string::npos;
}

namespace {

// `ranks` (this process's ranks of a collective over `nranks`) and the ring predecessor of each:
// the transfers into this process's GPUs as well as out of them (every rank's once when it holds
// them all).
std::vector<int> with_incoming(std::vector<int> ranks, int nranks) {
  const size_t own = ranks.size();
  for (size_t i = 0; i < own; ++i) {
    const int previous = (ranks[i] + nranks - 1) % nranks;
    if (std::find(ranks.begin(), ranks.end(), previous) == ranks.end()) ranks.push_back(previous);
  }
  return ranks;
}

}  // namespace

// The driver's side of the contract for the sim backend: no clock hooks (its transfers need no
// virtual start: the collective model times the kernels), the current device for the plugin.
int current_device(int* device) {
  CUdevice d = 0;
  if (cuCtxGetDevice(&d) != CUDA_SUCCESS) return -1;
  *device = d;
  return 0;
}

// The same device as the cluster's GPU: the sim's ordinals are the process's (CUDA_VISIBLE_DEVICES
// renumbers them), so the plugin must not add VGPU_NODE_INDEX to them.
int current_global_gpu(int* gpu) {
  CUdevice d = 0;
  const DriverState* s = DriverState::get();
  if (s == nullptr || cuCtxGetDevice(&d) != CUDA_SUCCESS) return -1;
  const int g = s->global_gpu(d);
  if (g < 0) return -1;
  *gpu = g;
  return 0;
}

// NCCL's host cost model over this backend's cluster configuration ([collectives.host]).
using GroupHooks = timing::NcclGroupHooks<&timing::nccl_group_costs_of<DriverState>>;

namespace {

// The ranks (NCCL profiler contexts) named by the NCCL calls the calling thread made since its
// previous kernel launches, learnt through the group hooks: the calls of the group whose kernels
// it launches now. A thread naming several drives them all and must not wait at one for another
// (nccl_p2p.h). (Not by the group events: NCCL may bracket each call of a user's group in its own.)
struct ThreadGroup {
  bool launched = false;  // a kernel was launched since the last call
  std::vector<uint64_t> contexts;
};
thread_local ThreadGroup t_group;

void group_begin() {
  ++t_group_depth;
  GroupHooks::begin();
}
void group_end();  // below: flushes the group's shared answers
void group_operation(uint64_t context, int all_reduce) {
  if (t_group.launched) t_group.contexts.clear();
  t_group.launched = false;
  if (std::find(t_group.contexts.begin(), t_group.contexts.end(), context) == t_group.contexts.end())
    t_group.contexts.push_back(context);
  GroupHooks::operation(context, all_reduce);
}
void group_launch() {
  t_group.launched = true;
  GroupHooks::launch();
}
// 0: not known (the plugin's hooks were not handed over yet when the calls were made).
int thread_group_ranks() { return static_cast<int>(t_group.contexts.size()); }

// The backend's collectives, for the hooks below (null before the driver is initialised).
NcclCollectives* backend_collectives() {
  DriverState* d = DriverState::get();
  return d == nullptr ? nullptr : &d->modules().nccl();
}
void launch_tasks_done(uint64_t tag) {
  if (NcclCollectives* c = backend_collectives()) c->tasks_done(tag);
}
void flush_held_p2p() {
  if (NcclCollectives* c = backend_collectives()) {
    c->flush_thread();
    c->flush_graph_meetings();
    c->meet_graph_replays_across();
    c->flush_shared_ends();
  }
}
void group_end() {
  t_group_depth = std::max(0, t_group_depth - 1);
  // Before the group's end: the host time of the shared answer (the vgpud request, the wait for
  // the other processes) falls inside the group, whose CPU time the model's cost replaces, not
  // on the program's clock after it.
  if (t_group_depth == 0 && !t_shared_ends.empty())
    if (NcclCollectives* c = backend_collectives()) c->flush_shared_ends();
  GroupHooks::end();
}

}  // namespace

NcclCollectives::NcclCollectives(DriverState& driver)
    : driver_(driver),
      plugin_(vgpu_nccl_driver_side{0, 0, nullptr, nullptr, &current_device, &current_global_gpu,
                                    &vclock::enter_neutral_call, &vclock::leave_call, &group_begin,
                                    &group_operation, &group_launch, &group_end, &launch_tasks_done,
                                    nullptr /* gpu_floor: no promise, as no clocks (the first two) */}),
      data_(driver.memory()),
      links_(driver.cluster()),
      p2p_(driver, &links_),
      meetings_([] { vclock::before_next_call(&flush_held_p2p); }) {
  p2p_.set_share([this](const std::vector<simcore::CollectiveCall>& messages, const NcclP2p::Launch& l,
                        uint64_t kernel, CUstream stream, bool per_thread, uint64_t arrival,
                        std::vector<uint64_t> end_after) {
    return share_messages(messages, l, kernel, stream, per_thread, arrival, std::move(end_after));
  });
}
NcclCollectives::~NcclCollectives() = default;

bool NcclCollectives::share_messages(const std::vector<simcore::CollectiveCall>& messages, const NcclP2p::Launch& l,
                                     uint64_t kernel, CUstream stream, bool per_thread, uint64_t arrival,
                                     std::vector<uint64_t> end_after) {
  if (messages.empty() || kernel == 0 || !shared_.wanted()) return false;
  if (shared_.engine() == nullptr) return false;
  // Each message from its sender's GPU (the receiver places it, as in its own engine), from the
  // kernel's start.
  const int from[] = {0};
  std::vector<simcore::FlowSpec> flows;
  for (const simcore::CollectiveCall& m : messages) {
    std::vector<simcore::FlowSpec> got = links_.shared_flows({m}, from, l.start);
    flows.insert(flows.end(), std::make_move_iterator(got.begin()), std::make_move_iterator(got.end()));
  }
  if (flows.empty()) return false;
  std::vector<uint64_t> after;
  if (arrival != 0) after.push_back(arrival);
  // No ranks: the receiver alone places a message, and vgpud waits for nobody else's.
  t_shared_ends.push_back(SharedEnd{l.comm, l.nranks, l.gpu, {}, {{stream, per_thread}}, {kernel}, std::move(after),
                                    std::move(end_after), std::move(flows), 0, "nccl p2p end"});
  vclock::before_next_call(&flush_held_p2p);
  return true;
}

double NcclCollectives::duration(const simcore::ClusterSpec& cluster, const std::vector<simcore::CollectiveCall>& calls) {
  double total = 0;
  for (const simcore::CollectiveCall& call : calls) total += simcore::estimate_collective(cluster, call).seconds;
  return total;
}

std::vector<int> NcclCollectives::peers_seen(const vgpu_nccl_plugin_side* plugin, const vgpu_nccl_launch& got,
                                             uint64_t tag) {
  uint64_t previous = 0;
  {
    std::lock_guard l(mu_);
    uint64_t& last = last_p2p_[{got.comm_id, got.rank}];
    previous = last;
    last = tag;
  }
  std::vector<int> peers;
  // Two ranks: the peer is the other one (modelled_calls' pair); more: read the tasks.
  if (previous == 0 || got.nranks <= 2 || plugin->launch_tasks == nullptr) return peers;
  std::array<vgpu_nccl_task, VGPU_NCCL_MAX_TASKS> tasks{};
  int count = 0;
  if (plugin->launch_tasks(previous, tasks.data(), static_cast<int>(tasks.size()), &count) < 0) return peers;
  for (int i = 0; i < std::min(count, static_cast<int>(tasks.size())); ++i) {
    const int peer = tasks[i].peer;
    if (peer >= 0 && peer < got.nranks && peer != got.rank && std::find(peers.begin(), peers.end(), peer) == peers.end())
      peers.push_back(peer);
  }
  return peers;
}

std::vector<simcore::CollectiveCall> NcclCollectives::modelled_calls(const vgpu_nccl_launch& got, int device,
                                                                     int local_ranks, const std::vector<int>& peers) {
  if (got.nranks < 1 || got.rank < 0 || got.rank >= got.nranks) return {};
  const int gpu = driver_.global_gpu(device);
  // The other processes' ranks' GPUs as the job's roster knows them (these kernels meet no rank
  // that would tell): a two-rank send/recv communicator may pair GPUs of two nodes. A process
  // holding every rank learns them from its own launches (gpus_of) and opens no table; the table
  // is read only until every rank's GPU is known here (this rank's was posted then: a rank's GPU
  // does not change), not on every launch.
  bool all_known = false;
  {
    std::lock_guard l(mu_);
    const auto it = comm_gpus_.find(got.comm_id);
    all_known = it != comm_gpus_.end() && static_cast<int>(it->second.size()) == got.nranks &&
                std::none_of(it->second.begin(), it->second.end(), [](int g) { return g < 0; });
  }
  const std::vector<int> roster = !all_known && got.nranks > 1 && local_ranks < got.nranks
                                      ? rendezvous_.roster(got.comm_id, got.nranks, got.rank, gpu)
                                      : std::vector<int>{};
  std::lock_guard l(mu_);
  for (int r = 0; r < static_cast<int>(roster.size()); ++r)
    if (r != got.rank && roster[r] >= 0) gpus_of(got.comm_id, got.nranks, r, roster[r]);
  const std::vector<int> gpus = gpus_of(got.comm_id, got.nranks, got.rank, gpu);
  std::vector<simcore::CollectiveCall> calls = contracts::collective_calls(got, gpus, true);
  const bool send_recv = !calls.empty() && calls.back().op == simcore::CollectiveOp::send_recv;
  if (!send_recv || peers.empty()) return calls;
  // A send/recv between this rank and each peer it exchanged with last time: the slowest pair
  // (the kernel ends when its last transfer does).
  std::vector<simcore::CollectiveCall> slowest;
  double longest = -1;
  for (int peer : peers) {
    std::vector<simcore::CollectiveCall> pair = contracts::collective_calls(got, {gpu, gpus[peer]}, true);
    const double t = duration(driver_.cluster(), pair);
    if (t > longest) {
      longest = t;
      slowest = std::move(pair);
    }
  }
  return slowest;
}

std::vector<int> NcclCollectives::gpus_of(uint64_t comm, int nranks, int rank, int gpu) {
  std::vector<int>& known = comm_gpus_[comm];
  if (static_cast<int>(known.size()) != nranks) known.assign(nranks, -1);
  known[rank] = gpu;
  std::vector<int> out(known);
  const int devices = std::max(1, driver_.device_count());
  for (int r = 0; r < nranks; ++r)
    if (out[r] < 0) out[r] = ((gpu + r - rank) % devices + devices) % devices;
  return out;
}

void NcclCollectives::move_data(Work& k, const vgpu_nccl_plugin_side* plugin, uint64_t tag,
                                const vgpu_nccl_launch& got, const std::string& kernel_name) {
  // Collectives all larger than VGPU_SIM_NCCL_DATA_BYTES (DDP's gradient buckets) are timed
  // only: no driver thread, no wait (every rank decides alike from the same calls).
  const int64_t limit = settings::integer(settings::Id::sim_nccl_data_bytes);
  bool small = false;
  for (int i = 0; i < std::min(got.count, VGPU_NCCL_MAX_OPERATIONS); ++i)
    small = small || got.op[i].bytes <= static_cast<uint64_t>(std::max<int64_t>(0, limit));
  if (!small) return;
  auto mover = data_.mover(plugin, tag, got.comm_id, got.nranks, got.rank, nccl_data::op_of_kernel(kernel_name));
  if (!mover) return;
  k.execute = std::move(mover);
  k.blocking = true;  // it waits for the other ranks' parts: on a driver thread
}

bool NcclCollectives::defer(CUstream stream, bool per_thread, uint64_t tag, const vgpu_nccl_launch& got, int device,
                            int local, NcclP2p::Launch base, Work& k, CUresult* rc) {
  const vgpu_nccl_plugin_side* plugin = plugin_.plugin();
  if (plugin == nullptr || plugin->launch_tasks == nullptr || local <= 0) return false;
  uint64_t arrival = 0;
  if (CUresult r = p2p_.arrive(stream, per_thread, &arrival); r != CUDA_SUCCESS) {
    *rc = r;
    return true;
  }
  if (arrival == 0) return false;
  {
    std::lock_guard l(mu_);
    deferred_[tag] = Deferred{stream, per_thread, arrival, std::move(k), got, device, local, std::move(base)};
  }
  t_deferred.push_back(tag);
  vclock::before_next_call(&flush_held_p2p);
  *rc = CUDA_SUCCESS;
  // Its tasks may all be known already (a plan run before its launch returned): no call will
  // tell of them again.
  int count = 0;
  if (plugin->launch_tasks(tag, nullptr, 0, &count) == 1)
    if (auto d = take_deferred(tag)) place_deferred(tag, std::move(*d), nullptr);
  return true;
}

std::optional<NcclCollectives::Deferred> NcclCollectives::take_deferred(uint64_t tag) {
  std::lock_guard l(mu_);
  auto it = deferred_.find(tag);
  if (it == deferred_.end()) return std::nullopt;
  Deferred d = std::move(it->second);
  deferred_.erase(it);
  return d;
}

void NcclCollectives::tasks_done(uint64_t tag) {
  if (auto d = take_deferred(tag)) {
    place_deferred(tag, std::move(*d), nullptr);
    return;
  }
  if (resolve_captured(tag)) return;
  // Placed on its own already (its thread called the driver first): its peers still get its
  // arrivals, and the counts of each direction stay in step.
  std::optional<Flushed> f;
  {
    std::lock_guard l(mu_);
    if (auto it = flushed_.find(tag); it != flushed_.end()) {
      f = std::move(it->second);
      flushed_.erase(it);
    }
  }
  if (f && peers_of(tag, &f->base)) p2p_.post_late(f->base, f->arrival);
}

bool NcclCollectives::peers_of(uint64_t tag, NcclP2p::Launch* l) {
  const vgpu_nccl_plugin_side* plugin = plugin_.plugin();
  std::array<vgpu_nccl_task, VGPU_NCCL_MAX_TASKS> tasks{};
  int count = 0;
  if (plugin == nullptr || plugin->launch_tasks(tag, tasks.data(), static_cast<int>(tasks.size()), &count) != 1)
    return false;
  // The peers its tasks name, with the bytes of each (the k-th launch of each direction
  // matches, as for two ranks; a send past NCCL's buffer waits for its receiver).
  for (int i = 0; i < std::min(count, static_cast<int>(tasks.size())); ++i) {
    const vgpu_nccl_task& t = tasks[i];
    const std::string_view func = nccl_data::field(t.func, sizeof t.func);
    const bool send = func == "Send";
    if ((!send && func != "Recv") || t.peer < 0 || t.peer >= l->nranks || t.peer == l->rank) continue;
    std::vector<int>& peers = send ? l->send_to : l->receive_from;
    std::vector<uint64_t>& sizes = send ? l->send_sizes : l->receive_sizes;
    const auto at = std::find(peers.begin(), peers.end(), t.peer);
    if (at == peers.end()) {
      peers.push_back(t.peer);
      sizes.push_back(nccl_data::count_bytes(t));
    } else {
      sizes[at - peers.begin()] += nccl_data::count_bytes(t);
    }
  }
  return true;
}

void NcclCollectives::look_again_before_next_call(uint64_t tag) {
  t_deferred.push_back(tag);
  vclock::before_next_call(&flush_held_p2p);
}

void NcclCollectives::flush_thread() {
  std::vector<uint64_t> tags;
  tags.swap(t_deferred);
  for (uint64_t tag : tags)
    if (auto d = take_deferred(tag))
      place_deferred(tag, std::move(*d), "its NCCL tasks were not all started before its thread's next driver call");
    else
      resolve_captured(tag);  // a captured send/recv's tasks: kept for their tasks_done when not all known yet
}

void NcclCollectives::flush_graph_meetings() { meetings_.flush_thread(driver_.streams()); }

uint64_t NcclCollectives::every_rank_arrived(int gpu, double latest) {
  simcore::TaskSpec t;
  t.gpu = gpu;
  t.not_before = latest;
  t.label = "nccl: every rank arrived";
  return driver_.engine().add_task(t);
}

void NcclCollectives::meet_graph_replays_across() {
  simcore::Engine& engine = driver_.engine();
  // Placing a rest may reach the graph's next collective, met across processes in turn.
  for (auto todo = meetings_.take_across(); !todo.empty(); todo = meetings_.take_across())
    for (NcclGraphMeetings::Across& a : todo) {
      // Each local rank's arrival posted in the job's table, the last one waiting for every rank's.
      NcclRendezvous::Arrivals across;
      double latest_here = 0;
      for (size_t i = 0; i < a.members.size(); ++i) {
        double t = 0;
        if (auto at = engine.query(a.arrivals[i])) t = at->start;
        latest_here = std::max(latest_here, t);
        across = rendezvous_.arrive(a.comm, a.nranks, a.members[i].first, a.members[i].second, t,
                                    i + 1 == a.members.size(), kRendezvousTimeoutS);
      }
      std::vector<uint64_t> after = a.arrivals;
      if (across.latest > latest_here && !a.members.empty())
        if (const uint64_t g = every_rank_arrived(a.members.back().second, across.latest); g != 0) after.push_back(g);
      log::debug("sim nccl: comm {:x}: a graph replay's collective meets the other processes' ranks: {} of {} "
                 "known, from {:.3f} us (this process's latest arrival {:.3f} us)", a.comm, across.known, a.nranks,
                 std::max(across.latest, latest_here) * 1e6, latest_here * 1e6);
      for (const Work::PlaceRest& rest : a.rests) driver_.streams().place_rest(rest, after);
    }
}

void NcclCollectives::flush_shared_ends() {
  if (t_shared_ends.empty()) return;
  if (t_group_depth > 0) {  // a driver call inside NCCL's group: its other kernels may follow
    vclock::before_next_call(&flush_held_p2p);
    return;
  }
  std::vector<SharedEnd> ends;
  ends.swap(t_shared_ends);
  // Every collective and message of the group in one request: vgpud places their flows, holds
  // the reply until every rank of each collective placed its own (any process's request), and
  // answers each one's latest finish over all of them (nccl_shared_fabric.h). One request, so
  // another process taking the same collectives in another order waits for nothing of ours.
  std::vector<simcore::SharedCollective> collectives;
  collectives.reserve(ends.size());
  for (SharedEnd& e : ends) {
    simcore::SharedCollective c;
    c.comm = e.comm;
    c.seq = e.seq;
    c.nranks = e.ranks.empty() ? 0 : static_cast<uint32_t>(e.nranks);  // a message: nobody to wait for
    c.ranks.assign(e.ranks.begin(), e.ranks.end());
    c.flows = std::move(e.flows);
    collectives.push_back(std::move(c));
  }
  const std::vector<simcore::SharedResult> results =
      shared_.share(collectives, driver_.ranks().lowest_floor(vclock::now()));
  log::debug("sim nccl: the shared answers of {} collective end(s) in one vgpud request", ends.size());
  simcore::Engine& engine = driver_.engine();
  StreamManager& streams = driver_.streams();
  for (size_t i = 0; i < ends.size(); ++i) {
    SharedEnd& e = ends[i];
    Work end;
    end.kind = Work::Kind::other;
    end.label = e.label;
    end.also_after = std::move(e.end_after);
    // The shared answer as a task of this process's engine: no earlier than the flows' finish
    // there (alone: the model's time, as the local flows; beside another process's flows on a
    // link: later).
    // results: one a collective on every path (nullopt finishes when vgpud is lost).
    if (const std::optional<double> finish = results[i].finish) {
      simcore::TaskSpec t;
      t.gpu = e.gpu;
      t.not_before = *finish;
      t.after = e.after;
      t.label = "nccl transfers on the job's fabric";
      if (const simcore::EventId g = engine.add_task(t); g != simcore::kNoEvent) end.also_after.push_back(g);
      log::debug("sim nccl: comm {:x} on GPU {}: shared transfers end at {:.3f} us ({} of {} ranks placed)", e.comm,
                 e.gpu, *finish * 1e6, results[i].covered, e.nranks);
    }
    for (size_t j = 0; j < e.kernels.size(); ++j) {
      if (streams.append_after_last(e.kernels[j], end) || j >= e.streams.size()) continue;
      log::debug("sim nccl: the end of a collective of comm {:x} goes behind later work", e.comm);
      (void)streams.submit(e.streams[j].first, end, e.streams[j].second);
    }
  }
}

void NcclCollectives::place_deferred(uint64_t tag, Deferred d, const char* why) {
  NcclP2p::Launch l = std::move(d.base);
  const bool known = peers_of(tag, &l);
  if (!known || !NcclP2p::matched(l)) {
    if (!known) {
      log::once(log::Level::warn, "sim-nccl-p2p-tasks",
                fmt::format("sim nccl: a send/recv kernel of a communicator of more than two ranks meets no other "
                            "rank: {}", why != nullptr ? why : "its NCCL tasks are not known"));
      {
        std::lock_guard lock(mu_);
        flushed_[tag] = Flushed{d.arrival, l};
        while (flushed_.size() > NcclP2p::kMaxKept) flushed_.erase(flushed_.begin());  // tags only grow
      }
      p2p_.place_alone(d.stream, d.per_thread, d.arrival, std::move(d.kernel));
      // The tasks may have come in between (from another thread), their call finding no record
      // yet: whoever takes the record posts its arrivals.
      const vgpu_nccl_plugin_side* plugin = plugin_.plugin();
      int count = 0;
      if (plugin != nullptr && plugin->launch_tasks(tag, nullptr, 0, &count) == 1) tasks_done(tag);
      return;
    }
    p2p_.place_alone(d.stream, d.per_thread, d.arrival, std::move(d.kernel));
    return;
  }
  // Timed between this rank's GPU and the slowest of the GPUs its tasks name.
  std::vector<int> peers = l.send_to;
  for (int r : l.receive_from)
    if (std::find(peers.begin(), peers.end(), r) == peers.end()) peers.push_back(r);
  const std::vector<simcore::CollectiveCall> calls = modelled_calls(d.got, d.device, d.local_ranks, peers);
  if (!calls.empty()) d.kernel.duration_s = duration(driver_.cluster(), calls);
  receive_gpus(l);
  log::debug("sim nccl: rank {}/{} of comm {:x}: send/recv launch {} meets {} sender(s) and {} receiver(s) ({:.3f} us)",
             l.rank, l.nranks, l.comm, tag, l.receive_from.size(), l.send_to.size(), d.kernel.duration_s * 1e6);
  p2p_.meet(d.stream, d.per_thread, l, std::move(d.kernel), d.arrival, true);
}

std::vector<uint64_t> NcclCollectives::place_transfers(const std::vector<simcore::CollectiveCall>& calls,
                                                       std::span<const int> ranks, std::vector<uint64_t> after,
                                                       double start_at_most, int gpu) {
  NcclLinkShare::Start start;
  start.after = std::move(after);
  // The engine's floor (the least promise of the ranks): no promise broken, and no later than the
  // collective's start unless every rank promised past it (then the latency task is shortened).
  start.not_before = driver_.ranks().lowest_floor(this_thread().promised);
  start.start_at_most = start_at_most;
  start.gpu = gpu;
  return links_.place(driver_.engine(), calls, ranks, start);
}

void NcclCollectives::receive_gpus(NcclP2p::Launch& l) {
  l.receive_gpus.clear();
  std::lock_guard lock(mu_);
  const auto it = comm_gpus_.find(l.comm);
  if (it == comm_gpus_.end() || static_cast<int>(it->second.size()) != l.nranks) return;
  for (int peer : l.receive_from) {
    const int g = peer >= 0 && peer < l.nranks ? it->second[peer] : -1;
    if (g < 0) {  // not known yet (another process's rank before the roster told): no transfers
      l.receive_gpus.clear();
      return;
    }
    l.receive_gpus.push_back(g);
  }
}

bool NcclCollectives::drives_one_gpu() const {
  int used = 0;
  for (int d = 0; d < driver_.device_count() && used < 2; ++d) used += driver_.contexts().live_contexts(d) > 0;
  return used <= 1;
}

bool NcclCollectives::submit(CUstream stream, bool per_thread, const PreparedLaunch& p, CUresult* rc) {
  if (!p.function || !p.collective) return false;
  const vgpu_nccl_plugin_side* plugin = plugin_.plugin();
  if (plugin == nullptr) return false;
  const uint64_t tag = plugin->current_launch();
  if (tag == 0) return false;
  vgpu_nccl_launch got{};
  const int known = plugin->describe_launch(tag, &got);
  // Send/recv kernels are left out of the matching (only some ranks of the communicator take
  // part, and the matching below waits for every rank): each lasts the model's time for its
  // sends and receives from its own start, and moves their messages' data (nccl_data.h).
  const std::vector<simcore::CollectiveCall> any = contracts::collective_calls(got, {0}, false);
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  StreamManager& streams = driver_.streams();
  if (streams.capture_info(stream, per_thread, &capturing, nullptr, nullptr, nullptr, nullptr) != CUDA_SUCCESS)
    return false;
  // Kernels that meet no other rank last the model's time for what the launch does from their own
  // start: the whole launch's, over the GPUs the communicator's ranks are known on, and for a
  // send/recv between this rank's GPU and the peers of its previous send/recv launch there (the
  // peers are named only by the kernel's tasks, which NCCL starts after the launch; at the first
  // one the communicator's first two GPUs). Without a call on record: not timed here.
  auto timed_alone = [&](Work& k, const char* what) {
    const std::vector<simcore::CollectiveCall> calls =
        modelled_calls(got, p.function->device, local_ranks_of(plugin, got), peers_seen(plugin, got, tag));
    if (calls.empty()) return false;
    k.duration_s = duration(driver_.cluster(), calls);
    const std::string ops = operations_text(got);
    log::debug("sim nccl: rank {}/{} of comm {:x}: {} launch {} ({}) -> {:.3f} us", got.rank, got.nranks, got.comm_id,
               what, tag, ops, k.duration_s * 1e6);
    k.label = fmt::format("{} [{}]", k.label, ops);
    return true;
  };
  if (capturing != CU_STREAM_CAPTURE_STATUS_NONE) {
    // Captured into a CUDA graph (CUDA-graph training steps, tensor-parallel layers under graphs):
    // the kernel's node lasts that time on every replay and moves no data. A collective's replay
    // starts once every rank's replay of it arrived, this process's and the others'
    // (nccl_graph_meet.h), and places its transfers from the node's start
    // (nccl_graph_replay.cpp).
    if (known != 0) return false;
    Work k = p.to_work();
    if (!timed_alone(k, "captured")) return false;
    const int local = local_ranks_of(plugin, got);
    k.on_replay = replay_transfers(got, tag, p.function->device, local, k.duration_s);
    // A collective's replays meet the other ranks' replays: this process's, then other processes'
    // (nccl_graph_meet.h), as a direct launch's kernel meets them (below).
    if (std::none_of(any.begin(), any.end(), [](const simcore::CollectiveCall& c) {
          return c.op == simcore::CollectiveOp::send_recv || c.op == simcore::CollectiveOp::all_to_all;
        }) && !any.empty() && got.nranks > 1 && got.rank >= 0 && got.rank < got.nranks) {
      const bool one_gpu = drives_one_gpu();
      NcclGraphMeetings::Node node;
      node.comm = got.comm_id;
      node.index = meetings_.next_index(got.comm_id, got.rank);
      node.rank = got.rank;
      node.meeting = one_gpu ? 1 : std::min(local, got.nranks);
      node.nranks = got.nranks;
      node.gpu = driver_.global_gpu(p.function->device);
      node.across = one_gpu || (local > 0 && local < got.nranks);
      k.on_meet = meetings_.hook(node);
    }
    *rc = streams.submit(stream, std::move(k), per_thread);
    return true;
  }
  if (known != 0 || any.empty()) {
    if (known != 0) {
      log::debug("sim nccl: launch {} has no collective call on record ({}): fallback duration", tag, known);
      return false;
    }
    // Sends and receives (the group's calls on record: launch_tags.h), timed as above; the fallback
    // duration, as any kernel, when nothing is on record. Their messages' data moves either way.
    auto mover = data_.p2p_mover(plugin, tag, got.comm_id, got.rank);
    Work k = p.to_work();
    if (!timed_alone(k, "send/recv") && !mover) return false;
    if (mover) {
      k.execute = std::move(mover);
      k.blocking = true;
    }
    // A send/recv whose peers the launch names meets them: a receive starts after the matching
    // send's arrival, a send past NCCL's buffer after its receive's (nccl_p2p.h).
    // A larger communicator's launch names no peer until its tasks come, right after the launch
    // returns: the kernel is held until then (its arrival placed now).
    const P2pOps ops = p2p_ops(got);
    if (ops.any() && got.nranks >= 2 && got.rank >= 0 && got.rank < got.nranks) {
      // Two ranks: the peer is the other one. More: the calls name no peer (see nccl_p2p.h on why
      // an all-to-all's are not taken as every other rank either); the tasks will.
      const bool two = got.nranks == 2;
      NcclP2p::Launch l;
      if (two && ops.send != nullptr) {
        l.send_to = {1 - got.rank};
        l.send_bytes = ops.send->bytes;
      }
      if (two && ops.receive != nullptr) {
        l.receive_from = {1 - got.rank};
        l.receive_bytes = ops.receive->bytes;
      }
      l.comm = got.comm_id;
      l.nranks = got.nranks;
      l.rank = got.rank;
      l.gpu = driver_.global_gpu(p.function->device);
      const int local = local_ranks_of(plugin, got);
      l.peer_here = local >= got.nranks;
      l.thread_ranks = thread_group_ranks();
      l.one_gpu = drives_one_gpu();
      if (two && local > 0 && NcclP2p::matched(l)) {
        receive_gpus(l);
        *rc = p2p_.submit(stream, per_thread, l, std::move(k));
        return true;
      }
      if (!two && defer(stream, per_thread, tag, got, p.function->device, local, std::move(l), k, rc)) return true;
    }
    *rc = streams.submit(stream, std::move(k), per_thread);
    return true;
  }

  const uint64_t comm = got.comm_id;
  const int nranks = got.nranks, rank = got.rank;
  if (nranks < 1 || rank < 0 || rank >= nranks) return false;
  const std::string what = operations_text(got);
  const int gpu = driver_.global_gpu(p.function->device);  // the cluster's GPU (CUDA_VISIBLE_DEVICES)

  // Arrival: where this rank's kernel would start on its own (no earlier than the clock now).
  const double own_clock = vclock::now();
  uint64_t arrival = 0;
  if (CUresult r = submit_arrival(streams, stream, per_thread, "nccl arrival", &arrival); r != CUDA_SUCCESS) {
    *rc = r;
    return true;
  }

  // A process with one GPU holds one rank: the others are in other processes (torchrun). It
  // waits for their arrivals in the job's table; a process driving several GPUs does not use
  // the table (one thread may launch all its ranks) and its ranks meet below.
  simcore::Engine& engine = driver_.engine();
  double arrival_t = 0;
  NcclRendezvous::Arrivals across;
  uint64_t gate = 0;  // no earlier than the latest arrival known across processes
  const bool one_gpu = nranks > 1 && drives_one_gpu();
  // A process driving several GPUs whose communicator has ranks in other processes too (2
  // processes x 4 GPUs): its ranks meet below, and the last of them meets the other processes'
  // ranks in the table (see the header).
  const int local = !one_gpu && nranks > 1 ? plugin->local_ranks(comm) : 0;
  const bool across_processes = local > 0 && local < nranks;
  if (one_gpu || across_processes) {
    if (arrival != 0)
      if (auto at = engine.query(arrival)) arrival_t = at->start;
  }
  // Posts this rank's arrival in the job's table (`wait`: until every rank's is there) and, when
  // a rank elsewhere arrived later, makes the task this rank's kernel must start after.
  auto meet_the_job = [&](bool wait) {
    across = rendezvous_.arrive(comm, nranks, rank, gpu, arrival_t, wait, kRendezvousTimeoutS);
    if (across.latest > arrival_t) gate = every_rank_arrived(gpu, across.latest);
  };
  if (one_gpu) meet_the_job(true);
  if (one_gpu && across.complete) {
    // This process's only rank: its kernel starts when the last rank of the job arrived and
    // lasts the model's time for every rank's GPU, so every rank's kernel ends together.
    std::vector<int> gpus = across.gpus;
    {
      std::lock_guard l(mu_);
      launches_[{comm, rank}]++;
      for (int r = 0; r < nranks; ++r)
        if (gpus[r] >= 0) gpus_of(comm, nranks, r, gpus[r]);
      gpus = gpus_of(comm, nranks, rank, gpu);
    }
    const std::vector<simcore::CollectiveCall> calls = contracts::collective_calls(got, gpus, false);
    const double seconds = duration(driver_.cluster(), calls);
    Work k = p.to_work();
    k.duration_s = seconds;
    k.label = fmt::format("{} [{}]", k.label, what);
    move_data(k, plugin, tag, got, p.function->desc().name());
    if (gate != 0) k.also_after.push_back(gate);
    uint64_t kernel = 0;
    k.on_timeline = [&kernel](uint64_t e) { kernel = e; };
    *rc = streams.submit(stream, std::move(k), per_thread);
    // This rank's transfers on the fabric, to the next rank and from the previous one (the
    // other processes place theirs too: each process sees both of its GPU's directions, so that a
    // message it receives meets the ring's transfer into its GPU): the stream goes on once both
    // the kernel and they are done.
    std::vector<uint64_t> after;
    if (arrival != 0) after.push_back(arrival);
    if (gate != 0) after.push_back(gate);
    if (*rc == CUDA_SUCCESS && !after.empty()) {
      const double start = std::max(arrival_t, across.latest);
      std::vector<uint64_t> transfers =
          place_transfers(calls, with_incoming({rank}, nranks), after, start, gpu);
      // The same flow of this rank in the job's shared engine, where the other processes place
      // theirs: the end then also waits for what that engine says (read after the thread's NCCL
      // group: flush_shared_ends).
      std::vector<simcore::FlowSpec> shared;
      uint64_t seq = 0;
      if (!transfers.empty() && kernel != 0 && shared_.wanted()) {
        // Counted on every rank alike, with vgpud or not: the collective's key there.
        seq = next_shared(comm);
        const int own[] = {rank};
        if (shared_.engine() != nullptr) shared = links_.shared_flows(calls, own, start);
      }
      if (!shared.empty()) {
        t_shared_ends.push_back(SharedEnd{comm, nranks, gpu, {rank}, {{stream, per_thread}}, {kernel},
                                          std::move(after), std::move(transfers), std::move(shared), seq});
        vclock::before_next_call(&flush_held_p2p);
      } else if (!transfers.empty()) {
        Work end;
        end.kind = Work::Kind::other;
        end.label = "nccl collective end";
        end.also_after = std::move(transfers);
        *rc = streams.submit(stream, std::move(end), per_thread);
      }
    }
    log::debug("sim nccl: rank {}/{} of comm {:x} on GPU {} (ranks as processes): {} from {:.3f} us (own arrival "
               "{:.3f} us) -> {:.3f} us", rank, nranks, comm, gpu, what, std::max(arrival_t, across.latest) * 1e6,
               arrival_t * 1e6, seconds * 1e6);
    return true;
  }

  std::pair<uint64_t, uint64_t> key;
  std::vector<uint64_t> others;
  double seconds = 0;
  bool last = false, hold = false;
  const int meeting = across_processes ? local : nranks;  // the ranks that meet in this process
  const auto raw = reinterpret_cast<uintptr_t>(stream);
  const bool explicit_stream = stream != nullptr && raw != reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY) &&
                               raw != reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD);
  Work k = p.to_work();
  move_data(k, plugin, tag, got, p.function->desc().name());
  {
    std::lock_guard l(mu_);
    key = {comm, launches_[{comm, rank}]++};
    Pending& pend = pending_[key];
    if (pend.arrivals.empty()) pend.thread = std::this_thread::get_id();
    pend.one_thread = pend.one_thread && pend.thread == std::this_thread::get_id();
    pend.nranks = meeting;
    pend.ranks.push_back(rank);
    others = pend.arrivals;
    if (gate != 0) others.push_back(gate);
    if (arrival != 0) pend.arrivals.push_back(arrival);
    last = static_cast<int>(pend.arrivals.size()) >= meeting;
    seconds = duration(driver_.cluster(), contracts::collective_calls(got, gpus_of(comm, nranks, rank, gpu), false));
    k.duration_s = seconds;
    k.label = fmt::format("{} [{}]", k.label, what);
    // The group pattern (one thread launches every rank): hold an early rank's kernel until the
    // last rank arrives, so that every rank's kernel starts with the collective. Across
    // processes from the first collective on: the last local rank learns when the collective
    // starts only from the table.
    hold = !last && arrival != 0 && explicit_stream &&
           (one_thread_[comm] || (across_processes && pend.one_thread));
    if (hold && across_processes) {
      // Posted now, without waiting: the last local rank waits for the other processes.
      rendezvous_.arrive(comm, nranks, rank, gpu, arrival_t, false, kRendezvousTimeoutS);
    }
    if (hold) {
      pend.held.push_back(Held{stream, per_thread, arrival, std::move(k)});
      log::debug("sim nccl: rank {}/{} of comm {:x} collective {} on GPU {} held until every rank arrives",
                 rank, nranks, comm, key.second, gpu);
      return true;
    }
  }

  if (across_processes) {
    // Every rank of this process arrived (or this one is not held): post, and for the last,
    // wait for the other processes' ranks; the collective starts at the latest arrival and
    // lasts the model's time on every rank's GPU.
    meet_the_job(last);
    if (gate != 0) others.push_back(gate);
    if (last) {
      std::lock_guard l(mu_);
      for (int r = 0; r < nranks; ++r)
        if (r < static_cast<int>(across.gpus.size()) && across.gpus[r] >= 0) gpus_of(comm, nranks, r, across.gpus[r]);
      seconds = duration(driver_.cluster(), contracts::collective_calls(got, gpus_of(comm, nranks, rank, gpu), false));
      k.duration_s = seconds;
    }
    log::debug("sim nccl: rank {}/{} of comm {:x} on GPU {} ({} of this process's {} ranks{}): from {:.3f} us",
               rank, nranks, comm, gpu, last ? "the last" : "one", local,
               across.complete ? ", every rank arrived" : "", std::max(arrival_t, across.latest) * 1e6);
  }
  k.also_after = std::move(others);
  uint64_t kernel = 0;
  k.on_timeline = [&kernel](uint64_t e) { kernel = e; };
  *rc = streams.submit(stream, std::move(k), per_thread);
  log::debug("sim nccl: rank {}/{} of comm {:x} collective {} on GPU {}: {} -> {:.3f} us", rank, nranks,
             comm, key.second, gpu, what, seconds * 1e6);

  // The held kernels of the early ranks go right after their arrivals, after every arrival.
  std::vector<Held> held;
  std::vector<uint64_t> all_arrivals;
  if (last) {
    std::lock_guard l(mu_);
    auto it = pending_.find(key);
    if (it != pending_.end()) {
      held = std::move(it->second.held);
      it->second.held.clear();
      all_arrivals = it->second.arrivals;
    }
  }
  std::vector<uint64_t> placed;
  std::vector<std::pair<CUstream, bool>> placed_streams;
  if (gate != 0) all_arrivals.push_back(gate);
  for (Held& h : held) {
    uint64_t e = 0;
    h.kernel.also_after = all_arrivals;
    if (across_processes) h.kernel.duration_s = seconds;  // every rank's GPU known now
    h.kernel.on_timeline = [&e](uint64_t v) { e = v; };
    if (!streams.append_after_last(h.arrival, h.kernel)) {
      // Work was queued behind the arrival meanwhile: the kernel goes at the stream's end.
      log::debug("sim nccl: a held kernel of comm {:x} collective {} goes behind later work", comm, key.second);
      h.kernel.on_timeline = [&e](uint64_t v) { e = v; };
      if (streams.submit(h.stream, std::move(h.kernel), h.per_thread) != CUDA_SUCCESS) continue;
    }
    if (e != 0) {
      placed.push_back(e);
      placed_streams.emplace_back(h.stream, h.per_thread);
    }
  }

  // The last rank's kernel: every rank's stream continues after the collective's end, which
  // is also its transfers' on the fabric (nccl_link_share.h).
  std::vector<uint64_t> kernels, arrivals;
  std::vector<std::pair<CUstream, bool>> kernel_streams;
  std::vector<int> ranks;
  std::vector<simcore::CollectiveCall> calls;
  double across_start = -1;
  {
    std::lock_guard l(mu_);
    auto it = pending_.find(key);
    if (it == pending_.end()) return true;
    if (kernel != 0) {
      it->second.kernels.push_back(kernel);
      it->second.streams.emplace_back(stream, per_thread);
    }
    it->second.kernels.insert(it->second.kernels.end(), placed.begin(), placed.end());
    it->second.streams.insert(it->second.streams.end(), placed_streams.begin(), placed_streams.end());
    if (gate != 0) it->second.gates.push_back(gate);
    if (last && across_processes && across.complete) it->second.across_start = std::max(arrival_t, across.latest);
    if (static_cast<int>(it->second.arrivals.size()) >= meeting &&
        static_cast<int>(it->second.kernels.size()) >= meeting) {
      kernels = std::move(it->second.kernels);
      kernel_streams = std::move(it->second.streams);
      arrivals = std::move(it->second.arrivals);
      arrivals.insert(arrivals.end(), it->second.gates.begin(), it->second.gates.end());
      ranks = std::move(it->second.ranks);
      across_start = it->second.across_start;
      calls = contracts::collective_calls(got, gpus_of(comm, nranks, rank, gpu), false);
      one_thread_[comm] = it->second.one_thread;
      pending_.erase(it);
    }
    while (pending_.size() > kMaxPending) pending_.erase(pending_.begin());  // a rank never came
  }
  std::vector<uint64_t> end_after = kernels;
  std::vector<simcore::FlowSpec> shared;
  uint64_t seq = 0;
  if (!kernels.empty()) {
    const std::vector<uint64_t> transfers =
        place_transfers(calls, with_incoming(ranks, nranks), arrivals, own_clock, gpu);
    end_after.insert(end_after.end(), transfers.begin(), transfers.end());
    // Ranks in other processes too: this process's ranks' flows in the job's shared engine as
    // well (as for a process of one GPU above), the ends held for its answer.
    if (!transfers.empty() && across_start >= 0 && shared_.wanted()) {
      seq = next_shared(comm);
      if (shared_.engine() != nullptr) shared = links_.shared_flows(calls, ranks, across_start);
    }
  }
  if (!shared.empty()) {
    t_shared_ends.push_back(SharedEnd{comm, nranks, gpu, std::move(ranks), std::move(kernel_streams),
                                      std::move(kernels), std::move(arrivals), std::move(end_after),
                                      std::move(shared), seq});
    vclock::before_next_call(&flush_held_p2p);
    return true;
  }
  for (uint64_t k_event : kernels) {
    Work end;
    end.kind = Work::Kind::other;
    end.label = "nccl collective end";
    end.also_after = end_after;
    streams.append_after_last(k_event, std::move(end));
  }
  return true;
}

}  // namespace vgpu

// The sim backend's client of the plugin contract: its module manager's (DriverState root).
vgpu::contracts::NcclPluginClient* vgpu::contracts::backend_nccl_plugin_client() {
  vgpu::DriverState* d = DriverState::get();
  return d == nullptr ? nullptr : &d->modules().nccl().plugin();
}
