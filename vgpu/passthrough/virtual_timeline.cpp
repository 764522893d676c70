#include "passthrough/virtual_timeline.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "common/log.h"

namespace vgpu::pt {

VirtualTimeline::VirtualTimeline(int devices) {
  cluster_.nodes = 1;
  cluster_.gpus_per_node = std::clamp(devices, 1, 4096);
}

VirtualTimeline::~VirtualTimeline() = default;

double VirtualTimeline::placed_time(const TimedOp& op) { return op.resolved ? op.finish : op.start; }

simcore::EventId VirtualTimeline::place(TimedOp& op, double not_before, double duration) {
  if (!engine_ || epoch_events_ >= kEpochEvents) {
    // Ops of the old engine keep the interval they read from it; later ops that name them start
    // no earlier than it (place). Its own timeline is not kept: the passthrough writes its own.
    simcore::EngineOptions options;
    options.record_timeline = false;
    // The engine two epochs back goes now, not the one just full: its memory, freed while
    // younger engines' is still held, lies below the heap's top, so the new engine reuses it
    // instead of the heap shrinking and growing again at every epoch (page faults of
    // timeline_bench's engine path: 58581 freeing the full one, 21344 so).
    older_engine_ = std::move(previous_engine_);
    previous_engine_ = std::move(engine_);
    engine_ = simcore::make_engine(cluster_, options);
    ++epoch_;
    epoch_events_ = 0;
  }
  // What it waits for is placed already (its start, or every dependency: ready()). One in this
  // engine is named; one placed elsewhere (an older engine, or no engine: a marker) only
  // raises its earliest start to where that one ends, which is all the engine would make of it.
  task_.after.clear();
  auto wait_for = [this, &not_before](const TimedOp& d) {
    if (d.epoch == epoch_ && d.event != simcore::kNoEvent)
      task_.after.push_back(d.event);
    else
      not_before = std::max(not_before, placed_time(d));
  };
  if (op.started) {
    wait_for(op);  // its start, placed already
  } else {
    for (const OpRef& d : op.deps) wait_for(*d);
  }
  task_.gpu = gpu_of(op.device);
  task_.lane = op.lane;
  task_.duration = std::isfinite(duration) && duration > 0 ? duration : 0;
  task_.not_before = std::isfinite(not_before) ? not_before : 0;
  op.event = engine_->add_task(task_);
  op.epoch = epoch_;
  ++epoch_events_;
  return op.event;
}

std::optional<double> VirtualTimeline::place_start(TimedOp& op) {
  if (op.started) return op.start;
  if (!ready(op)) return std::nullopt;
  op.start = engine_interval(place(op, op.issue, 0), op.issue).finish;
  op.started = true;
  return op.start;
}

bool VirtualTimeline::ready(const TimedOp& op) {
  if (op.started) return true;
  for (const OpRef& d : op.deps)
    if (!d->resolved) return false;
  return true;
}

simcore::Interval VirtualTimeline::engine_interval(simcore::EventId id, double issue) {
  std::optional<simcore::Interval> at;
  if (id != simcore::kNoEvent) at = engine_->query(id);
  if (at) return *at;
  // Cannot happen with place()'s checks (the engine logged why): the op takes no time.
  log::once(log::Level::warn, "vtime-engine", "passthrough: the engine refused an op; it takes no virtual time");
  return simcore::Interval{issue, issue};
}

OpRef VirtualTimeline::append(const StreamKey& key, StreamKind kind, int device, double issue,
                              double duration, const std::vector<OpRef>& waits, uint64_t measurement,
                              bool kernel, std::string label, bool start_first) {
  auto op = std::make_shared<TimedOp>();
  op->start_first = start_first;
  op->label = std::move(label);
  op->measurement = measurement;
  op->kernel = kernel;
  op->issue = issue;
  op->duration = duration;
  op->device = device;
  std::lock_guard l(mu_);
  op->deps.swap(spare_deps_);  // an empty buffer a resolved op left (no allocation per op)
  streams_.for_each_predecessor(key, kind, [&op](const OpRef& last, bool /*own stream*/) {
    if (last) op->deps.push_back(last);
  });
  for (const OpRef& w : waits)
    if (w) op->deps.push_back(w);
  auto& s = streams_.stream(key, kind);
  if (s.lane < 0) s.lane = next_lane_++;
  op->lane = s.lane;
  s.last = op;
  if (!try_resolve(*op)) pending_.push_back(op);
  return op;
}

bool VirtualTimeline::try_resolve(TimedOp& op) {
  if (op.resolved) return true;
  if (op.duration < 0 || !ready(op)) return false;
  if (op.duration == 0 && !op.kernel && !op.started) {
    // A marker (an event record, a stream's wait): no work, so no task. It is where the engine
    // would put a task of no duration after its dependencies, not before its issue time.
    double at = std::isfinite(op.issue) ? op.issue : 0;
    for (const OpRef& d : op.deps) at = std::max(at, d->finish);
    op.start = op.finish = at;
  } else {
    const simcore::Interval at = engine_interval(place(op, op.issue, op.duration), op.issue);
    op.start = at.start;
    op.finish = at.finish;
  }
  op.resolved = op.started = true;
  op.deps.clear();
  if (spare_deps_.capacity() == 0)
    spare_deps_.swap(op.deps);  // for the next op appended
  else
    op.deps.shrink_to_fit();
  if (on_resolved_) on_resolved_(op);
  return true;
}

void VirtualTimeline::set_duration(const OpRef& op, double seconds) {
  if (!op) return;
  std::lock_guard l(mu_);
  if (!op->resolved) op->duration = std::max(0.0, seconds);
}

std::optional<double> VirtualTimeline::start_if_ready(const OpRef& op, bool wait) {
  if (!op) return std::nullopt;
  std::unique_lock l(mu_, std::defer_lock);
  if (wait) {
    l.lock();
  } else if (!l.try_lock()) {
    return std::nullopt;
  }
  return place_start(*op);
}

OpRef VirtualTimeline::tail(const StreamKey& key) const {
  std::lock_guard l(mu_);
  const auto* s = streams_.find(key);
  return s == nullptr ? nullptr : s->last;
}

std::vector<OpRef> VirtualTimeline::tails_of_context(const void* context) const {
  std::vector<OpRef> out;
  std::lock_guard l(mu_);
  streams_.for_each_in_context(context, [&out](const StreamKey&, const auto& s) {
    if (s.last) out.push_back(s.last);
  });
  return out;
}

void VirtualTimeline::resolve(const Measure& measure, const OpRef& target, bool wait) {
  std::unique_lock l(mu_, std::defer_lock);
  if (wait) {
    l.lock();
  } else if (!l.try_lock()) {
    return;
  }
  // What `target` depends on, transitively, among the unresolved ops.
  std::unordered_set<const TimedOp*> forced;
  std::vector<const TimedOp*> stack;
  if (target && !target->resolved) stack.push_back(target.get());
  while (!stack.empty()) {
    const TimedOp* op = stack.back();
    stack.pop_back();
    if (!forced.insert(op).second) continue;
    for (const OpRef& d : op->deps)
      if (!d->resolved) stack.push_back(d.get());
  }
  for (OpRef& op : pending_) {
    if (op->resolved) continue;
    if (op->duration < 0 && ready(*op)) {
      const std::optional<double> start = op->start_first ? place_start(*op) : std::nullopt;
      const double d = measure(*op, start, forced.contains(op.get()));
      if (d >= 0) op->duration = d;
    }
    try_resolve(*op);
  }
  std::erase_if(pending_, [](const OpRef& op) { return op->resolved; });
}

std::optional<double> VirtualTimeline::finish(const OpRef& op) const {
  if (!op) return std::nullopt;
  std::lock_guard l(mu_);
  if (!op->resolved) return std::nullopt;
  return op->finish;
}

size_t VirtualTimeline::pending() const {
  std::lock_guard l(mu_);
  return pending_.size();
}

simcore::Engine::Stats VirtualTimeline::engine_stats() const {
  std::lock_guard l(mu_);
  return engine_ ? engine_->stats() : simcore::Engine::Stats{};
}

uint32_t VirtualTimeline::epochs() const {
  std::lock_guard l(mu_);
  return epoch_;
}

void VirtualTimeline::destroy_stream(const StreamKey& key) {
  std::lock_guard l(mu_);
  streams_.destroy_stream(key);
}

void VirtualTimeline::forget_context(const void* context) {
  std::lock_guard l(mu_);
  streams_.forget_context(context);
}

}  // namespace vgpu::pt
