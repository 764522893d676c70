#include "passthrough/virtual_timeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "timing/inline_constants.h"

namespace vgpu::pt {

namespace {
// simcore's task rule (engine.h), for an op whose predecessors are all placed: it starts at the
// latest of its issue time and their finishes. A time that is not finite counts as 0, as the
// engine takes it.
double rule_start(const TimedOp& op) {
  double at = std::isfinite(op.issue) ? op.issue : 0;
  for (const OpRef& d : op.deps) at = std::max(at, d->finish);
  return at;
}

// `op` waits for a stream's tail (StreamTail: its op, `also`, not before its floor). A tail
// handed over non-const is the op's own stream's, replaced right after: its op is moved, not
// copied (two atomic reference counts fewer per op).
template <class Tail>
void wait_for(TimedOp& op, Tail& tail) {
  if (tail.op) op.deps.push_back(std::move(tail.op));
  // (Redundant for an op of a stream, which waits for the legacy stream's last op itself or by
  // its own stream order, whose later ops finish after `also`; kept so a tail means one thing.)
  if (tail.also) op.deps.push_back(tail.also);
  if (tail.not_before > -std::numeric_limits<double>::infinity())
    op.issue = std::max(std::isfinite(op.issue) ? op.issue : 0.0, tail.not_before);
}
}  // namespace

std::optional<double> VirtualTimeline::place_start(TimedOp& op) {
  if (op.started) return op.start;
  if (!ready(op)) return std::nullopt;
  op.start = rule_start(op);
  op.started = true;
  return op.start;
}

bool VirtualTimeline::ready(const TimedOp& op) {
  if (op.started) return true;
  for (const OpRef& d : op.deps)
    if (!d->resolved) return false;
  return true;
}

OpRef VirtualTimeline::append(const StreamKey& key, StreamKind kind, int device, double issue,
                              double duration, const std::vector<OpRef>& waits, uint64_t measurement,
                              bool kernel, std::string label, bool start_first) {
  std::lock_guard l(mu_);
  return append_locked(key, kind, device, issue, duration, waits, measurement, kernel, std::move(label),
                       start_first);
}

OpRef VirtualTimeline::append_locked(const StreamKey& key, StreamKind kind, int device, double issue,
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
  op->deps.swap(spare_deps_);  // an empty buffer a resolved op left (no allocation per op)
  auto& s = streams_.append(key, kind, [&op](auto& last, bool /*own stream*/) { wait_for(*op, last); });
  for (const OpRef& w : waits)
    if (w) op->deps.push_back(w);
  if (s.lane < 0) s.lane = next_lane_++;
  op->lane = s.lane;
  s.last = StreamTail::of(op);
  if (!try_resolve(*op)) pending_.push_back(op);
  return op;
}

OpRef VirtualTimeline::append_unless_placed(const StreamKey& key, StreamKind kind, int device, double issue,
                                           double duration, bool kernel, std::string&& label) {
  std::lock_guard l(mu_);
  if (!elide_records_ || duration < 0)
    return append_locked(key, kind, device, issue, duration, {}, 0, kernel, std::move(label), false);
  // simcore's task rule over what the op would wait for (wait_for, rule_start), read in place.
  double at = finite_or_zero(issue);  // no constant from memory (inline_constants.h)
  bool placed = true;
  auto read = [&at, &placed](const StreamTail& last, bool /*own stream*/) {
    for (const OpRef* d : {&last.op, &last.also}) {
      if (!*d) continue;
      if (!(*d)->resolved) placed = false;
      at = std::max(at, (*d)->finish);
    }
    at = std::max(at, last.not_before);
  };
  // Appending to the legacy stream forgets the destroyed streams' tails it waited for, which an op
  // made after all (below) must still see: there, read first and append after. Elsewhere the
  // append changes nothing that a second one would see differently.
  timing::StreamOrder<StreamTail>::Entry* entry = nullptr;
  if (kind == StreamKind::legacy)
    streams_.for_each_predecessor(key, kind, read);
  else
    entry = &streams_.append(key, kind, read);
  if (!placed)  // something it waits for is not placed yet: an op, as append()
    return append_locked(key, kind, device, issue, duration, {}, 0, kernel, std::move(label), false);
  auto& s = entry != nullptr ? *entry : streams_.stream(key, kind);
  if (s.lane < 0) s.lane = next_lane_++;
  TimedOp& op = placed_;
  op.issue = issue;
  op.duration = duration;
  op.start = at;
  const double lasts = finite_or_zero(duration);
  op.carried = 0;
  op.finish = kernel ? overlap_.kernel_finish(device, at, lasts, &op.carried) : at + (lasts > 0 ? lasts : 0);
  op.resolved = op.started = true;
  op.device = device;
  op.kernel = kernel;
  op.lane = s.lane;
  if (on_resolved_) on_resolved_(op);
  s.last = StreamTail{nullptr, op.finish, nullptr, device};
  return nullptr;
}

VirtualTimeline::LastRecord VirtualTimeline::record_locked(const void* event, const StreamKey& key, StreamKind kind,
                                                          int device, double issue) {
  if (elide_records_ && kind == StreamKind::non_blocking && last_record_.mark != nullptr &&
      last_record_.event == event && last_record_.key == key && last_record_.stream->kind == kind) {
    record_on_tail(*last_record_.mark, *last_record_.stream, device, issue);
    return last_record_;
  }
  return record_looked_up(event, key, kind, device, issue);
}

void VirtualTimeline::record_event(const void* event, const StreamKey& key, StreamKind kind, int device,
                                   double issue) {
  std::lock_guard l(mu_);
  record_locked(event, key, kind, device, issue);
}

void VirtualTimeline::record_event(const void* event, const StreamKey& key, StreamKind kind, int device, double issue,
                                   RecordMemo& memo, uint64_t generation) {
  std::lock_guard l(mu_);
  const LastRecord r = record_locked(event, key, kind, device, issue);
  if (r.mark == nullptr) {
    memo.owner = nullptr;
    return;
  }
  memo.owner = this;
  memo.generation = generation;
  memo.mark = r.mark;
  memo.entry = r.stream;
  // The calling thread's slot now stands for this memo: its earlier records were folded as the
  // lock was taken (the thread itself is their only writer, and it is here).
  memo.slot = slot_for(memo);
  if (RecordSlot* s = memo.slot) {
    s->folded = s->seq.load(std::memory_order_relaxed);
    s->issue.store(-std::numeric_limits<double>::infinity(), std::memory_order_relaxed);
    s->generation = generation;
    s->mark = r.mark;
    s->entry = r.stream;
    s->event = event;
    s->stream = key.stream;
    s->context = key.context;
    s->device = device;
  }
}

RecordSlot* VirtualTimeline::slot_for(const RecordMemo& memo) {
  const auto at = reinterpret_cast<uintptr_t>(memo.slot);
  if (at >= reinterpret_cast<uintptr_t>(slots_.data()) && at < reinterpret_cast<uintptr_t>(slots_.data() + kSlots))
    return memo.slot;
  return claimed_ < kSlots ? &slots_[claimed_++] : nullptr;
}

void VirtualTimeline::fold(RecordSlot& s, uint32_t seq) {
  s.folded = seq;
  // Read after `seq` (acquire): at least the issue of the record that moved it.
  const double issue = s.issue.load(std::memory_order_relaxed);
  // Every erase of a mark or an entry moves the generation under this lock: equal, both live.
  if (s.generation == record_generation_.load(std::memory_order_relaxed)) {
    record_on_tail(*static_cast<EventMark*>(s.mark), *static_cast<timing::StreamOrder<StreamTail>::Entry*>(s.entry),
                   s.device, issue);
    return;
  }
  // Stale since the record's memo check (another thread destroyed a stream or an event, or made
  // one): looked up, as VirtualTime::event_recorded_again does for a record under the lock.
  record_locked(s.event, StreamKey{s.context, s.stream}, StreamKind::non_blocking, s.device, issue);
}

bool VirtualTimeline::record_again(const RecordMemo& memo, double issue) {
  std::lock_guard l(mu_);
  // Every erase of a mark or an entry moves the generation under this lock: equal, both live.
  if (memo.generation != record_generation_.load(std::memory_order_relaxed)) return false;
  record_on_tail(*static_cast<EventMark*>(memo.mark), *static_cast<timing::StreamOrder<StreamTail>::Entry*>(memo.entry),
                 memo.device, issue);
  return true;
}

// Out of line: its maps and op made a frame that every record paid for in saved registers and
// spilled arguments, the common case above included (issue 21).
VirtualTimeline::LastRecord VirtualTimeline::record_looked_up(const void* event, const StreamKey& key,
                                                              StreamKind kind, int device, double issue) {
  EventMark& m = events_[event];
  // On the legacy stream a record waits for every blocking stream and they all wait for it: an
  // op, as any other (the legacy stream's tail is therefore always plain).
  if (!elide_records_ || kind == StreamKind::legacy) {
    m.op = append_locked(key, kind, device, issue, 0, {}, 0, false, {}, false);
    m.tail = StreamTail{};
    return LastRecord{};
  }
  // A created or per-thread stream: the only other stream its record waits for is the legacy one.
  const StreamTail* legacy = nullptr;
  auto& s = streams_.append(key, kind, [&legacy](const StreamTail& last, bool own) {
    if (!own) legacy = &last;
  });
  if (s.lane < 0) s.lane = next_lane_++;
  if (legacy != nullptr) {
    if (legacy->op && s.last.also != legacy->op) s.last.also = legacy->op;
    // A legacy op placed without an op (append_unless_placed) is its finish alone.
    s.last.not_before = std::max(s.last.not_before, legacy->not_before);
  }
  record_on_tail(m, s, device, issue);
  last_record_ = kind == StreamKind::non_blocking ? LastRecord{event, key, &m, &s} : LastRecord{};
  return last_record_;
}

OpRef VirtualTimeline::op_for(const StreamTail& tail) {
  if (tail.plain()) return tail.op;
  auto op = std::make_shared<TimedOp>();
  op->issue = tail.not_before;
  op->duration = 0;
  op->device = tail.device;
  if (tail.op) op->deps.push_back(tail.op);
  if (tail.also) op->deps.push_back(tail.also);
  if (!try_resolve(*op)) pending_.push_back(op);
  return op;
}

OpRef VirtualTimeline::event_op(const void* event) {
  std::lock_guard l(mu_);
  auto it = events_.find(event);
  if (it == events_.end()) return nullptr;
  EventMark& m = it->second;
  if (!m.op) {
    m.op = op_for(m.tail);
    m.tail = StreamTail{};  // the op holds what it waits for
  }
  return m.op;
}

void VirtualTimeline::forget_event(const void* event) {
  std::lock_guard l(mu_);
  last_record_ = LastRecord{};
  invalidate_record_memos();  // threads' memos may hold its mark or entry
  events_.erase(event);
}

bool VirtualTimeline::try_resolve(TimedOp& op) {
  if (op.resolved) return true;
  if (op.duration < 0 || !ready(op)) return false;
  // Its start may be placed already (asked first); a duration that is not finite and positive
  // lasts nothing, as in the engine.
  if (!op.started) op.start = rule_start(op);
  const double lasts = std::isfinite(op.duration) && op.duration > 0 ? op.duration : 0;
  // A collective's kernel and the kernels beside it on its GPU (timing/collective_overlap.h).
  if (op.start_first) {
    op.finish = op.start + lasts;
    overlap_.collective(op.device, op.start, op.moving_from < 0 ? op.start : op.moving_from, op.finish);
  } else {
    op.finish = op.kernel ? overlap_.kernel_finish(op.device, op.start, lasts, &op.carried) : op.start + lasts;
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

OpRef VirtualTimeline::tail(const StreamKey& key) {
  std::lock_guard l(mu_);
  auto* s = streams_.find(key);
  if (s == nullptr) return nullptr;
  // Records since its last op: the op they stand for becomes the tail (the same placement).
  if (!s->last.plain()) s->last = StreamTail::of(op_for(s->last));
  return s->last.op;
}

std::vector<OpRef> VirtualTimeline::tails_of_context(const void* context) {
  std::vector<OpRef> out;
  std::lock_guard l(mu_);
  streams_.for_each_in_context(context, [this, &out](const StreamKey&, const auto& s) {
    if (OpRef op = op_for(s.last)) out.push_back(std::move(op));
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

void VirtualTimeline::destroy_stream(const StreamKey& key) {
  std::lock_guard l(mu_);
  last_record_ = LastRecord{};
  invalidate_record_memos();  // threads' memos may hold its mark or entry
  streams_.destroy_stream(key);
}

void VirtualTimeline::forget_context(const void* context) {
  std::lock_guard l(mu_);
  last_record_ = LastRecord{};
  invalidate_record_memos();  // threads' memos may hold its mark or entry
  streams_.forget_context(context);
}

}  // namespace vgpu::pt
