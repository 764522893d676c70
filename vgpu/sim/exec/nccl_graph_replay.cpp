// A graph-captured NCCL collective's transfers, placed again on each replay of its node.
//
// A captured kernel lasts the model's time from its node's start on every replay (it meets no
// other rank: nccl_collectives.h). Its bandwidth part also becomes flows on the fabric each time,
// as a directly launched collective's does (nccl_link_share.h): from the node's own start, so a
// replay alone keeps exactly the model's time and one whose transfers meet others' on a link (a
// graph of another communicator replayed at once, a peer copy) gets its max-min share and ends
// later. Each rank's node places its own transfer to the next rank; and the one into its GPU from
// the previous rank where that rank is not this process's (another process replays it, placing it
// in its own engine): a process holding every rank places each transfer once. A two-rank
// send/recv's node places the message it receives, as the direct path does (nccl_p2p.h); a larger
// communicator's send/recv names its peers only in its tasks, after the launch, and places none.
//
// What a replay leaves out, having no rendezvous: a rank's transfer starts with its own node, not
// with the collective's last rank, so ranks replayed at different times overlap less than their
// collective's would; and a process holding some of the ranks sees the other processes' transfers
// only as the ones into its own GPUs.
#include <algorithm>

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

decltype(Work::on_replay) NcclCollectives::replay_transfers(const vgpu_nccl_launch& got, int device, int local_ranks) {
  const int nranks = got.nranks, rank = got.rank;
  if (nranks < 2 || rank < 0 || rank >= nranks) return {};
  std::vector<simcore::CollectiveCall> calls = modelled_calls(got, device, local_ranks);
  if (calls.empty()) return {};
  const double seconds = duration(driver_.cluster(), calls);
  const int gpu = driver_.global_gpu(device);
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

}  // namespace vgpu
