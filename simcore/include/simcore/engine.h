// simcore's one public entry point: the engine that every user of the simulator talks to.
//
// Users: the driver's sim and passthrough backends (kernels, copies, peer copies), the NCCL net
// plugin (every inter-rank transfer), vgpu-netsim (replayed traces) and vgpud (the same calls
// arriving over a socket from one process per rank). They submit work in *real-time* order,
// which is not virtual-time order: a rank that runs slower in real time submits work that
// starts in the virtual past of what faster ranks already submitted. The engine rolls back
// and re-solves, so the answer never depends on the arrival order.
//
// Contract (the property tests check it): for any set of submissions, the start/finish of
// every event once final equals what processing the same submissions in virtual-time order
// gives, independent of arrival order and of how the calls are spread over threads.
//
// The model (simcore/src/, details in topology.h):
// - An event starts at max(not_before, finish of every `after`). A task then lasts `duration`.
//   A flow moves its bytes along its route at its max-min fair share of every link it crosses
//   (re-solved whenever a flow starts or stops, only for the flows that share links with it);
//   its route's latency (sum of its links' latencies) is a fixed tail: the flow occupies
//   bandwidth from its start, and finishes `latency` after its last byte left. A flow of 0
//   bytes lasts its latency. src == dst is an HBM copy (reads and writes: memory_bw / 2).
// - Work is simulated lazily: submissions only record; the first call that needs an answer
//   they could change (query, is_final, wait_final, set_rank_floor, timeline) simulates them.
//   A submission whose start lies in the virtual past of simulated work is a rollback: from its
//   start on, every event it can influence (flows that come to share a link with the changed
//   ones, or with their old transfers; events whose dependencies moved) is re-simulated from
//   its rate history at that instant; everything else keeps its outcome. The cost of a late
//   submission is its causal cone, not everything simulated after it (simcore/src/simulator.h).
//
// Ranks, floors and finality:
// - With no registered rank, the engine assumes one single-threaded user: every event counts
//   as final as soon as it is simulated (is_final is true, wait_final returns at once), and a
//   later submission that lands in its past still rolls it back correctly. Nothing is then
//   reclaimed: history grows with the number of events.
// - With registered ranks, the floor F is the minimum over ranks of their promise
//   (set_rank_floor), where a rank blocked in wait_final_for_rank(id, rank) promises at least
//   the current finish of `id`. Events finishing at or before F are final. History older than
//   F is reclaimed; only 20 bytes per event remain (its final interval, for query()), plus its
//   timeline entry unless EngineOptions::record_timeline is off. A submitter that releases the
//   ids it will not name again (release()) lets those 20 bytes go as well, 4096 ids at a time,
//   so a run of 10^8 launches keeps bounded memory.
// - The first rank to register starts at the reclaimed floor (0 at first); a rank registered
//   beside others starts at their floor, so that nothing final becomes tentative again.
// - A submission with not_before below the floor breaks a promise: it is moved to the floor
//   (and logged once), so final events stay final.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "simcore/cluster_spec.h"

namespace simcore {

using Time = double;        // virtual seconds since the job started
using EventId = uint64_t;   // 0 is never a valid id
inline constexpr EventId kNoEvent = 0;

// A transfer between two GPUs (global numbering, node by node) that shares links with every
// other transfer in flight (max-min fair). src == dst is a device-local copy.
struct FlowSpec {
  int src_gpu = 0;
  int dst_gpu = 0;
  uint64_t bytes = 0;
  Time not_before = 0;              // earliest virtual start (the issuing stream's clock)
  std::vector<EventId> after;       // must all finish first
  std::string label;                // for the timeline
};

// Work with a known duration on one GPU (a kernel, a memset, a host<->device copy): it does not
// share the network. `lane` groups tasks in the timeline (e.g. one per stream).
struct TaskSpec {
  int gpu = 0;
  int lane = 0;
  Time duration = 0;
  Time not_before = 0;
  std::vector<EventId> after;
  std::string label;
  // Of `duration`, what is not the task's own work but work earlier tasks of its GPU lost and
  // left to it (vgpu's collective-overlap debt): shown in the timeline ("carried_us"), not
  // otherwise used. 0 when none.
  Time carried = 0;
};

struct Interval {
  Time start = 0;
  Time finish = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // Submit work. Thread-safe. An id in `after` that is unknown or 0 is an error
  // (returns kNoEvent) rather than a silent no-dependency.
  virtual EventId add_flow(const FlowSpec& flow) = 0;
  virtual EventId add_task(const TaskSpec& task) = 0;

  // Where the event stands now. The answer may still move (a later submission can roll it
  // back) until is_final(id). nullopt for an unknown id.
  virtual std::optional<Interval> query(EventId id) const = 0;
  virtual bool is_final(EventId id) const = 0;

  // Rank `rank` promises that none of its future submissions starts before `t`. Events that
  // finish at or before the minimum promise over all registered ranks are final, and rate
  // history older than that minimum is reclaimed.
  virtual void register_rank(int rank) = 0;
  virtual void set_rank_floor(int rank, Time t) = 0;
  virtual void unregister_rank(int rank) = 0;  // a finished or dead rank stops holding back

