// The collective model (collective_model.h) over the fitted parameters of the cluster
// configuration (ClusterSpec::collectives; cluster_spec.h says what each one is).
#include "simcore/collective_model.h"

#include <algorithm>
#include <cmath>

namespace simcore {
namespace {

bool one_node(const ClusterSpec& c, const std::vector<int>& gpus) {
  for (int g : gpus)
    if (c.node_of(g) != c.node_of(gpus.front())) return false;
  return true;
}

// Bytes one rank sends on its busiest link, and the steps on the critical path, of NCCL's ring
// schedule over n ranks.
void ring_shape(CollectiveOp op, double bytes, int n, double* wire, int* steps) {
  switch (op) {
    case CollectiveOp::all_reduce:
      *wire = 2.0 * (n - 1) / n * bytes;
      *steps = 2 * (n - 1);
      return;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all:
      *wire = static_cast<double>(n - 1) * bytes;
      *steps = n - 1;
      return;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce:
      *wire = bytes;
      *steps = n - 1;
      return;
    case CollectiveOp::send_recv:
      *wire = bytes;
      *steps = 1;
      return;
  }
}

// The buffer size NCCL's protocol choice goes by: the whole buffer (the nccl-tests size).
double buffer_bytes(CollectiveOp op, double bytes, int n) {
  switch (op) {
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all:
      return bytes * n;
    default:
      return bytes;
  }
}

}  // namespace

std::optional<CollectiveOp> collective_from_nccl_name(std::string_view name) {
  if (name == "AllReduce") return CollectiveOp::all_reduce;
  if (name == "AllGather") return CollectiveOp::all_gather;
  if (name == "ReduceScatter") return CollectiveOp::reduce_scatter;
  if (name == "Broadcast") return CollectiveOp::broadcast;
  if (name == "Reduce") return CollectiveOp::reduce;
  if (name == "Send" || name == "Recv" || name == "SendRecv") return CollectiveOp::send_recv;
  if (name == "AllToAll") return CollectiveOp::all_to_all;
  return std::nullopt;
}

const char* collective_name(CollectiveOp op) {
  static_assert(static_cast<int>(CollectiveOp::all_to_all) + 1 == kCollectiveKinds);
  switch (op) {
    case CollectiveOp::all_reduce: return "AllReduce";
    case CollectiveOp::all_gather: return "AllGather";
    case CollectiveOp::reduce_scatter: return "ReduceScatter";
    case CollectiveOp::broadcast: return "Broadcast";
    case CollectiveOp::reduce: return "Reduce";
    case CollectiveOp::send_recv: return "SendRecv";
    case CollectiveOp::all_to_all: return "AllToAll";
  }
  return "?";
}

CollectiveEstimate estimate_collective(const ClusterSpec& cluster, const CollectiveCall& call) {
  CollectiveEstimate e;
  const int n = static_cast<int>(call.gpus.size());
  const bool nvlink = n < 2 || (one_node(cluster, call.gpus) && cluster.nvlink.present);
  const LinkCollectives& link = nvlink ? cluster.collectives.nvlink : cluster.collectives.nic;
  const int index = static_cast<int>(call.op);
  const bool ll = buffer_bytes(call.op, static_cast<double>(call.bytes), std::max(n, 1)) < link.ll_max_bytes;
  const CollectiveCost& cost = (ll ? link.ll : link.simple).op[index];
  e.protocol = ll ? "LL" : "Simple";
  e.seconds = cost.latency_s;
  if (n < 2 || call.bytes == 0) return e;
  double wire = 0;
  int steps = 0;
  ring_shape(call.op, static_cast<double>(call.bytes), n, &wire, &steps);
  int steps_of_two = 0;
  double unused = 0;
  ring_shape(call.op, 1.0, 2, &unused, &steps_of_two);
  // The bus bandwidth the collective reaches: a share of its link's line rate (a rank's NVLink
  // to the switch or peer, or its NIC), never above the line rate's payload.
  const double line = nvlink ? cluster.nvlink.bw_per_gpu : cluster.nic.bw * cluster.nic.efficiency;
  const double bandwidth = std::max(1.0, line * std::clamp(cost.link_share, 1e-6, 1.0));
  e.seconds += std::max(0, steps - steps_of_two) * link.step_latency_s +
               (wire + 2.0 * std::sqrt(wire * std::max(0.0, cost.fill_bytes))) / bandwidth;
  e.steps = steps;
  e.wire_bytes = wire;
  e.bandwidth_seconds = wire / bandwidth;
  return e;
}

}  // namespace simcore
