#include "profiler/launch_tags.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "abi/profiler_v5.h"
#include "core/driver_link.h"

namespace vgpu::nccl::prof {
namespace {

thread_local uint64_t t_current_launch = 0;
std::atomic<bool> g_active{false};

// What a context is: NCCL only needs a non-null pointer back; vgpu needs a distinct identity per
// communicator (the slots of a GroupApi are per communicator).
struct Context {
  uint64_t comm_id = 0;
  int nranks = 0, nnodes = 0, rank = -1;  // the communicator's shape (profiler init)
};

}  // namespace

LaunchTags& LaunchTags::get() {
  static LaunchTags* tags = new LaunchTags;  // NCCL's threads may call in while the process exits
  return *tags;
}

void* LaunchTags::encode(uint64_t value, Kind k) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>((value << 4) | k));
}

bool LaunchTags::decode(const void* handle, Kind k, uint64_t* value) {
  const auto v = reinterpret_cast<uintptr_t>(handle);
  if (v == 0 || (v & 0xf) != k) return false;
  *value = v >> 4;
  return true;
}

int nccl_type_bytes(const char* datatype) {
  if (datatype == nullptr) return 0;
  static constexpr struct {
    const char* name;
    int bytes;
  } kTypes[] = {{"ncclInt8", 1},     {"ncclUint8", 1},    {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
                {"ncclFloat16", 2},  {"ncclBfloat16", 2}, {"ncclInt32", 4},      {"ncclUint32", 4},
                {"ncclFloat32", 4},  {"ncclInt64", 8},    {"ncclUint64", 8},     {"ncclFloat64", 8}};
  for (const auto& t : kTypes)
    if (std::strcmp(datatype, t.name) == 0) return t.bytes;
  return 0;
}

void* LaunchTags::open_context(int* activation_mask, uint64_t comm_id, int nranks, int nnodes, int rank) {
  // The chain from a transfer to its kernel launch, and nothing that changes what NCCL runs
  // (ncclProfileKernelCh would add proxy work) or costs per step beyond it.
  if (activation_mask != nullptr) {
    *activation_mask = ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
                       ncclProfileKernelLaunch | ncclProfileGroup | ncclProfileColl | ncclProfileP2p |
                       ncclProfileProxyOp | ncclProfileProxyStep;
  }
  g_active.store(true, std::memory_order_release);
  {
    std::lock_guard l(mu_);
    ++open_contexts_[comm_id];
  }
  // The driver's hooks from the communicator's first call on, not only from its first kernel or
  // network connection (a vgpu driver that has met neither has not handed them over yet): the
  // group hooks tell the sim backend which ranks a thread drives before it launches any of them
  // (vgpu/sim/exec/nccl_p2p.h). Asking the current device knocks when none was handed over.
  int device = 0;
  driver_current_device(&device);
  return new Context{comm_id, nranks, nnodes, rank};
}

void LaunchTags::close_context(void* context) {
  auto* c = static_cast<Context*>(context);
  if (c == nullptr) return;
  {
    std::lock_guard l(mu_);
    auto it = open_contexts_.find(c->comm_id);
    if (it != open_contexts_.end() && --it->second <= 0) open_contexts_.erase(it);
  }
  delete c;  // its communicator's events are over
}

int LaunchTags::local_ranks(uint64_t comm_id) const {
  std::lock_guard l(mu_);
  auto it = open_contexts_.find(comm_id);
  return it == open_contexts_.end() ? 0 : it->second;
}

bool LaunchTags::active() const { return g_active.load(std::memory_order_acquire); }

uint64_t LaunchTags::current_launch() { return t_current_launch; }

uint64_t LaunchTags::fresh() { return ++next_; }

LaunchTags::Node* LaunchTags::node(const void* handle, Kind k) {
  uint64_t id = 0;
  return decode(handle, k, &id) ? node(id, k) : nullptr;
}

LaunchTags::Node* LaunchTags::node(uint64_t id, Kind k) {
  auto it = nodes_.find(id);
  return it == nodes_.end() || it->second.kind != k ? nullptr : &it->second;
}

LaunchTags::Node* LaunchTags::group_of(const void* handle) {
  if (Node* g = node(handle, group_api)) return g;
  Node* a = node(handle, api);
  return a == nullptr ? nullptr : node(a->group, group_api);
}

uint64_t LaunchTags::slot_tag(Node& group, void* context, bool is_launch, uint32_t* index_out) {
  Slots* s = nullptr;
  for (Slots& x : group.slots)
    if (x.context == context) s = &x;
  if (s == nullptr) {
    group.slots.push_back(Slots{context, 0, 0, {}});
    s = &group.slots.back();
  }
  const uint32_t index = is_launch ? s->launches++ : s->plans++;
  if (index_out != nullptr) *index_out = index;
  while (s->tags.size() <= index) s->tags.push_back(fresh());
  return s->tags[index];
}

void LaunchTags::retire(uint64_t id) {
  retired_.push_back(id);
  while (retired_.size() > kKeepRetired) {
    nodes_.erase(retired_.front());
    retired_.pop_front();
  }
}

void* LaunchTags::start(void* context, const Event& e) {
  uint64_t tag = 0;
  switch (e.type) {
    case ncclProfileProxyStep:  // the hot path: no lock
      decode(e.parent, op, &tag);
      return encode(tag, step);
    case ncclProfileProxyOp:
      decode(e.parent, task, &tag);
      return encode(tag, op);
    default:
      break;
  }
  // The host threads' events (a lock, the tables): vgpu's own work, which the real job does not
  // do, so bracketed for the driver and not charged to the thread's virtual clock. The proxy
  // threads' step and op events above cost a few instructions: no bracket, which would cost more.
  const OwnWork own;
  std::lock_guard l(mu_);
  switch (e.type) {
    case ncclProfileGroupApi: {
      const uint64_t id = fresh();
      nodes_[id].kind = group_api;
      nccl_group::begin();  // the driver charges the group its modeled host cost (driver_link.h)
      return encode(id, group_api);
    }
    case ncclProfileCollApi:
    case ncclProfileP2pApi: {
      // The rank's communicator (its profiler context: one per ncclComm_t; comm_id is the same
      // on every rank, and one thread may drive several ranks of one communicator).
      nccl_group::operation(reinterpret_cast<uintptr_t>(context),
                            e.type == ncclProfileCollApi && e.func != nullptr && std::strcmp(e.func, "AllReduce") == 0);
      uint64_t group = 0;
      decode(e.parent, group_api, &group);
      if (e.func != nullptr) {
        if (Node* g = node(group, group_api))
          g->calls.push_back(Call{context, e.func, e.count, nccl_type_bytes(e.datatype), e.type == ncclProfileP2pApi});
      }
      const uint64_t id = fresh();
      Node& n = nodes_[id];
      n.kind = api;
      n.group = group;
      return encode(id, api);
    }
    case ncclProfileGroup: {
      const uint64_t id = fresh();
      nodes_[id].kind = plan;
      return encode(id, plan);
    }
    case ncclProfileKernelLaunch: {
      nccl_group::launch();  // before NCCL's cuLaunchKernel takes its issue time
      if (Node* g = group_of(e.parent)) {
        uint32_t index = 0;
        tag = slot_tag(*g, context, /*is_launch=*/true, &index);
        record_launch(tag, *g, context, index == 0);
      }
      t_current_launch = tag;
      return encode(tag, launch);
    }
    case ncclProfileColl:
    case ncclProfileP2p: {
      Node* p = node(e.plan, plan);
      if (p != nullptr && p->tag != 0) {
        tag = p->tag;
      } else if (Node* g = group_of(e.parent)) {
        tag = slot_tag(*g, context, /*is_launch=*/false);
        if (p != nullptr) p->tag = tag;
      }
      if (tag != 0) note_work(tag, context, e);
      return encode(tag, task);
    }
    default:
      return nullptr;  // not followed: NCCL then skips its state updates and stop
  }
}

LaunchTags::LaunchRecord& LaunchTags::record(uint64_t tag, void* context) {
  auto [it, added] = launches_.try_emplace(tag);
  if (added) {
    launch_order_.push_back(tag);
    while (launch_order_.size() > kKeepLaunches) {
      if (launch_order_.front() != tag) launches_.erase(launch_order_.front());
      launch_order_.pop_front();
    }
  }
  LaunchRecord& r = it->second;
  if (const auto* c = static_cast<const Context*>(context)) {
    r.comm_id = c->comm_id;
    r.nranks = c->nranks;
    r.nnodes = c->nnodes;
    r.rank = c->rank;
  }
  return r;
}

void LaunchTags::note_work(uint64_t tag, void* context, const Event& e) {
  LaunchRecord& r = record(tag, context);
  const std::string func = e.func != nullptr ? e.func : "";
  if (r.tasks.size() < VGPU_NCCL_MAX_TASKS) {
    vgpu_nccl_task t{};
    std::strncpy(t.func, func.c_str(), sizeof t.func - 1);
    if (e.datatype != nullptr) std::strncpy(t.datatype, e.datatype, sizeof t.datatype - 1);
    t.send = e.send;
    t.recv = e.recv;
    t.count = e.count;
    t.root = e.root;
    t.peer = e.peer;
    r.tasks.push_back(t);
  }
  if (e.type == ncclProfileColl) {
    // One operation per collective; the group's calls, once known, already stand for them.
    if (!r.api_collectives) r.ops.push_back(Operation{func, e.bytes, 0, false, false, 0});
    return;
  }
  if (r.api_p2p) {
    // The group's calls stood for the kernel's sends and receives until its tasks, which name the
    // peers (and the rank's own share), came: the tasks describe them from here on (the
    // passthrough reads the description once the kernel completed, every task started).
    std::erase_if(r.ops, [](const Operation& o) { return o.p2p; });
    r.api_p2p = false;
  }
  Operation* op = nullptr;
  for (Operation& o : r.ops)
    if (o.p2p && o.func == func) op = &o;
  if (op == nullptr) {
    r.ops.push_back(Operation{func, 0, 0, false, true, 0});
    op = &r.ops.back();
  }
  const bool to_self = e.peer >= 0 && e.peer == r.rank;
  op->self = op->self || to_self;
  if (!to_self) op->bytes += e.bytes;
  if (e.peer >= 0 && !to_self) {
    const uint64_t bit = uint64_t{1} << (e.peer % 64);
    if ((op->peer_mask & bit) == 0) ++op->peers;
    op->peer_mask |= bit;
  }
}

bool LaunchTags::describe(uint64_t tag, vgpu_nccl_launch* out) const {
  if (tag == 0 || out == nullptr) return false;
  std::lock_guard l(mu_);
  auto it = launches_.find(tag);
  if (it == launches_.end()) return false;
  const LaunchRecord& r = it->second;
  *out = vgpu_nccl_launch{};
  out->comm_id = r.comm_id;
  out->nranks = r.nranks;
  out->nnodes = r.nnodes;
  out->rank = r.rank;
  for (const Operation& o : r.ops) {
    if (out->count == VGPU_NCCL_MAX_OPERATIONS) break;
    vgpu_nccl_operation& d = out->op[out->count++];
    std::strncpy(d.func, o.func.c_str(), sizeof d.func - 1);
    d.bytes = o.bytes;
    d.peers = o.peers;
    d.self = o.self ? 1 : 0;
  }
  return true;
}

int LaunchTags::tasks(uint64_t tag, vgpu_nccl_task* out, int max, int* count) const {
  if (tag == 0 || count == nullptr || max < 0 || (out == nullptr && max > 0)) return -1;
  std::lock_guard l(mu_);
  auto it = launches_.find(tag);
  if (it == launches_.end()) return -1;
  const LaunchRecord& r = it->second;
  const int n = std::min(max, static_cast<int>(r.tasks.size()));
  std::copy_n(r.tasks.begin(), n, out);
  *count = n;
  return r.tasks_done ? 1 : 0;
}

void LaunchTags::stop(void* handle) {
  uint64_t v = 0;
  if (decode(handle, step, &v) || decode(handle, op, &v)) return;  // the proxy threads' (see start)
  const OwnWork own;
  if (decode(handle, launch, &v)) {
    t_current_launch = 0;
    return;
  }
  const bool group = decode(handle, group_api, &v);
  if (group || decode(handle, api, &v) || decode(handle, plan, &v)) {
    if (group) nccl_group::end();
    uint64_t done = 0;  // the launch whose tasks are now all known
    {
      std::lock_guard l(mu_);
      // A plan's event ends after NCCL started every task of it (hostStreamPlanTask): its
      // launch's task list is complete.
      if (Node* p = node(handle, plan); p != nullptr && p->tag != 0) {
        auto it = launches_.find(p->tag);
        if (it != launches_.end() && !it->second.tasks_done) {
          it->second.tasks_done = true;
          done = p->tag;
        }
      }
      retire(v);
    }
    // Outside the lock: the driver may place (and wait to match) a send/recv kernel held for
    // these tasks, and the peers' threads need the table meanwhile.
    if (done != 0) launch_tasks_done(done);
  }
}

void LaunchTags::record_launch(uint64_t tag, Node& group, void* context, bool first) {
  LaunchRecord& r = record(tag, context);
  if (!first) return;
  // The group's first kernel on this communicator: its calls are the collectives (they replace
  // whatever of its Coll tasks came first; later Coll tasks add nothing).
  std::vector<Operation> calls;
  for (const Call& call : group.calls)
    if (call.context == context && !call.p2p)
      calls.push_back(Operation{call.func, call.count * static_cast<uint64_t>(std::max(1, call.type_bytes)), 0,
                                false, false, 0});
  if (!calls.empty()) {
    std::erase_if(r.ops, [](const Operation& o) { return !o.p2p; });
    r.ops.insert(r.ops.begin(), calls.begin(), calls.end());
    r.api_collectives = true;
  }
  record_p2p_calls(r, group, context);
}

void LaunchTags::record_p2p_calls(LaunchRecord& r, const Node& group, void* context) {
  // Tasks already seen describe the kernel exactly: the calls stand in only until they come.
  if (std::any_of(r.ops.begin(), r.ops.end(), [](const Operation& o) { return o.p2p; })) return;
  std::vector<Operation> kinds;  // "Send", "Recv": bytes and calls so far
  for (const Call& call : group.calls) {
    if (call.context != context || !call.p2p) continue;
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const Operation& o) { return o.func == call.func; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), Operation{call.func, 0, 0, false, true, 0});
    it->bytes += call.count * static_cast<uint64_t>(std::max(1, call.type_bytes));
    ++it->peers;
  }
  if (kinds.empty()) return;  // no P2pApi seen: the kernel's P2p tasks tell
  for (Operation& o : kinds) {
    // One call to every rank, the rank's own share among them: an all-to-all (its calls name no
    // peer, so a call per rank is the sign; the own share stays on the GPU).
    if (r.nranks > 1 && o.peers == r.nranks) {
      o.self = true;
      o.bytes = o.bytes / static_cast<uint64_t>(r.nranks) * static_cast<uint64_t>(r.nranks - 1);
      o.peers = r.nranks - 1;
    }
  }
  r.ops.insert(r.ops.end(), kinds.begin(), kinds.end());
  r.api_p2p = true;
}

uint64_t LaunchTags::launch_of_transfer(const void* phandle) const {
  if (phandle == nullptr || !active()) return 0;
  const auto* pair = static_cast<const ncclProxyEventHandle_v5_t*>(phandle);
  uint64_t tag = 0;
  return decode(pair->stepEventHandle, step, &tag) ? tag : 0;
}

}  // namespace vgpu::nccl::prof
