// vgpu-collective: what the collective model (simcore/collective_model.h) says one NCCL
// collective takes on the configured cluster (VGPU_CONFIG and the VGPU_* overrides apply).
//
//   vgpu-collective OP BYTES RANKS [NODES]
//     OP     all_reduce, all_gather, reduce_scatter, broadcast, reduce, send_recv, all_to_all
//     BYTES  NCCL's count times the datatype's size (all-gather: one rank's share)
//     RANKS  ranks, filled node by node; NODES spreads them over that many nodes (default 1)
// Prints one line: the time in microseconds, the protocol, the steps and the bytes each rank
// puts on its busiest link, and the bus bandwidth nccl-tests would report.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "simcore/cluster_config.h"
#include "simcore/collective_model.h"

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: vgpu-collective OP BYTES RANKS [NODES]\n");
    return 2;
  }
  const simcore::ConfigResult config = simcore::load_cluster_config();  // the environment's
  if (!config.cluster) {
    std::fprintf(stderr, "vgpu-collective: %s\n", config.error.to_string().c_str());
    return 2;
  }
  const simcore::ClusterSpec& c = *config.cluster;
  int op = -1;
  for (int i = 0; i < simcore::kCollectiveKinds; ++i)
    if (std::string(argv[1]) == simcore::kCollectiveKeys[i]) op = i;
  char* end = nullptr;
  const unsigned long long bytes = std::strtoull(argv[2], &end, 10);
  const int ranks = std::atoi(argv[3]);
  const int nodes = argc == 5 ? std::atoi(argv[4]) : 1;
  if (op < 0 || end == argv[2] || *end != '\0' || ranks < 1 || nodes < 1 || nodes > c.nodes ||
      ranks > nodes * c.gpus_per_node) {
    std::fprintf(stderr, "vgpu-collective: bad arguments (OP one of all_reduce ... all_to_all; RANKS <= %d per node, "
                 "NODES <= %d)\n", c.gpus_per_node, c.nodes);
    return 2;
  }
  simcore::CollectiveCall call;
  call.op = static_cast<simcore::CollectiveOp>(op);
  call.bytes = bytes;
  for (int r = 0; r < ranks; ++r) call.gpus.push_back((r % nodes) * c.gpus_per_node + r / nodes);
  const simcore::CollectiveEstimate e = simcore::estimate_collective(c, call);
  std::printf("%s %llu B over %d ranks (%d nodes): %.3f us, %s, %d steps, %.0f B on the busiest link, busbw %.1f GB/s\n",
              simcore::collective_name(call.op), bytes, ranks, nodes, e.seconds * 1e6, e.protocol, e.steps,
              e.wire_bytes, e.seconds > 0 ? e.wire_bytes / e.seconds / 1e9 : 0.0);
  return 0;
}
