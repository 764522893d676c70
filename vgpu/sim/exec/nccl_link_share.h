// A collective's bandwidth part on the fabric (sim backend): the flows that make an NCCL kernel
// contend for links with every other transfer the engine carries (other collectives, peer
// copies), while one alone keeps exactly the collective model's time.
//
// The model (simcore/collective_model.h) times a collective as latency (launch, steps, pipeline
// fill) plus its bandwidth part B: the time the busiest link of each rank carries the bytes the
// ring schedule puts on it, at the protocol's share of the link. Here, once every rank of the
// collective has arrived (its start S), each rank r's ring transfer to rank r+1 becomes a simcore
// flow on the route between their GPUs: after a task of the latency part, every flow of one
// collective carrying the same bytes, sized so that at the least rate max-min can leave any of
// them when the collective is alone (a link's capacity over the collective's own flows on it),
// the flows end no later than S + the model's time. The collective ends when both its kernels
// (the model's time) and its flows have: alone, exactly the model's time (the flows end a
// millionth of B early, so rounding never moves it); sharing a link with another collective or
// a copy, the flows get their max-min share and the collective ends later (two equal
// collectives on one NIC: about B later each).
//
// Which rate a flow gets alone is the engine's link capacity, not the protocol's share of it: a
// flow is the collective's occupancy of its links, so a ring bound by the NIC keeps the NIC
// busy for B and its NVLink hops for B times their share of the NIC's rate.
//
// A received message (send/recv, nccl_p2p.h) is placed the same way: a send/recv call over the
// sender's and the receiver's GPUs, with the sender's flow only.
//
// Ranks as processes (torchrun): each process also places its own ranks' flows of the same
// collective in the job's shared engine (shared_flows, nccl_shared_fabric.h), so that flows of
// different processes on one link contend there as they do in one process's engine.
//
// Collectives whose bandwidth part is below kMinBandwidthS (past the routes' latency) get no
// flows: they cannot move another transfer measurably, and a 64-rank job's small all-reduces
// (barriers, loss reductions) then cost the engine nothing more.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "simcore/cluster_spec.h"
#include "simcore/collective_model.h"
#include "simcore/engine.h"
#include "simcore/topology.h"

namespace vgpu {

class NcclLinkShare {
 public:
  static constexpr double kMinBandwidthS = 2e-6;

  explicit NcclLinkShare(const simcore::ClusterSpec& cluster);
  ~NcclLinkShare();

  struct Start {
    std::vector<uint64_t> after;  // every rank's arrival (and the gate of other processes' ranks)
    double not_before = 0;        // at or above the engine's floor: the calling thread's promise
    // A time no later than the collective's start (the placing rank's own arrival): where
    // not_before lies past it, the latency task is shortened by the difference, so that a
    // collective alone still ends by its model time.
    double start_at_most = 0;
    int gpu = 0;                  // where the latency task sits on the timeline
  };
  // Places the flows of `ranks` (ranks of the calls' communicator whose transfers this process
  // submits: all of them when it holds every rank) for the collective `calls` (one launch's, of
  // one communicator: the same GPUs). Returns the event the collective's end must wait for (the
  // flows' join; the flow itself where there is one); empty when it places nothing (a bandwidth
  // part too small, one rank).
  std::vector<uint64_t> place(simcore::Engine& engine, const std::vector<simcore::CollectiveCall>& calls,
                              std::span<const int> ranks, const Start& start);

  // The same flows of `ranks` (this process's own ranks only: every process places its own) for
  // the job's shared engine, each no earlier than the collective's start `start` (the same on
  // every rank: the latest arrival of the job) plus the model's latency part, with no task (the
  // other processes' flows are there, not their streams). Kept by the caller until its thread's
  // NCCL group ends, then placed in one request (nccl_shared_fabric.h); empty when the
  // collective places nothing (as place() decides, alike on every rank).
  std::vector<simcore::FlowSpec> shared_flows(const std::vector<simcore::CollectiveCall>& calls,
                                              std::span<const int> ranks, double start);

 private:
  // A ring over one set of GPUs: the least rate max-min can give any of its flows when alone,
  // and the longest route latency.
  struct Ring {
    double rate = 0;
    double latency = 0;
  };
  Ring ring_of(const std::vector<int>& gpus);  // under mu_
  // What one rank's flow of collective `calls` carries: the model's time and latency part, and
  // the bytes (0: no flows, the bandwidth part too small or no ring).
  struct Plan {
    double seconds = 0;
    double latency_part = 0;  // the model's time less its bandwidth part
    uint64_t bytes = 0;
  };
  Plan plan(const std::vector<simcore::CollectiveCall>& calls);
  // Each of `ranks`' flow to the next rank's GPU, `bytes` each.
  static std::vector<simcore::FlowSpec> ring_flows(const std::vector<int>& gpus, std::span<const int> ranks,
                                                   uint64_t bytes, double not_before);

  const simcore::ClusterSpec& cluster_;
  std::mutex mu_;
  std::optional<simcore::Topology> topology_;      // built at the first collective that needs it
  std::map<std::vector<int>, Ring> rings_;         // by the communicator's GPUs
};

}  // namespace vgpu