  // Block until the event is final, then return its interval. Returns nullopt for an unknown id
  // or when the engine is shut down while waiting (never hangs past shutdown()).
  virtual std::optional<Interval> wait_final(EventId id) = 0;
  virtual void shutdown() = 0;

  // Chrome-trace / Perfetto JSON of every event simulated so far.
  virtual std::string timeline_json() const = 0;

  // --- Additions (not pure, so that proxies such as the remote engine keep compiling) ---

  // Several flows in one call (a collective's step): ids[k] is the id of flows[k], kNoEvent for
  // one add_flow() would refuse (ids must hold flows.size() entries; extra flows are ignored).
  // The answers are exactly add_flow()'s, one by one. The in-process engine simulates the like
  // flows of one call as one unit (a flow group): same bytes, same not_before, the same
  // dependency events (a group counts as one), routes of the same narrowest capacity and
  // latency that share no link. A group is stored, started, ended and finished once while its
  // members stay alike; the moment one would differ (another flow on one of its links, a
  // dependency group that came apart, a rollback reaching it) it becomes its members, each an
  // ordinary flow from that instant on (simcore/src/flow_group.h).
  virtual void add_flows(std::span<const FlowSpec> flows, std::span<EventId> ids) {
    for (size_t k = 0; k < flows.size() && k < ids.size(); ++k) ids[k] = add_flow(flows[k]);
  }

  // wait_final for a rank that submits nothing while it waits: while blocked, `rank`'s floor is
  // raised to the event's current finish, so that ranks which all wait on each other's work
  // still make progress. Afterwards the rank's floor is at least the event's finish. An
  // unregistered rank behaves as plain wait_final.
  virtual std::optional<Interval> wait_final_for_rank(EventId id, int rank) {
    (void)rank;
    return wait_final(id);
  }

  // The caller will never name `id` again (in `after`, query, is_final or a wait): once the
  // event is also final and reclaimed, the engine may forget it (it is then unknown). Ignored by
  // engines that keep everything.
  virtual void release(EventId id) { (void)id; }
  // release() of each id (a step's ids at once: one call, not one per id).
  virtual void release(std::span<const EventId> ids) {
    for (EventId id : ids) release(id);
  }

  // Counters for tests and benchmarks (zeros where an implementation keeps none).
  struct Stats {
    uint64_t events_submitted = 0;
    uint64_t events_live = 0;         // not yet reclaimed (history is kept for them)
    uint64_t flow_segments = 0;       // rate-history segments held by live flows
    uint64_t history_bytes = 0;       // memory of everything reclaimable (live events, logs)
    uint64_t result_bytes = 0;        // memory of the per-event final intervals (until released)
    uint64_t timeline_bytes = 0;      // memory held for timeline_json() of reclaimed events
    uint64_t rollbacks = 0;           // simulations that had to rewind simulated work
    uint64_t replayed_events = 0;     // events re-simulated by those rewinds
    uint64_t solves = 0;              // max-min fillings run (one per component)
    uint64_t solved_flows = 0;        // flows given a rate, summed over those fillings
    // Flow-group members (add_flows) that left their group to start at another instant than
    // the rest (their dependencies finished apart).
    uint64_t group_members_apart = 0;
    // Flow groups whose members' dependencies are all members of one other group (a ring's
    // step after the one before), told by it through one link, not an edge per member; and
    // those links turned back into their edges since (a group came apart, a rollback).
    uint64_t group_links = 0;
    uint64_t group_links_expanded = 0;
    // Queue items gone stale (a flow's transfer end queued again earlier, as it sped up) that
    // the simulator dropped in bulk before they were due, instead of handling each.
    uint64_t stale_items_dropped = 0;
    Time floor = 0;                   // history before this time is reclaimed
  };
  virtual Stats stats() const { return {}; }

  // Why the engine can answer nothing any more (the daemon behind a remote engine exited, was
  // stopped, or dropped the connection); empty while it works. Once non-empty, every call fails.
  virtual std::string lost() const { return {}; }
};

enum class SolverMode {
  incremental,   // re-solve only the flows a change can move (flow_solver.h), checked to be max-min
  full_resolve,  // re-solve every flow in flight at every change (baseline for benchmarks)
};

struct EngineOptions {
  SolverMode solver = SolverMode::incremental;
  // Keep every event (label included) for timeline_json() after it is reclaimed. Off, a long
  // run's memory stays bounded; the timeline then only shows events not yet reclaimed.
  bool record_timeline = true;
  // Ask for transparent huge pages on the engine's large stores (records, the id table, the
  // groups' logs): an engine that keeps tens of millions of flows faults its memory in 2 MiB at
  // a time instead of 4 KiB (a first-touched page costs ~6-20 us on the virtual machines we run
  // on; a 4096-GPU ring touches ~300 MB). For engines that own their process (vgpud,
  // vgpu-netsim). Off in-process: there the first touch of a 2 MiB page, zeroed by the kernel
  // in whichever thread made the record, can land on that thread's virtual clock.
  bool huge_pages = false;
};

// The in-process engine over the cluster's topology.
std::unique_ptr<Engine> make_engine(const ClusterSpec& cluster);
std::unique_ptr<Engine> make_engine(const ClusterSpec& cluster, const EngineOptions& options);

}  // namespace simcore
