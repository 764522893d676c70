// A graph-captured NCCL collective's transfers, placed again on each replay of its node.
//
// A captured kernel lasts the model's time from its node's start on every replay: after every
// rank's arrival, this process's and the other processes' (nccl_graph_meet.h). Its bandwidth
// part also becomes flows on the fabric each time,
// as a directly launched collective's does (nccl_link_share.h): from the node's own start, so a
// replay alone keeps exactly the model's time and one whose transfers meet others' on a link (a
// graph of another communicator replayed at once, a peer copy) gets its max-min share and ends
// later. Each rank's node places its own transfer to the next rank; and the one into its GPU from
// the previous rank where that rank is not this process's (another process replays it, placing it
// in its own engine): a process holding every rank places each transfer once. A send/recv's node
// places the messages it receives, as the direct path does (nccl_p2p.h): on a two-rank
// communicator from the other rank; on a larger one from the peers its tasks name, which NCCL
// starts right after the captured launch (resolve_captured keeps them for every replay; until
// they come, a replay places none).
//
// What a replay leaves out: a process holding some of the ranks sees the other processes'
// transfers only as the ones into its own GPUs (a rank process's transfers start, as its kernel,
// at the collective's last arrival in the job: nccl_graph_meet.h).
#include <algorithm>

#include "common/log.h"
#include "sim/core/context.h"
#include "sim/core/driver_state.h"
#include "sim/exec/nccl_collectives.h"
#include "sim/exec/nccl_reduce.h"
#include "simcore/engine.h"

