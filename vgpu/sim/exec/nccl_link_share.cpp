// A collective's bandwidth part as flows on the fabric (nccl_link_share.h says how and why).
#include "sim/exec/nccl_link_share.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "simcore/engine.h"

namespace vgpu {
namespace {

// The latency task's row in the timeline: its own, beside the streams' rows of the GPU.
constexpr int kLatencyLane = 999000;
// How much earlier than the model's time a collective's flows end when it is alone: enough that
// the rounding of the engine's sums never puts them past the kernels' end.
constexpr double kEarly = 1e-6;

}  // namespace

NcclLinkShare::NcclLinkShare(const simcore::ClusterSpec& cluster) : cluster_(cluster) {}
NcclLinkShare::~NcclLinkShare() = default;

NcclLinkShare::Ring NcclLinkShare::ring_of(const std::vector<int>& gpus) {
  if (auto it = rings_.find(gpus); it != rings_.end()) return it->second;
  if (!topology_) topology_.emplace(cluster_);
  const simcore::Topology& topo = *topology_;
  const int n = static_cast<int>(gpus.size());
  // Each rank's transfer to the next; how many of them cross each link.
  std::vector<simcore::Route> routes;
  std::unordered_map<simcore::LinkId, int> crossing;
  Ring ring;
  for (int r = 0; r < n; ++r) {
    const int src = gpus[r], dst = gpus[(r + 1) % n];
    if (src == dst || src < 0 || dst < 0 || src >= topo.gpu_count() || dst >= topo.gpu_count()) continue;
    routes.push_back(topo.sharing_route(src, dst));
    for (int k = 0; k < routes.back().count; ++k) ++crossing[routes.back().links[k]];
    ring.latency = std::max(ring.latency, routes.back().latency);
  }
  // Max-min never leaves a flow below its links' least capacity per flow crossing them (the
  // fill raises every flow to that level before any link is full), whatever else ends first.
  double rate = routes.empty() ? 0 : HUGE_VAL;
  for (const simcore::Route& route : routes)
    for (int k = 0; k < route.count; ++k)
      rate = std::min(rate, topo.capacity(route.links[k]) / crossing[route.links[k]]);
  ring.rate = rate;
  return rings_[gpus] = ring;
}

NcclLinkShare::Plan NcclLinkShare::plan(const std::vector<simcore::CollectiveCall>& calls) {
  Plan p;
  if (calls.empty() || calls.front().gpus.size() < 2) return p;
  double bandwidth = 0;
  for (const simcore::CollectiveCall& call : calls) {
    const simcore::CollectiveEstimate e = simcore::estimate_collective(cluster_, call);
    p.seconds += e.seconds;
    bandwidth += e.bandwidth_seconds;
  }
  p.latency_part = p.seconds - bandwidth;
  Ring ring;
  {
    std::lock_guard l(mu_);
    ring = ring_of(calls.front().gpus);
  }
  // The flows' own latency is a fixed tail after their last byte: it comes out of the part the
  // bytes occupy the links for.
  const double occupied = bandwidth - ring.latency;
  if (!(ring.rate > 0) || !std::isfinite(ring.rate) || occupied < kMinBandwidthS) return p;
  p.bytes = static_cast<uint64_t>(occupied * (1 - kEarly) * ring.rate);
  return p;
}

std::vector<simcore::FlowSpec> NcclLinkShare::ring_flows(const std::vector<int>& gpus, std::span<const int> ranks,
                                                         uint64_t bytes, double not_before) {
  const int n = static_cast<int>(gpus.size());
  std::vector<simcore::FlowSpec> flows;
  flows.reserve(ranks.size());
  for (int r : ranks) {
    if (r < 0 || r >= n) continue;
    simcore::FlowSpec f;
    f.src_gpu = gpus[r];
    f.dst_gpu = gpus[(r + 1) % n];
    if (f.src_gpu == f.dst_gpu) continue;
    f.bytes = bytes;
    f.not_before = not_before;
    f.label = "nccl transfer to the next rank";
    flows.push_back(std::move(f));
  }
  return flows;
}

std::vector<simcore::FlowSpec> NcclLinkShare::shared_flows(const std::vector<simcore::CollectiveCall>& calls,
                                                           std::span<const int> ranks, double start) {
  if (ranks.empty()) return {};
  const Plan p = plan(calls);
  if (p.bytes == 0) return {};
  return ring_flows(calls.front().gpus, ranks, p.bytes, start + std::max(0.0, p.latency_part));
}

std::vector<uint64_t> NcclLinkShare::place(simcore::Engine& engine, const std::vector<simcore::CollectiveCall>& calls,
                                           std::span<const int> ranks, const Start& start) {
  if (ranks.empty()) return {};
  const Plan p = plan(calls);
  if (p.bytes == 0) return {};
  const std::vector<int>& gpus = calls.front().gpus;

  simcore::TaskSpec latency;
  latency.gpu = start.gpu;
  latency.lane = kLatencyLane;
  latency.duration = std::max(0.0, p.latency_part - std::max(0.0, start.not_before - start.start_at_most));
  latency.not_before = start.not_before;
  latency.after = start.after;
  latency.label = "nccl latency before the transfers";
  const simcore::EventId before = engine.add_task(latency);
  if (before == simcore::kNoEvent) return {};

  std::vector<simcore::FlowSpec> flows = ring_flows(gpus, ranks, p.bytes, start.not_before);
  for (simcore::FlowSpec& f : flows) f.after = {before};
  std::vector<simcore::EventId> ids(flows.size(), simcore::kNoEvent);
  engine.add_flows(flows, ids);
  std::erase(ids, simcore::kNoEvent);
  if (ids.size() <= 1) return {ids.begin(), ids.end()};
  // One event for every rank's end op to wait on, not each flow: 64 ranks' ends would otherwise
  // add 64 x 64 dependencies a collective.
  simcore::TaskSpec done;
  done.gpu = start.gpu;
  done.lane = kLatencyLane;
  done.not_before = start.not_before;  // the caller's promise: an unset 0 lies below a rank's floor
  done.after = std::move(ids);
  done.label = "nccl transfers done";
  const simcore::EventId join = engine.add_task(done);
  if (join == simcore::kNoEvent) return {};
  return {join};
}

}  // namespace vgpu
