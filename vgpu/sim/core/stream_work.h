// What every concern hands to a stream: one unit of work, its real effect and its virtual cost.
// Memory copies and sets (sim/), kernel launches (core/module), host functions and graph
// launches all go through StreamManager::submit(), which keeps stream order, cross-stream
// event dependencies and the virtual timeline in one place.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "front/driver/cuda_api.h"

namespace vgpu {

struct Work {
  enum class Kind { kernel, copy, memset, host_function, wait, other };
  Kind kind = Kind::other;
  std::string label;  // for the timeline, e.g. the kernel name or "memcpy HtoD 4096 B"

  // The real effect, run exactly once, after everything this work depends on has run (stream
  // order and event waits), on a driver thread or inline. In the sim backend: the memcpy/memset
  // on host-backed memory, the host function; empty for a kernel (nothing executes).
  std::function<void()> execute;
  // The real effect may wait for other work (an NCCL collective's data waits for the other
  // ranks' parts): run on a driver thread, never inline on the submitting thread.
  bool blocking = false;

  // The virtual cost: either a fixed duration on the stream's device...
  double duration_s = 0;
  // An NCCL kernel: it is a collective's, and the GPU's other kernels slow down beside it
  // (sim/exec/compute_beside_collectives.h) rather than it slowing itself.
  bool collective = false;
  // ...or a transfer that shares the simulated network (peer copies between virtual devices).
  struct Transfer {
    int src_gpu, dst_gpu;
    uint64_t bytes;
  };
  std::optional<Transfer> transfer;

  // Added for NCCL collectives on the sim backend (sim/exec/nccl_collectives.h): simcore events this
  // work also starts after (other ranks' arrival at the same collective), and a callback told
  // this work's own simcore event once it is on its stream's timeline (not called for work
  // recorded into a stream capture).
  std::vector<uint64_t> also_after;
  std::function<void(uint64_t event)> on_timeline;

  // Work recorded into a CUDA graph that places more on the engine each time a launch of the
  // graph replays it (a captured NCCL collective's transfers: sim/exec/nccl_graph_replay.cpp).
  // Called by the replay (StreamManager::submit_items, under the streams' lock: it may add to the
  // engine only) with what the node starts after and its earliest start; returns the events
  // the node's end also waits for (none: the node is this work alone), which an op labelled
  // `label` after this work's own joins. Empty for every other work.
  struct ReplayStart {
    std::vector<uint64_t> after;
    double not_before = 0;
  };
  struct ReplayEnd {
    std::vector<uint64_t> after;
    std::string label;
  };
  std::function<ReplayEnd(const ReplayStart& start)> on_replay;

  // Work recorded into a CUDA graph whose replay meets the other ranks' replays of it (a captured
  // NCCL collective: the k-th replay of its node on every rank is one collective,
  // sim/exec/nccl_graph_meet.h). Called by the replay (StreamManager::submit_items, under the
  // streams' lock) with the node's arrival (an op on the stream after what the node starts after),
  // the launch's stream argument and `rest`, which places the node and the graph's items after it once called with every
  // rank's arrival (under the streams' lock too). An early rank's answer is `held`: it keeps
  // `rest`, and the replay stops at the node (the stream's last op is the arrival); the last
  // rank's answer gives every arrival, which its node starts after, and the held ranks' rests to
  // call with them. Empty for every other work.
  using PlaceRest = std::function<void(const std::vector<uint64_t>& arrivals)>;
  struct Meeting {
    bool held = false;
    std::vector<uint64_t> arrivals;  // every rank's arrival, this one's included (not held)
    std::vector<PlaceRest> release;  // the earlier ranks' rests (not held)
  };
  std::function<Meeting(uint64_t arrival, CUstream stream, PlaceRest rest)> on_meet;
};

}  // namespace vgpu
