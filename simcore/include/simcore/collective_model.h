// How long one NCCL collective takes on the virtual cluster: the analytic model both backends
// use for NCCL kernels (the passthrough, whose NCCL moves bytes through vgpu's net plugin and so
// lacks NCCL's own NVLink protocol costs, and the sim backend, which runs no kernel at all).
//
// A collective over n ranks is a sequence of steps (ring: all-reduce 2(n-1), all-gather and
// reduce-scatter n-1, broadcast n-1 pipelined, send/recv 1); its time is a fixed launch cost, a
// latency per step of the protocol NCCL would choose, and the bytes each rank puts on its
// slowest link at that protocol's share of the link. The parameters are named physical figures
// per link class and protocol, kept in the cluster configuration with the measurement they were
// fitted to.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "simcore/cluster_spec.h"

namespace simcore {

enum class CollectiveOp { all_reduce, all_gather, reduce_scatter, broadcast, reduce, send_recv, all_to_all };

// NCCL's name of a collective as its profiler reports it ("AllReduce", "AllGather",
// "ReduceScatter", "Broadcast", "Reduce", "Send", "Recv", "SendRecv"); nullopt for others.
std::optional<CollectiveOp> collective_from_nccl_name(std::string_view name);
const char* collective_name(CollectiveOp op);

struct CollectiveCall {
  CollectiveOp op = CollectiveOp::all_reduce;
  // NCCL's own count times the datatype's size: the whole buffer for all-reduce, broadcast and
  // reduce; one rank's share (its send buffer) for all-gather; one rank's result for
  // reduce-scatter; the message for send/recv; what one rank sends to each peer for all-to-all.
  uint64_t bytes = 0;
  std::vector<int> gpus;  // the global GPU of every rank, in rank order (size: the rank count)
};

struct CollectiveEstimate {
  double seconds = 0;
  const char* protocol = "";  // the protocol the model chose ("LL", "LL128", "Simple")
  int steps = 0;              // communication steps on the critical path
  double wire_bytes = 0;      // bytes each rank sends on its busiest link
  // The part of `seconds` during which that link carries the collective's bytes (wire_bytes at
  // the protocol's share of it); the rest is latency (launch, steps, pipeline fill). The sim
  // backend places this part on the fabric as flows, so that it contends with other transfers.
  double bandwidth_seconds = 0;
};

// Never fails: a call with fewer than 2 ranks or no bytes costs the launch alone.
CollectiveEstimate estimate_collective(const ClusterSpec& cluster, const CollectiveCall& call);

}  // namespace simcore
