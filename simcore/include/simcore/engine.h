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
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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
};

// The in-process engine over the cluster's topology.
std::unique_ptr<Engine> make_engine(const ClusterSpec& cluster);

}  // namespace simcore
