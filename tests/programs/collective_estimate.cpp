// The collective model's answer for one call, on the cluster the environment configures (as the
// driver reads it): what run_nccl_program.py expects each NCCL kernel on the sim backend to last.
//
// Usage: collective_estimate [--bandwidth] FUNC BYTES GPU...   (FUNC as NCCL's profiler names it:
// AllReduce...)
// Prints the duration in microseconds (%.6f); with --bandwidth, its bandwidth part instead (the
// time its busiest link carries its bytes: what the sim backend places on the fabric's links).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "simcore/cluster_config.h"
#include "simcore/collective_model.h"

int main(int argc, char** argv) {
  const bool bandwidth = argc > 1 && std::string(argv[1]) == "--bandwidth";
  if (bandwidth) {
    --argc;
    ++argv;
  }
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s FUNC BYTES GPU...\n", argv[0]);
    return 2;
  }
  const auto op = simcore::collective_from_nccl_name(argv[1]);
  simcore::ConfigResult config = simcore::load_cluster_config();
  if (!op || !config.ok()) {
    std::fprintf(stderr, "unknown collective or cluster configuration rejected\n");
    return 2;
  }
  simcore::CollectiveCall call;
  call.op = *op;
  call.bytes = std::strtoull(argv[2], nullptr, 10);
  for (int i = 3; i < argc; ++i) call.gpus.push_back(std::atoi(argv[i]));
  const simcore::CollectiveEstimate e = simcore::estimate_collective(*config.cluster, call);
  std::printf("%.6f\n", (bandwidth ? e.bandwidth_seconds : e.seconds) * 1e6);
  return 0;
}