namespace vgpu {

namespace {

bool point_to_point(const simcore::CollectiveCall& c) {
  return c.op == simcore::CollectiveOp::send_recv || c.op == simcore::CollectiveOp::all_to_all;
}

// Bytes a launch receives from another rank (its Recv operation's); 0: none.
uint64_t received_bytes(const vgpu_nccl_launch& got) {
  for (int i = 0; i < std::min(got.count, VGPU_NCCL_MAX_OPERATIONS); ++i)
    if (got.op[i].peers > 0 && nccl_data::field(got.op[i].func, sizeof got.op[i].func) == "Recv") return got.op[i].bytes;
  return 0;
}

}  // namespace

decltype(Work::on_replay) NcclCollectives::replay_transfers(const vgpu_nccl_launch& got, uint64_t tag, int device,
                                                            int local_ranks, double kernel_seconds) {
  const int nranks = got.nranks, rank = got.rank;
  if (nranks < 2 || rank < 0 || rank >= nranks) return {};
  std::vector<simcore::CollectiveCall> calls = modelled_calls(got, device, local_ranks);
  if (calls.empty()) return {};
  const double seconds = duration(driver_.cluster(), calls);
  const int gpu = driver_.global_gpu(device);
  if (nranks > 2 && std::all_of(calls.begin(), calls.end(), point_to_point)) {
    // A larger communicator's send/recv: its peers come with its tasks, right after this launch
    // (resolve_captured); every replay then places the messages they name.
    Captured c;
    c.out = std::make_shared<CapturedMessages>();
    c.got = got;
    c.gpu = gpu;
    c.seconds = kernel_seconds;
    std::shared_ptr<CapturedMessages> out = c.out;
    {
      std::lock_guard l(mu_);
      captured_[tag] = std::move(c);
      while (captured_.size() > NcclP2p::kMaxKept) captured_.erase(captured_.begin());  // tasks that never came
    }
    // Its tasks may all be known already (no call tells of them again); else at their
    // tasks_done, or before the thread's next driver call.
    const vgpu_nccl_plugin_side* plugin = plugin_.plugin();
    int count = 0;
    if (plugin == nullptr || plugin->launch_tasks == nullptr || plugin->launch_tasks(tag, nullptr, 0, &count) != 1 ||
        !resolve_captured(tag))
      look_again_before_next_call(tag);
    return [this, out = std::move(out), gpu](const Work::ReplayStart& at) {
      std::vector<simcore::CollectiveCall> messages;
      {
        std::lock_guard l(out->mu);
        messages = out->messages;
      }
      if (messages.empty()) return Work::ReplayEnd{};
      NcclLinkShare::Start start;
      start.after = at.after;
      start.not_before = at.not_before;
      start.start_at_most = at.not_before;
      start.gpu = gpu;
      const int sender[] = {0};  // each message is the transfer of its sender (rank 0 of the pair)
      Work::ReplayEnd end;
      end.label = "nccl p2p end";
      for (const simcore::CollectiveCall& m : messages) {
        const std::vector<uint64_t> joined = links_.place(driver_.engine(), {m}, sender, start);
        end.after.insert(end.after.end(), joined.begin(), joined.end());
      }
      return end;
    };
  }
  std::vector<int> ranks;
  if (std::none_of(calls.begin(), calls.end(), point_to_point)) {
    // A collective: this rank's transfer to the next one, and the previous rank's into this GPU
    // unless a GPU of this process replays it.
    ranks.push_back(rank);
    const int previous = (rank + nranks - 1) % nranks;
    if (local_ranks < nranks && static_cast<int>(calls.front().gpus.size()) == nranks) {
      const int from = calls.front().gpus[previous];
      bool here = false;
      for (int d = 0; d < driver_.device_count() && !here; ++d)
        here = driver_.global_gpu(d) == from && driver_.contexts().live_contexts(d) > 0;
      if (!here) ranks.push_back(previous);
    }
  } else if (calls.size() == 1 && calls.front().op == simcore::CollectiveOp::send_recv && nranks == 2) {
    // A two-rank send/recv (its peer is the other rank; a larger communicator's launch names
    // its peers only in its tasks, after the launch): the message it receives, from the peer's
    // GPU, as the direct path places it (nccl_p2p.h) where the kernel is timed for that pair.
    const uint64_t bytes = received_bytes(got);
    const std::vector<int>& pair = calls.front().gpus;  // ranks 0 and 1
    if (bytes == 0 || pair.size() != 2 || pair[1 - rank] < 0 || pair[1 - rank] == gpu) return {};
    simcore::CollectiveCall message{simcore::CollectiveOp::send_recv, bytes, {pair[1 - rank], gpu}};
    if (simcore::estimate_collective(driver_.cluster(), message).seconds > seconds) return {};
    calls = {std::move(message)};
    ranks.push_back(0);  // the sender's transfer
  } else {
    return {};
  }
  const char* label = calls.front().op == simcore::CollectiveOp::send_recv ? "nccl p2p end" : "nccl collective end";
  return [this, calls = std::move(calls), ranks = std::move(ranks), gpu, label](const Work::ReplayStart& at) {
    NcclLinkShare::Start start;
    start.after = at.after;
    // The node's own earliest start (the launching thread's clock: at or above the engine's
    // floor), which is also no later than its start: the latency part is never shortened.
    start.not_before = at.not_before;
    start.start_at_most = at.not_before;
    start.gpu = gpu;
    return Work::ReplayEnd{links_.place(driver_.engine(), calls, ranks, start), label};
  };
}

bool NcclCollectives::resolve_captured(uint64_t tag) {
  Captured c;
  {
    std::lock_guard l(mu_);
    const auto it = captured_.find(tag);
    if (it == captured_.end()) return false;
    c = it->second;
  }
  NcclP2p::Launch l;
  l.comm = c.got.comm_id;
  l.nranks = c.got.nranks;
  l.rank = c.got.rank;
  l.gpu = c.gpu;
  if (!peers_of(tag, &l)) return false;  // kept for its tasks_done
  {
    std::lock_guard lock(mu_);
    if (captured_.erase(tag) == 0) return true;  // another thread resolved it meanwhile
  }
  // The messages it receives, each from its sender's GPU, as a direct launch places them (nccl_p2p.h):
  // none where the kernel is not timed for that pair.
  receive_gpus(l);
  std::vector<simcore::CollectiveCall> messages;
  for (size_t i = 0; i < l.receive_from.size() && l.receive_gpus.size() == l.receive_from.size(); ++i) {
    simcore::CollectiveCall m{simcore::CollectiveOp::send_recv,
                              i < l.receive_sizes.size() ? l.receive_sizes[i] : l.receive_bytes,
                              {l.receive_gpus[i], l.gpu}};
    if (m.gpus[0] < 0 || m.gpus[0] == l.gpu || simcore::estimate_collective(driver_.cluster(), m).seconds > c.seconds)
      continue;
    messages.push_back(std::move(m));
  }
  log::debug("sim nccl: rank {}/{} of comm {:x}: captured send/recv launch {} receives {} message(s) on each replay",
             l.rank, l.nranks, l.comm, tag, messages.size());
  std::lock_guard lock(c.out->mu);
  c.out->messages = std::move(messages);
  return true;
}

}  // namespace vgpu
