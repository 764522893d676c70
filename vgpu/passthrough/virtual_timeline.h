// The virtual timeline of the passthrough backend's streams: real work runs on the real GPU,
// and each op the program submits also gets a place on its stream's virtual timeline. What an op
// waits for is the rule both backends share (timing/stream_order.h: the op before it on its
// stream, what it names, the default streams' barrier); where it goes is simcore's Engine, the
// one placement engine of both backends: each op becomes a task of the engine with `after` = the
// ops it waits for and `not_before` = its issue time (the issuing thread's virtual clock plus
// the launch latency), and its start and finish are the engine's answer.
//
// What is the passthrough's own is the lazy part: durations may be unknown when the op is
// submitted (the launch is being measured on the real GPU and the measurement is read only once
// the real work is done), while the engine needs a task's duration when the task is added. So
// an op waits here, in submission order, until its duration and all its dependencies are known,
// and is added to the engine then (every dependency was submitted earlier, so one pass over the
// pending ops places everything that can be). An op whose start is asked before its duration is
// known (an NCCL kernel lasts what its collectives take from its start) gets that start from the
// engine too: a task of no duration after its dependencies, which its own task then follows.
//
// Memory: the engine keeps every event until its ranks' floor passes it (engine.h), and the
// passthrough has no floor to give (a thread that starts later may still issue work at virtual
// time 0: nothing bounds the issue time of future ops from below). Without a rank the engine
// reclaims nothing, and Engine::release frees an event only once it is reclaimed (200000 tasks,
// each released once the next was added: 200000 events live, 60 MB). Placed ops keep their interval
// here, and the engine is asked only for the ops later ops may name, so the timeline starts a
// fresh engine every kEpochEvents events: an op of an older engine that a later op names raises
// that op's earliest start to its finish (to its start, for an op whose own task is not placed
// yet), which places it exactly where the old engine would have (an event starts at the latest
// of its `not_before` and its `after`'s finishes: engine.h).
//
// Markers (ops of no duration that are not kernels: event records, a stream's waits) take no
// task: an op is placed only once everything it waits for is placed, so a marker's place is
// the engine's rule itself, the latest of its issue time and its dependencies' finishes (an
// engine event per marker was most of a cuEventRecord's cost, issue 21). Ops after a marker
// start no earlier than its finish, as after an older engine's op.
//
// No driver calls, no clocks. One mutex; every method is thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "simcore/cluster_spec.h"
#include "simcore/engine.h"
#include "timing/stream_order.h"

namespace vgpu::pt {

struct TimedOp {
  double issue = 0;      // earliest start, virtual seconds
  double duration = -1;  // < 0: not known yet
  double start = 0, finish = 0;
  bool resolved = false;  // placed: start and finish are the engine's answer
  bool started = false;   // its start is placed (resolved, or asked for before its duration was known)
  int device = -1;       // the virtual device it runs on
  bool kernel = false;   // a kernel launch (for the per-device statistics)
  bool start_first = false;  // its duration depends on its start (an NCCL kernel)
  int32_t lane = 0;      // its stream's number within the process (the timeline's lanes)
  std::string label;     // what it is, for VGPU_TIMELINE (empty unless one is written)
  // What set_duration needs to find it again (the measurement's owner keeps its own state).
  uint64_t measurement = 0;
  std::vector<std::shared_ptr<TimedOp>> deps;  // dropped once resolved
  // Its event in the timeline's engine of epoch `epoch`: its task once resolved, before that the
  // task of no duration that gave its start (started), else none.
  simcore::EventId event = simcore::kNoEvent;
  uint32_t epoch = 0;
};
using OpRef = std::shared_ptr<TimedOp>;

// Which stream an op goes to: its kind says which default-stream barrier it takes part in
// (timing/stream_order.h). The key's stream is a real stream handle, or a per-thread default
// stream's id.
using StreamKind = timing::StreamKind;
using StreamKey = timing::StreamOrder<OpRef>::Key;

class VirtualTimeline {
 public:
  // The engine is made over one node of the process's `devices` virtual devices, an op's task on
  // its device (one outside them on device 0). Not over the job's cluster: the passthrough places
  // only tasks, which share no link, so the topology would go unused, and building a large
  // cluster's topology for every new engine costs milliseconds (512 nodes: 2.6 ms; one node of
  // 8 GPUs: 0.8 us).
  explicit VirtualTimeline(int devices = 8);
  ~VirtualTimeline();
  VirtualTimeline(const VirtualTimeline&) = delete;
  VirtualTimeline& operator=(const VirtualTimeline&) = delete;

  // Events the engine of one epoch takes before the next engine starts (see above): small, so
  // that the engine's memory stays in cache (its records are 256 bytes).
  static constexpr uint64_t kEpochEvents = 1024;

