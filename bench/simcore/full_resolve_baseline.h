// The benchmarks' baseline: a flow-level simulator that re-solves max-min fairness from scratch
// over every running flow at every event instant (the published algorithm, as in Phantora's
// netsim), written as well as that algorithm allows, so that a ratio against it measures what
// simcore's incremental solver and event handling buy, not a slow strawman.
//
// Same model as the engine (engine.h): an event starts at max(not_before, finish of every
// dependency); a flow moves its bytes at its max-min fair share of every link of its route and
// finishes its route's latency after its last byte; a task lasts its duration. Every change
// that happens at one instant is applied before the single re-solve of that instant.
//
// What makes it fast for what it is: the running flows sit in flat arrays (route, bytes left,
// rate) with swap-removal; each re-solve builds its link table and the per-link flow lists
// (counting sort) in scratch arrays reused across instants; the progressive filling pops
// bottleneck links from a lazy min-heap; a flow's bytes left are brought up to date only when its
// rate changes; the next transfer end is found in the same pass that applies the rates.
// Routes are Topology::sharing_route(), as in the engine (a PCIe link that carries exactly its
// NIC's flows is left out of both).
// It knows nothing of rollback: it needs every event up front, in an order where dependencies
// come first.
#pragma once

#include <cstdint>
#include <vector>

#include "simcore/engine.h"
#include "simcore/topology.h"

namespace simcore::bench {

struct BaselineEvent {
  bool task = false;
  int src = 0, dst = 0;  // a task runs on src
  uint64_t bytes = 0;
  Time duration = 0;
  Time not_before = 0;
  std::vector<uint32_t> after;  // indices of earlier events
};

struct BaselineResult {
  std::vector<Interval> intervals;  // by event index
  uint64_t solves = 0;              // re-solves (one per instant where a flow started or ended)
  uint64_t solved_flows = 0;        // flows given a rate, summed over those re-solves
};

BaselineResult full_resolve_simulate(const Topology& topology,
                                     const std::vector<BaselineEvent>& events);

}  // namespace simcore::bench
