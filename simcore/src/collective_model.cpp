// The collective model (collective_model.h). Parameters are per link class (inside a node over
// NVLink, across nodes over the NICs) and per protocol; the estimate takes the protocol that is
// fastest for the call, as NCCL's own tuner does.
#include "simcore/collective_model.h"

#include <algorithm>
#include <array>
#include <limits>

namespace simcore {
namespace {

struct Protocol {
  const char* name;
  double step_latency_s;  // per communication step on the critical path
  double link_share;      // the payload's share of the link's (efficiency-scaled) bandwidth
};

// Until the fitted figures land in the cluster configuration: NCCL's documented shape (LL pays
// half the line for its flags, LL128 8 bytes of every 128, Simple the full line and the
// longest per-step latency), at the link's configured payload efficiency.
constexpr std::array<Protocol, 3> kProtocols{{
    {"LL", 1.0e-6, 0.5},
    {"LL128", 2.0e-6, 0.9375},
    {"Simple", 4.0e-6, 1.0},
}};
constexpr double kLaunchSeconds = 5e-6;

bool one_node(const ClusterSpec& c, const std::vector<int>& gpus) {
  for (int g : gpus)
    if (c.node_of(g) != c.node_of(gpus.front())) return false;
  return true;
}

// Bytes one rank sends, and the steps on the critical path, of a ring schedule.
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
  e.seconds = kLaunchSeconds;
  const int n = static_cast<int>(call.gpus.size());
  if (n < 2 || call.bytes == 0) return e;
  double wire = 0;
  int steps = 0;
  ring_shape(call.op, static_cast<double>(call.bytes), n, &wire, &steps);
  const bool nvlink = one_node(cluster, call.gpus) && cluster.nvlink.present;
  const double link_bw = nvlink ? cluster.nvlink.bw_per_gpu * cluster.nvlink.efficiency
                                : cluster.nic.bw * cluster.nic.efficiency;
  const double hop_latency = nvlink ? cluster.nvlink.latency_s : cluster.nic.latency_s;
  double best = std::numeric_limits<double>::infinity();
  for (const Protocol& p : kProtocols) {
    const double t = steps * (p.step_latency_s + hop_latency) + wire / (link_bw * p.link_share);
    if (t < best) {
      best = t;
      e.protocol = p.name;
    }
  }
  e.seconds += best;
  e.steps = steps;
  e.wire_bytes = wire;
  return e;
}

}  // namespace simcore