  // Appends an op to `stream`. `duration` < 0: unknown until set_duration(). `waits`: ops that
  // must finish first (null entries are ignored). `start_first`: its duration depends on its
  // start, which resolve() then places first and hands to `measure`. Resolves it at once when it
  // can.
  OpRef append(const StreamKey& stream, StreamKind kind, int device, double issue, double duration,
               const std::vector<OpRef>& waits = {}, uint64_t measurement = 0, bool kernel = false,
               std::string label = {}, bool start_first = false);

  // The start of `op` if its dependencies are resolved (its duration may still be unknown).
  // `wait` false: nullopt at once when another thread holds the timeline (a resolve forced by a
  // synchronization may hold it until the GPU finishes, and NCCL's proxy thread, which the GPU
  // may be waiting for, must never wait on it).
  std::optional<double> start_if_ready(const OpRef& op, bool wait = true);

  // The measurement of `op` came back.
  void set_duration(const OpRef& op, double seconds);

  // The last op of a stream, or null.
  OpRef tail(const StreamKey& stream) const;
  // The last op of every stream of `context`.
  std::vector<OpRef> tails_of_context(const void* context) const;

  // Resolves every pending op that can be. `measure(op, start, force)` is asked for the
  // duration of each pending op whose duration is unknown and whose dependencies are resolved,
  // with its start when it was appended `start_first` (else nullopt: other ops need no start,
  // and placing it would cost the engine an event): it returns the duration (>= 0), or < 0 when
  // it cannot tell yet.
  // `force` is true for `target` and every op it depends on: the caller synchronized with
  // `target` for real, so their measurements are complete and must be read now.
  // `wait` false: does nothing when another thread holds the timeline (as start_if_ready).
  using Measure = std::function<double(const TimedOp& op, std::optional<double> start, bool force)>;
  void resolve(const Measure& measure, const OpRef& target = nullptr, bool wait = true);

  // The finish of `op` when resolved.
  std::optional<double> finish(const OpRef& op) const;

  // Ops waiting for a duration or a dependency (tests, logs).
  size_t pending() const;
  // The current engine's counters and how many engines were started (tests, benches).
  simcore::Engine::Stats engine_stats() const;
  uint32_t epochs() const;

  // Called (under the timeline's lock: keep it short) for every op as it resolves.
  void set_on_resolved(std::function<void(const TimedOp&)> f) { on_resolved_ = std::move(f); }

  // The program destroyed the stream: later ops on a new stream with the same handle start
  // fresh (its last op stays in the default-stream barrier: timing/stream_order.h).
  void destroy_stream(const StreamKey& stream);
  void forget_context(const void* context);

 private:
  // Places `op`'s start in the engine once every op it waits for is resolved (a task of no
  // duration: `after` them, not before its issue time); nullopt before.
  std::optional<double> place_start(TimedOp& op);
  // Whether every op `op` waits for is resolved (or its start is placed).
  static bool ready(const TimedOp& op);
  // Places `op` if its duration and dependencies allow, and reads its interval; true when
  // resolved.
  bool try_resolve(TimedOp& op);
  // Adds `op`'s task (after its start once that is placed, else after its dependencies) to the
  // current engine, starting the next epoch's engine when this one is full; `op`'s event is set
  // to it and returned.
  simcore::EventId place(TimedOp& op, double not_before, double duration);
  // The engine's answer for `id` (an op that should not take place there starts at its issue).
  simcore::Interval engine_interval(simcore::EventId id, double issue);
  // Where an op placed already ends, as those placed after it see it: its finish, or its start
  // while only that is placed (an NCCL kernel's start, before its duration is known).
  static double placed_time(const TimedOp& op);
  int gpu_of(int device) const { return device >= 0 && device < cluster_.total_gpus() ? device : 0; }

  std::function<void(const TimedOp&)> on_resolved_;

  mutable std::mutex mu_;
  timing::StreamOrder<OpRef> streams_;  // each stream's kind and last op
  std::deque<OpRef> pending_;  // submission order
  int32_t next_lane_ = 0;

  simcore::ClusterSpec cluster_;  // one node of the process's virtual devices
  std::unique_ptr<simcore::Engine> engine_;
  // The two epochs' before, kept a while (about 350 KB each): see place().
  std::unique_ptr<simcore::Engine> previous_engine_, older_engine_;
  uint32_t epoch_ = 0;
  uint64_t epoch_events_ = 0;
  simcore::TaskSpec task_;   // scratch for place() (its `after` keeps its capacity)
  std::vector<OpRef> spare_deps_;  // empty; a resolved op's buffer, for the next op's deps
};

}  // namespace vgpu::pt
