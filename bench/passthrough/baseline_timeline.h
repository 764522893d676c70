// The baseline of timeline_bench: the passthrough's own VirtualTimeline as it was before
// simcore's Engine placed its ops (commit 9a45f9a, vgpu/passthrough/virtual_timeline.h), kept
// unchanged but for its namespace, so that the bench measures both in one run.
//
// The virtual timeline of the passthrough backend's streams: real work runs on the real GPU,
// and each op the program submits also gets a place on its stream's virtual timeline. What an op
// waits for is the rule both backends share (timing/stream_order.h: the op before it on its
// stream, what it names, the default streams' barrier); it starts at the latest of its issue
// time (the issuing thread's virtual clock plus the launch latency) and their finish, and lasts
// its duration.
//
// Durations may be unknown when the op is submitted (the launch is being measured on the real
// GPU and the measurement is read only once the real work is done), so ops resolve lazily:
// an op is resolved once its duration and all its dependencies are known. Ops are resolved in
// submission order (every dependency was submitted earlier), so one pass over the pending ops
// resolves everything that can be.
//
// Pure bookkeeping: no driver calls, no clocks. One mutex; every method is thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "timing/stream_order.h"

namespace vgpu::pt::baseline {

struct TimedOp {
  double issue = 0;      // earliest start, virtual seconds
  double duration = -1;  // < 0: not known yet
  double start = 0, finish = 0;
  bool resolved = false;
  int device = -1;       // the virtual device it runs on
  bool kernel = false;   // a kernel launch (for the per-device statistics)
  int32_t lane = 0;      // its stream's number within the process (the timeline's lanes)
  std::string label;     // what it is, for VGPU_TIMELINE (empty unless one is written)
  // What set_duration needs to find it again (the measurement's owner keeps its own state).
  uint64_t measurement = 0;
  std::vector<std::shared_ptr<TimedOp>> deps;  // dropped once resolved
};
using OpRef = std::shared_ptr<TimedOp>;

// Which stream an op goes to: its kind says which default-stream barrier it takes part in
// (timing/stream_order.h). The key's stream is a real stream handle, or a per-thread default
// stream's id.
using StreamKind = timing::StreamKind;
using StreamKey = timing::StreamOrder<OpRef>::Key;

class VirtualTimeline {
 public:
  // Appends an op to `stream`. `duration` < 0: unknown until set_duration(). `waits`: ops that
  // must finish first (null entries are ignored). Resolves it at once when it can.
  OpRef append(const StreamKey& stream, StreamKind kind, int device, double issue, double duration,
               const std::vector<OpRef>& waits = {}, uint64_t measurement = 0, bool kernel = false,
               std::string label = {});

  // The start of `op` if its dependencies are resolved (its duration may still be unknown).
  // `wait` false: nullopt at once when another thread holds the timeline (a resolve forced by a
  // synchronization may hold it until the GPU finishes, and NCCL's proxy thread, which the GPU
  // may be waiting for, must never wait on it).
  std::optional<double> start_if_ready(const OpRef& op, bool wait = true) const;

  // The measurement of `op` came back.
  void set_duration(const OpRef& op, double seconds);

  // The last op of a stream, or null.
  OpRef tail(const StreamKey& stream) const;
  // The last op of every stream of `context`.
  std::vector<OpRef> tails_of_context(const void* context) const;

  // Resolves every pending op that can be. `measure(op, start, force)` is asked for the
  // duration of each pending op whose duration is unknown and whose dependencies are resolved
  // (so its start is known): it returns the duration (>= 0), or < 0 when it cannot tell yet.
  // `force` is true for `target` and every op it depends on: the caller synchronized with
  // `target` for real, so their measurements are complete and must be read now.
  // `wait` false: does nothing when another thread holds the timeline (as start_if_ready).
  using Measure = std::function<double(const TimedOp& op, double start, bool force)>;
  void resolve(const Measure& measure, const OpRef& target = nullptr, bool wait = true);

  // The finish of `op` when resolved.
  std::optional<double> finish(const OpRef& op) const;

  // Ops waiting for a duration or a dependency (tests, logs).
  size_t pending() const;

  // Called (under the timeline's lock: keep it short) for every op as it resolves.
  void set_on_resolved(std::function<void(const TimedOp&)> f) { on_resolved_ = std::move(f); }

  // The stream is gone: later ops on a new stream with the same handle start fresh.
  void forget_stream(const StreamKey& stream);
  void forget_context(const void* context);

 private:
  // The start of `op` once every op it waits for is resolved: the latest of its issue time and
  // their finish (the sim's engine places a task by the same rule); nullopt before.
  static std::optional<double> start_once_ready(const TimedOp& op);
  // Resolves `op` if its duration and dependencies allow; true when resolved.
  bool try_resolve(TimedOp& op);

  std::function<void(const TimedOp&)> on_resolved_;

  mutable std::mutex mu_;
  timing::StreamOrder<OpRef> streams_;  // each stream's kind and last op
  std::deque<OpRef> pending_;  // submission order
  int32_t next_lane_ = 0;
};

}  // namespace vgpu::pt::baseline
