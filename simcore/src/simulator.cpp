#include "simulator.h"

#include <algorithm>
#include <cmath>

#include "common/log.h"

namespace simcore::detail {

Simulator::Simulator(const ClusterSpec& cluster, const EngineOptions& options)
    : topology_(cluster), solver_(topology_, options.solver),
      record_timeline_(options.record_timeline), links_(topology_.links().size()),
      link_starts_(topology_.links().size()), pin_ok_(options.solver == SolverMode::incremental) {
  if (topology_.gpu_count() <= kRouteMemoGpus) {
    memo_gpus_ = static_cast<size_t>(topology_.gpu_count());
    route_memo_.resize(memo_gpus_);
  }
  if (options.huge_pages) {
    records_.set_huge_pages(true);
    ids_.set_huge_pages(true);
    log_pool_.set_huge_pages(true);
    sched_pool_.set_huge_pages(true);
    groups_.set_huge_pages(true);
  }
}

Route* Simulator::memo_row(int src) const {
  auto row = std::make_unique<Route[]>(memo_gpus_);
  for (size_t i = 0; i < memo_gpus_; ++i) row[i].count = -1;
  ++memo_rows_;
  route_memo_[static_cast<size_t>(src)] = std::move(row);
  return route_memo_[static_cast<size_t>(src)].get();
}

uint32_t Simulator::allocate_slot() {
  if (!free_slots_.empty()) {
    const uint32_t s = free_slots_.back();
    free_slots_.pop_back();
    // A freed record (and its flow's solver state) was last written when its event was
    // simulated, long ago on a large cluster: the slots handed out next are fetched for writing
    // a few submissions ahead, so their misses overlap instead of stalling one submission each.
    constexpr size_t kAhead = 8;
    if (free_slots_.size() >= kAhead) {
      const uint32_t next = free_slots_[free_slots_.size() - kAhead];
      const char* p = reinterpret_cast<const char*>(&records_[next]);
      for (size_t line = 0; line < sizeof(Record); line += 64) __builtin_prefetch(p + line, 1);
      solver_.prefetch(next);
    }
    records_[s].clear();  // retire() left it as it was, but for its id
    return s;
  }
  records_.emplace_back();
  if (record_timeline_) notes_.emplace_back();
  return static_cast<uint32_t>(records_.size() - 1);
}

// ---------------------------------------------------------------------------------------------
// Submission

EventId Simulator::submit(const NewEvent& e, EventId id) {
  const uint32_t slot = allocate_slot();
  if (id == kNoEvent) id = ids_.add(slot);
  else ids_.rebind(id, slot);
  ++live_;

  Record& r = records_[slot];
  r.id = id;
  r.kind = e.kind;
  r.phase = Phase::pending;
  r.dirty = true;
  r.gpu = e.gpu;
  r.dst = e.dst;
  r.lane = e.lane;
  r.bytes = e.bytes;
  r.tail = e.kind == EventKind::flow ? topology_.route(e.gpu, e.dst).latency : e.duration;
  r.base_ready = std::max(e.not_before, floor_);
  if (record_timeline_) {
    if (e.label) notes_[slot].label = *e.label;
    notes_[slot].carried = e.carried;
  }

  Time lower_bound = r.base_ready;
  if (e.after) {
    for (EventId dep : *e.after) {
      const uint32_t ds = ids_.slot(dep);
      if (ds == IdTable::kRetired) {
        r.base_ready = std::max(r.base_ready, ids_.result(dep).finish);
        lower_bound = std::max(lower_bound, ids_.result(dep).finish);
        continue;
      }
      if (std::find(r.deps.begin(), r.deps.end(), dep) != r.deps.end()) continue;
      Record& d = records_[ds];
      r.deps.push_back(dep);
      add_dependent(ds, dep, id);
      // A fresh dependency starts no earlier than its own bound; a simulated one keeps its
      // finish unless the sweep reaches it, which happens no earlier than the sweep's start.
      lower_bound = std::max(lower_bound, d.dirty ? d.lower_bound : d.finish);
    }
  }
  r.lower_bound = lower_bound;
  rewind_to_ = std::min(rewind_to_, lower_bound);
  fresh_.push_back(slot);
  return id;
}

bool Simulator::settled(EventId id) const {
  if (!ids_.present(id)) return true;
  const uint32_t slot = ids_.slot(id);
  if (slot == IdTable::kRetired) return true;
  const Record& r = records_[slot];
  return !r.dirty && r.finish <= rewind_to_;
}

// ---------------------------------------------------------------------------------------------
// The sweep

void Simulator::push(Time t, uint32_t target, ItemKind kind, uint32_t version) {
  queue_.push(QueueItem{t, target, version, kind});
}

// The start is usually handled within the same instant, right after the item that released it:
// its solver state (written by attach(), last touched when the slot's previous event left the
// solver, long ago on a large ring: the largest single miss of a 1024-GPU ring) is fetched now,
// so the miss overlaps the rest of the releasing item's work.
void Simulator::push_start(Time t, uint32_t slot) {
  solver_.prefetch(slot);
  push(t, slot, kStart);
}

void Simulator::sync() {
  if (fresh_.empty()) return;
  const Time start = rewind_to_;
  const uint64_t replayed_before = replayed_, pins_before = pins_;
  sweep_pins_ = sweep_unpins_ = 0;
  queue_.restart();
  stale_ends_ = 0;
  first_instant_ = solver_.attached_count() == 0;
  first_usable_ = true;
  for (uint32_t slot : fresh_) dirty_.push_back(slot);
  for (uint32_t slot : fresh_) schedule_if_ready(slot, start);
  fresh_.clear();
  run();
  first_instant_ = false;  // (a sweep with nothing to run never reached adopt_first_instant())
  rewind_to_ = std::numeric_limits<Time>::infinity();
  if (replayed_ > replayed_before || pins_ > pins_before) ++rollbacks_;
  finalize();
}

bool Simulator::dep_waits(EventId dep, Time now, Time& ready) {
  const uint32_t ds = live_slot(dep);
  if (ds == kRetired) return false;
  Record& d = records_[ds];
  if (d.dirty) {
    if (d.phase != Phase::done) return true;
    ready = std::max(ready, d.finish);
    return false;
  }
  if (d.finish < now || d.finish_announced) {
    ready = std::max(ready, d.finish);
    return false;
  }
  // A clean dependency finishing now or later may still turn dirty until then: the sweep
  // announces its finish when it gets there.
  if (!d.finish_queued) {
    d.finish_queued = true;
    announced_.push_back(ds);
    push(d.finish, ds, kCleanFinish);
  }
  return true;
}

void Simulator::schedule_if_ready(uint32_t slot, Time now) {
  Record& r = records_[slot];
  if (r.group != kNoGroup) {
    schedule_group(slot, now);
    return;
  }
  r.ready = r.base_ready;
  r.waiting = 0;
  for (EventId dep : r.deps)
    if (dep_waits(dep, now, r.ready)) ++r.waiting;
  if (r.waiting == 0) push_start(r.ready, slot);
}

// An instant of a large ring holds hundreds of items whose records (and solver states) were last
// touched a whole step ago, each a cache miss when its item is handled (the record's version
// check in handle(), a starting flow's solver state in attach(): 15% of a 1024-GPU ring's perf
// samples): they are fetched a few items ahead of the one being handled, so those misses overlap.
void Simulator::prefetch_item(const QueueItem& item) const {
  if (item.kind == kWatch) return;
  const char* p = reinterpret_cast<const char*>(&records_[item.target]);
  for (size_t line = 0; line < sizeof(Record); line += 64) __builtin_prefetch(p + line, 1);
  if (item.kind == kStart || item.kind == kTransferEnd) solver_.prefetch(item.target);
}

void Simulator::run() {
  constexpr size_t kPrefetchAhead = 6;
  while (!queue_.empty()) {
    const Time now = queue_.top().t;
    while (queue_.has_current()) {
      if (const QueueItem* ahead = queue_.peek_ahead(kPrefetchAhead)) prefetch_item(*ahead);
      const QueueItem item = queue_.top();
      queue_.pop();
      handle(item, now);
      if (!presence_work_.empty()) pull_in(now);
    }
    if (first_instant_) adopt_first_instant();
    const auto on_change = [&](uint32_t slot, double rate) { on_rate(slot, rate, now); };
    struct Pins {
      Simulator* s;
      Time now;
      void unpin(uint32_t slot) { s->unpin(slot, now); }
      bool present(LinkId id) const { return s->present(id); }
      bool old_bottleneck(LinkId id, uint32_t slot, double rate) const { return s->old_bottleneck(id, slot, rate, now); }
    } pins{this, now};
    solver_.solve(on_change, pins);
    // An unpinned flow is dirty work on its links from now: their clean flows join (pinned), and
    // the instant is solved again with them.
    while (!presence_work_.empty() || solver_.pending()) {
      if (!presence_work_.empty()) pull_in(now);
      solver_.solve(on_change, pins);
    }
  }
}

void Simulator::handle(const QueueItem& item, Time now) {
  if (item.kind == kWatch) {
    watch_fired(item.target, item.version, now);
    return;
  }
  if (item.kind == kPin) {
    if (item.version == pin_stamp_[item.target]) pin_step(item.target, now);
    return;
  }
  Record& r = records_[item.target];
  // Ghosts always run: they replay an old transfer, whatever became of its flow since.
  if (item.kind == kGhostBegin || item.kind == kGhostEnd) {
    const Route route = route_of(r);
    if (item.kind == kGhostBegin) {
      note_presence(route, now);
      ++ghosts_begun_;
    }
    for (int i = 0; i < route.count; ++i) {
      add_ghost(route.links[i], item.kind == kGhostBegin);
    }
    return;
  }
  if (item.version != r.version) {
    if (item.kind == kTransferEnd && stale_ends_ > 0) --stale_ends_;
    return;
  }
  switch (item.kind) {
    case kStart: begin(item.target, now); break;
    case kTransferEnd: transfer_end_due(item.target, now); break;
    case kFinish: complete(item.target, now); break;
    case kCleanFinish: clean_finished(item.target, now); break;
    case kDepCheck: dep_check(item.target, now); break;
    default: break;
  }
}

void Simulator::begin(uint32_t slot, Time now) {
  Record& r = records_[slot];
  if (r.group != kNoGroup) {
    begin_group(slot, now);
    return;
  }
  // Indexed already at this start: joined as it started (dirty_pending() kept its entries).
  const bool kept = r.indexed && r.start == now;
  r.start = now;
  if (r.kind == EventKind::task || r.bytes == 0) {
    r.transfer_end = now;
    finish_after_tail(slot, now);
  } else {
    r.phase = Phase::moving;
    r.end_queued = std::numeric_limits<Time>::infinity();
    const Route route = route_of(r);
    if (!kept) index_insert(slot, r, route);
    if (first_instant_ && restart_known(slot, route, now)) return;
    attach_dirty(slot, route, 0.0, now);
  }
}

// A flow noted by dirty_pending() starts again at the instant its old transfer began: it goes on
// at its old first rate, as a known flow (its segment and transfer end are written here: the
// solve reports only rates that move).
bool Simulator::restart_known(uint32_t slot, const Route& route, Time now) {
  auto it = std::find_if(restarts_.begin(), restarts_.end(), [&](const auto& e) { return e.first == slot; });
  if (it == restarts_.end()) return false;
  const double rate = it->second;
  *it = restarts_.back();
  restarts_.pop_back();
  split_claims(route, now);
  note_presence(route, now);
  solver_.attach_known(slot, route, rate);
  on_rate(slot, rate, now);
  return true;
}

void Simulator::end_transfer(uint32_t slot, Time now) {
  Record& r = records_[slot];
  if (r.ghost_deferred) {
    r.ghost_deferred = false;
    if (r.transfer_end > now) {  // the old one: the sweep has not reached it yet
      ++ghosts_begun_;
      const Route route = route_of(r);
      for (int i = 0; i < route.count; ++i) add_ghost(route.links[i], true);
      push(r.transfer_end, slot, kGhostEnd);
    }
  }
  r.phase = Phase::tail;
  r.transfer_end = now;
  if (r.group != kNoGroup) end_group_transfer(slot);
  else solver_.detach(slot, /*touch=*/true);
  finish_after_tail(slot, now);
}

// An event nobody depends on finishes with nothing to tell anyone: it is done at once (its
// finish is known), saving the sweep a queue item and an instant per re-simulated flow.
void Simulator::finish_after_tail(uint32_t slot, Time now) {
  Record& r = records_[slot];
  if (!has_dependents(r)) {
    r.phase = Phase::done;
    r.finish = now + r.tail;
    return;
  }
  r.phase = Phase::tail;
  push(now + r.tail, slot, kFinish);
}

void Simulator::complete(uint32_t slot, Time now) {
  Record& r = records_[slot];
  r.phase = Phase::done;
  r.finish = now;
  for_each_dependent(r, [&](EventId dep) {
    uint32_t ds = live_slot(dep);
    if (ds == kRetired) return;
    Record& d = records_[ds];
    if (d.dirty) {
      // Dependents scheduled before this instant counted this event; later ones saw it done.
      if (d.phase != Phase::pending) return;
      if (d.group != kNoGroup) return member_dep_done(ds, dep, now);
      if (d.waiting == 0) return;
      d.ready = std::max(d.ready, now);
      if (--d.waiting == 0) push_start(d.ready, ds);
    } else if (!(r.has_old && now == r.old_finish)) {
      if (d.group != kNoGroup) {
        split(ds, now);  // a simulated group: its members are ordinary flows from here on
        ds = live_slot(dep);
      }
      dirty_pending(ds, now);  // its start moves with this finish
    }
  }, [&](uint32_t bs, uint8_t L) {
    // A group linked as a whole: as above for each edge, told at once while it waits; a
    // simulated one whose start moves comes apart, edge by edge (false).
    Record& d = records_[bs];
    if (d.dirty) {
      if (d.phase == Phase::pending) group_deps_done(bs, L, now);
      return true;
    }
    return r.has_old && now == r.old_finish;
  });
}

// Every dirty dependent still waiting was scheduled before this announcement, so it counted
// this event.
void Simulator::clean_finished(uint32_t slot, Time now) {
  Record& r = records_[slot];
  r.finish_announced = true;
  for_each_dependent(r, [&](EventId dep) {
    const uint32_t ds = live_slot(dep);
    if (ds == kRetired) return;
    Record& d = records_[ds];
    if (!d.dirty || d.phase != Phase::pending) return;
    if (d.group != kNoGroup) return member_dep_done(ds, dep, now);
    if (d.waiting == 0) return;
    d.ready = std::max(d.ready, now);
    if (--d.waiting == 0) push_start(d.ready, ds);
  }, [&](uint32_t bs, uint8_t L) {
    const Record& d = records_[bs];
    if (d.dirty && d.phase == Phase::pending) group_deps_done(bs, L, now);
    return true;
  });
}

// At a clean event's old start: a dependency still unfinished means it cannot start then.
void Simulator::dep_check(uint32_t slot, Time now) {
  const Record& r = records_[slot];
  if (r.dirty) return;
  if (r.group != kNoGroup) return report_group_reached("dep_check");
  for (EventId dep : r.deps) {
    const uint32_t ds = live_slot(dep);
    if (ds == kRetired) continue;
    const Record& d = records_[ds];
    if (d.dirty && d.phase != Phase::done) {
      dirty_pending(slot, now);
      return;
    }
  }
}

void Simulator::on_rate(uint32_t slot, double rate, Time now) {
  Record& r = records_[slot];
  double remaining = static_cast<double>(r.bytes);
  if (r.segments.empty()) {
    r.segments.push_back(Segment{now, rate, remaining});
  } else {
    Segment& last = r.segments.back();
    if (last.t == now) {
      last.rate = rate;
      remaining = last.remaining;
    } else {
      remaining = std::max(0.0, last.remaining - last.rate * (now - last.t));
      r.segments.push_back(Segment{now, rate, remaining});
      if (r.segments.size() >= r.trim_at) trim_segments(r);
    }
  }
  const Time due = now + remaining / rate;  // what transfer_end_due() computes from the segment
  if (due < r.end_queued) {
    if (r.end_queued != std::numeric_limits<Time>::infinity()) note_stale_end();
    queue_transfer_end(r, slot, due);
  }
}

// A rollback's flows speed up as their neighbours leave: 44% of its queue items (373 of 855 ten
// events back on the rollback benchmark) were transfer ends gone stale, each moved down the
// buckets and popped like a live one. Once they are a third of the queue, one pass drops them
// all (a third and at least 16: 0.924 M instructions a rollback ten back; half and 64: 0.942 M;
// a sixth: 0.934 M).
void Simulator::note_stale_end() {
  constexpr size_t kLeast = 16;  // a handful is cheaper to pop than to sweep for
  if (++stale_ends_ < kLeast || 3 * stale_ends_ < queue_.size()) return;
  const size_t before = queue_.size();
  queue_.filter([this](const QueueItem& item) {
    return item.kind != kTransferEnd || records_[item.target].version == item.version;
  });
  stale_dropped_ += before - queue_.size();
  stale_ends_ = 0;
}

// The new item is the live one: any earlier one (due later) goes stale.
void Simulator::queue_transfer_end(Record& r, uint32_t slot, Time due) {
  ++r.version;
  r.end_queued = due;
  push(due, slot, kTransferEnd);
}

// The live kTransferEnd item fired: the transfer ends now, unless its rate dropped since the
// item was queued (on_rate() queues nothing then), in which case the item moves on to the end.
void Simulator::transfer_end_due(uint32_t slot, Time now) {
  Record& r = records_[slot];
  const Segment& s = r.segments.back();
  const Time due = s.t + s.remaining / s.rate;
  if (due > now) {
    queue_transfer_end(r, slot, due);
    return;
  }
  r.end_queued = std::numeric_limits<Time>::infinity();
  end_transfer(slot, now);
}

// ---------------------------------------------------------------------------------------------
// Clean events joining the sweep

void Simulator::mark_dirty(Record& r, uint32_t slot, Time now, const Route& route) {
  r.dirty = true;
  r.has_old = true;  // its start and transfer end stay the old ones until the sweep reaches it
  r.old_finish = r.finish;
  ++r.version;  // any announcement of its old finish is void
  r.end_queued = std::numeric_limits<Time>::infinity();
  ++replayed_;
  dirty_.push_back(slot);
  if (r.indexed)
    for (int i = 0; i < route.count; ++i) add_clean(route.links[i], false);
  // Clean dependents started at their old start on the strength of this event's old finish.
  for (EventId dep : r.dependents) {
    uint32_t ds = live_slot(dep);
    if (ds == kRetired) continue;
    if (records_[ds].group != kNoGroup && !records_[ds].dirty) {
      split(ds, now);  // a simulated group: its member's check is its own
      ds = live_slot(dep);
    }
    const Record& d = records_[ds];
    if (!d.dirty) push(std::max(now, d.start), ds, kDepCheck);
  }
}

// A clean flow that started before `now` and moves bytes beside dirty work on one of its links.
void Simulator::dirty_moving(uint32_t slot, Time now) {
  Record& r = records_[slot];
  if (r.group != kNoGroup) return report_group_reached("dirty_moving");
  const Route route = route_of(r);
  mark_dirty(r, slot, now, route);
  note_presence(route, now);
  // Its old transfer from now on is a ghost: the flows that shared links with it then must
  // join the sweep as well. While the flow moves, its own presence holds its links: the ghost
  // starts only if the new transfer ends before the old one (end_transfer()). Most joined flows
  // end when they did or later, and their ghost's items were an eighth of a rollback's queue.
  r.ghost_deferred = true;
  // It goes on at the rate it had just before now; at the sweep's first instant, at the one it
  // had from now on (the old allocation at now, which the solver adopts).
  if (first_instant_) {
    while (!r.segments.empty() && r.segments.back().t > now) r.segments.pop_back();
  } else {
    while (!r.segments.empty() && r.segments.back().t >= now) r.segments.pop_back();
  }
  r.phase = Phase::moving;
  const Segment s = r.segments.back();  // it started before now, so this exists
  // Its presence was noted above (attach_dirty() would find every link present now).
  split_claims(route, now);
  if (first_instant_) solver_.attach_known(slot, route, s.rate);
  else solver_.attach(slot, route, s.rate, /*touch=*/true);
  queue_transfer_end(r, slot, std::max(now, s.t + s.remaining / s.rate));
}

// A clean event not started yet at `now` whose start can move: it waits for its dependencies
// again.
void Simulator::dirty_pending(uint32_t slot, Time now) {
  Record& r = records_[slot];
  if (r.group != kNoGroup) return report_group_reached("dirty_pending");
  // (A pinned flow started before `now` on dependencies final then: none is expected here.)
  if (solver_.pinned(slot)) {
    solver_.detach(slot, /*touch=*/true);
    ++pin_stamp_[slot];  // its kPin item is void
  }
  const Route route = route_of(r);
  mark_dirty(r, slot, now, route);
  // Its old transfer (start and transfer_end are still the old ones) is a ghost.
  const bool ghost = r.kind == EventKind::flow && r.bytes > 0 && r.transfer_end > r.start;
  if (first_instant_ && r.start == now && !r.segments.empty() && r.segments.front().t == now)
    restarts_.emplace_back(slot, r.segments.front().rate);
  r.segments.clear();
  r.trim_at = 8;
  r.phase = Phase::pending;
  schedule_if_ready(slot, now);
  // Joined at its old start and starting again within this instant (a flow the watch caught as
  // it starts, or one starting beside the late flow): its link indexes keep its entry, which
  // begin() would write again where it stands (every reader of an index skips dirty entries).
  // And from its start on, its own presence holds the links its ghost would, so the ghost is
  // deferred as a moving flow's is (dirty_moving()); a start is handled before a ghost's begin at
  // one instant, so presence is the same at every point of the sweep. (Nearly every pending join
  // on the rollback benchmark: 97 of a rollback's ~830 queue items 10 events back were these
  // ghosts' begins and ends.)
  const bool again_now = r.start == now && r.waiting == 0 && r.ready <= now;
  if (r.indexed && !again_now) index_erase(slot, r, route);
  if (!ghost) return;
  if (again_now) {
    r.ghost_deferred = true;
    return;
  }
  push(r.start, slot, kGhostBegin);
  push(r.transfer_end, slot, kGhostEnd);
}

// A link where no clean flow moves at `now` or starts later (a ring's usual case: the previous
// flows on it are done) has nothing to pull in and nothing to watch: it is settled here rather
// than queued for pull_in().
void Simulator::note_presence(const Route& route, Time now) {
  for (int i = 0; i < route.count; ++i) {
    const LinkId id = route.links[i];
    if (present(id)) continue;
    if (!may_hold_clean_flows(id, now) && !may_hold_clean_groups(links_[id], now)) {
      void_watch(id);  // no watch is needed
      continue;
    }
    presence_work_.push_back(id);
  }
}

void Simulator::attach_dirty(uint32_t slot, const Route& route, double rate, Time now) {
  split_claims(route, now);
  note_presence(route, now);
  solver_.attach(slot, route, rate, /*touch=*/true);
}

void Simulator::adopt_first_instant() {
  first_instant_ = false;
  if (!restarts_.empty()) first_usable_ = false;  // a noted flow did not start again
  restarts_.clear();
  solver_.adopt_known(first_usable_);
}

// Dirty work just appeared on these links: every clean flow moving on them joins the sweep,
// and a watch catches the clean flows that start on them later.
void Simulator::pull_in(Time now) {
  while (!presence_work_.empty()) {
    const LinkId id = presence_work_.back();
    presence_work_.pop_back();
    const LinkIndex& li = links_[id];
    if (!may_hold_clean_flows(id, now) && !may_hold_clean_groups(li, now)) {
      // No clean flow moves here now or starts later (a ring's usual case: the previous flows
      // on this link are done): nothing to pull in, nothing to watch, no index entry to read.
      void_watch(id);
      continue;
    }
    // A simulated group moving here becomes its members first: they join as flows.
    if (may_hold_clean_groups(li, now)) split_groups_on(id, now, /*exactly_now=*/false);
    auto& v = link_starts_[id].by_start;
    const Time oldest = now - link_starts_[id].max_duration;
    auto* const after = v.upper_bound(std::make_pair(now, kRetired));
    starting_.clear();
    for (auto* it = after; it != v.begin();) {
      --it;
      if (it->first < oldest) break;
      const Record& c = records_[it->second];
      if (!c.dirty && c.transfer_end > now) starting_.push_back(it->second);
    }
    if (starting_.empty()) {
      watch_from(id, after, now);  // nothing joined, so the index is as it was
      continue;
    }
    for (uint32_t slot : starting_) join(slot, now);
    watch(id, now);
  }
}

// A clean flow moving (or starting) beside dirty work. One that started before now did so on
// dependencies that were final then; one starting right now goes back through its dependencies,
// since one of them may be late.
void Simulator::join(uint32_t slot, Time now) {
  if (records_[slot].dirty || solver_.pinned(slot)) return;
  const Record& r = records_[slot];
  if (r.start < now && !r.segments.empty()) {
    if (pinning() && r.group == kNoGroup) pin(slot, now);
    else dirty_moving(slot, now);
  } else {
    dirty_pending(slot, now);
  }
}

// Its rate at `now` in the old history: the segment in force then (from now on).
void Simulator::pin(uint32_t slot, Time now) {
  const Record& r = records_[slot];
  const Route route = route_of(r);
  size_t k = r.segments.size() - 1;
  while (k > 0 && r.segments[k].t > now) --k;
  split_claims(route, now);
  solver_.attach_pinned(slot, route, r.segments[k].rate);
  ++pins_;
  ++sweep_pins_;
  push_pin_step(r, slot, now);
}

void Simulator::push_pin_step(const Record& r, uint32_t slot, Time now, Time recheck) {
  Time next = std::min(r.transfer_end, recheck);
  for (const Segment& s : r.segments)
    if (s.t > now) {
      next = std::min(next, s.t);
      break;
    }
  if (pin_stamp_.size() <= slot) {
    pin_stamp_.resize(records_.size(), 0);
    pin_next_.resize(records_.size(), 0);
  }
  pin_next_[slot] = next;
  push(next, slot, kPin, ++pin_stamp_[slot]);
}

// At a boundary of its old history, at its old transfer end, or where the link that vouched for
// it changes in the old history: it moves on, or leaves, and is checked again.
void Simulator::pin_step(uint32_t slot, Time now) {
  const Record& r = records_[slot];
  if (!solver_.pinned(slot)) return;  // released
  if (now >= r.transfer_end) {
    solver_.detach(slot, /*touch=*/true);  // its old transfer end
    return;
  }
  size_t k = r.segments.size() - 1;
  while (k > 0 && r.segments[k].t > now) --k;
  solver_.set_pinned_rate(slot, r.segments[k].rate);
  solver_.verify(slot);
  push_pin_step(r, slot, now);
}

bool Simulator::old_bottleneck(LinkId id, uint32_t slot, double rate, Time now) {
  constexpr double kEps = 1e-12;  // rounding, as the solver's checks
  constexpr size_t kMostRead = 32;  // index entries; past them the link is not vouched for
  // A dirty group holds its links without the solver (its claim): where groups ever claimed
  // one, no link is vouched for this way.
  if (claimed_ || may_hold_clean_groups(links_[id], now)) return false;
  LinkStarts& ls = link_starts_[id];
  const Time oldest = now - ls.max_duration;
  StartIndex& v = ls.by_start;
  double sum = 0, top = 0;
  bool self = false;
  auto* const after = v.upper_bound(std::make_pair(now, kRetired));
  // Until the old history changes here (a flow starts, moves to its next segment, or ends).
  Time until = after != v.end() ? after->first : std::numeric_limits<Time>::infinity();
  size_t read = 0;
  for (auto* it = after; it != v.begin();) {
    --it;
    if (it->first < oldest) break;
    if (++read > kMostRead) return false;
    const Record& c = records_[it->second];
    if (c.dirty || c.transfer_end <= now || c.segments.empty()) continue;
    size_t k = c.segments.size() - 1;
    while (k > 0 && c.segments[k].t > now) --k;
    const double r = c.segments[k].rate;
    sum += r;
    top = std::max(top, r);
    self |= it->second == slot;
    until = std::min(until, k + 1 < c.segments.size() ? c.segments[k + 1].t : c.transfer_end);
  }
  const double capacity = topology_.links()[id].capacity;
  if (!(self && sum >= capacity * (1 - kEps) && rate >= top * (1 - kEps))) return false;
  // Vouched for until then: checked again there.
  if (until < pin_next_[slot]) push_pin_step(records_[slot], slot, now, until);
  return true;
}

// As dirty_moving(), for a flow already attached (at the rate its old history has from now on,
// which the next solve() fills again: it is an arrival there).
void Simulator::unpin(uint32_t slot, Time now) {
  Record& r = records_[slot];
  const Route route = route_of(r);
  mark_dirty(r, slot, now, route);
  ++pin_stamp_[slot];  // its kPin item is void
  ++sweep_unpins_;
  note_presence(route, now);
  r.ghost_deferred = true;
  while (r.segments.size() > 1 && r.segments.back().t > now) r.segments.pop_back();
  r.phase = Phase::moving;
  const Segment s = r.segments.back();
  queue_transfer_end(r, slot, std::max(now, s.t + s.remaining / s.rate));
}

void Simulator::watch(LinkId id, Time now) {
  watch_from(id, link_starts_[id].by_start.upper_bound(std::make_pair(now, kRetired)), now);
}

// The watch fires at the first start of a clean flow, or of a clean group holding the link.
void Simulator::watch_from(LinkId id, const StartIndex::Entry* it, Time now) {
  void_watch(id);
  LinkIndex& li = links_[id];
  Time at = std::numeric_limits<Time>::infinity();
  if (li.flags & kHasClean) {
    for (; it != link_starts_[id].by_start.end(); ++it) {
      if (!records_[it->second].dirty) {
        at = it->first;
        break;
      }
    }
  }
  if (li.group_bound > now) at = std::min(at, next_group_start(id, now));
  if (at != std::numeric_limits<Time>::infinity()) {
    li.flags |= kWatchLive;
    push(at, id, kWatch, link_starts_[id].watch_stamp);
  }
}

void Simulator::watch_fired(LinkId id, uint32_t stamp, Time now) {
  if (stamp != link_starts_[id].watch_stamp) return;
  if (!present(id)) {
    void_watch(id);  // nothing dirty here any more; the next presence starts a new watch
    return;
  }
  // A simulated group starting here now becomes its members first: they join as flows.
  if (links_[id].group_bound >= now) split_groups_on(id, now, /*exactly_now=*/true);
  StartIndex& index = link_starts_[id].by_start;
  auto it = index.lower_bound(std::make_pair(now, uint32_t{0}));
  starting_.clear();
  for (; it != index.end() && it->first == now; ++it)
    if (!records_[it->second].dirty) starting_.push_back(it->second);
  for (uint32_t slot : starting_) join(slot, now);
  watch(id, now);
}

void Simulator::collect_groups(LinkId link, Time now, bool exactly_now) {
  starting_.clear();
  const std::span<const LazyStartIndex::Entry> v = sorted_groups();
  if (exactly_now) {
    auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(now, uint32_t{0}));
    for (; it != v.end() && it->first == now; ++it) {
      const Record& c = records_[it->second];
      if (!c.dirty && group_holds(c.group, link)) starting_.push_back(it->second);
    }
    return;
  }
  const Time oldest = now - group_max_duration_;
  for (auto it = std::upper_bound(v.begin(), v.end(), std::make_pair(now, kRetired)); it != v.begin();) {
    --it;
    if (it->first < oldest) break;
    const Record& c = records_[it->second];
    if (!c.dirty && c.transfer_end > now && group_holds(c.group, link))
      starting_.push_back(it->second);
  }
}

Time Simulator::next_group_start(LinkId link, Time now) {
  const Time last = links_[link].group_bound;  // (a start comes before its transfer's end)
  const std::span<const LazyStartIndex::Entry> v = sorted_groups();
  auto it = std::upper_bound(v.begin(), v.end(), std::make_pair(now, kRetired));
  for (; it != v.end() && it->first <= last; ++it) {
    const Record& c = records_[it->second];
    if (!c.dirty && group_holds(c.group, link)) return it->first;
  }
  return std::numeric_limits<Time>::infinity();
}

bool Simulator::split_groups_on(LinkId link, Time now, bool exactly_now) {
  collect_groups(link, now, exactly_now);
  return split_groups(starting_, now);
}

void Simulator::index_insert(uint32_t slot, const Record& r, const Route& route) {
  Record& rec = records_[slot];
  rec.indexed = true;
  for (int i = 0; i < route.count; ++i) {
    auto& v = link_starts_[route.links[i]].by_start;
    const auto entry = std::make_pair(r.start, slot);
    // Flows start in time order within a sweep, so this is nearly always an append.
    if (v.empty() || !(entry < v.back())) v.push_back(entry);
    else v.insert(v.upper_bound(entry), entry);
  }
}

void Simulator::index_erase(uint32_t slot, const Record& r, const Route& route) {
  for (int i = 0; i < route.count; ++i) {
    auto& v = link_starts_[route.links[i]].by_start;
    const auto it = v.find(std::make_pair(r.start, slot));
    if (it != v.end()) v.erase(it);
    if (!r.dirty) add_clean(route.links[i], false);
  }
  records_[slot].indexed = false;
}

void Simulator::count_clean(const Record& r, const Route& route) {
  for (int i = 0; i < route.count; ++i) {
    add_clean(route.links[i], true);
    LinkStarts& ls = link_starts_[route.links[i]];
    ls.max_duration = std::max(ls.max_duration, r.transfer_end - r.start);
    ls.clean_end_bound = std::max(ls.clean_end_bound, r.transfer_end);
    ls.clean_start_bound = std::max(ls.clean_start_bound, r.start);
  }
}

// Everything the sweep simulated is the new clean history.
void Simulator::finalize() {
  for (uint32_t slot : dirty_) {
    Record& r = records_[slot];
    if (r.id == kNoEvent) continue;  // a group split in the sweep: its members follow
    r.dirty = false;
    // A re-simulated event that finishes when it did keeps its entry in the finish order (its
    // stamp still matches it): most of a rollback's cone does (95% on the rollback benchmark),
    // and each pushed a second entry for the same instant, dropped later as stale.
    const bool same_finish = r.has_old && r.finish == r.old_finish && r.finish_stamp != 0;
    r.has_old = false;
    // (A group's bounds were raised as its transfer ended: end_group_transfer().)
    if (r.indexed && r.group == kNoGroup) count_clean(r, route_of(r));
    if (same_finish) continue;
    r.finish_stamp = ++stamps_;
    finish_order_.push(FinishEntry{r.finish, r.finish_stamp, slot});
    frontier_ = std::max(frontier_, r.finish);
  }
  dirty_.clear();
  group_links_.clear();
  group_links_owners_.clear();
  group_links_compact_at_ = kGroupLinksCompactMin;
  for (uint32_t slot : dead_slots_) free_slots_.push_back(slot);
  dead_slots_.clear();
  for (uint32_t slot : announced_) {
    records_[slot].finish_queued = false;
    records_[slot].finish_announced = false;
  }
  announced_.clear();
  // Stale entries (events re-simulated since) pile up in the finish order; drop them at times.
  if (finish_order_.size() > 2 * live_ + 1024) {
    finish_order_.filter([&](const FinishEntry& e) {
      return records_[e.slot].id != kNoEvent && records_[e.slot].finish_stamp == e.stamp;
    });
  }
}

// Drops segments that no sweep can reach: all but the last one starting before the floor
// (a flow re-simulated from the floor on continues from the rate in force just before it).
void Simulator::trim_segments(Record& r) {
  size_t keep_from = 0;
  while (keep_from + 1 < r.segments.size() && r.segments[keep_from + 1].t < floor_) ++keep_from;
  if (keep_from > 0)
    r.segments.erase(r.segments.begin(), r.segments.begin() + static_cast<long>(keep_from));
  r.trim_at = static_cast<uint32_t>(std::max<size_t>(8, 2 * r.segments.size()));
}

// ---------------------------------------------------------------------------------------------
// Results and reclaiming

Interval Simulator::interval(EventId id) const {
  if (!ids_.present(id)) return Interval{};  // forgotten: the engine checks known() first
  const uint32_t slot = ids_.slot(id);
  if (slot == IdTable::kRetired) return ids_.result(id);
  const Record& r = records_[slot];
  return Interval{r.start, r.finish};
}

// What retire() reads lies far behind the sweep (a large ring keeps hundreds of thousands of
// events behind the floor): the first line of the record, its links' indexes and their first
// entries, each a cache miss from memory when taken one after the other. The batch is known up
// front, so those lines are prefetched a few events ahead, in stages (the record first; once it
// is in cache, what it points to), and their latencies overlap. Only reads ahead: retiring
// stays in finish order.
void Simulator::reclaim(Time floor) {
  if (!(floor > floor_)) return;
  floor_ = floor;
  retiring_.clear();
  while (!finish_order_.empty() && finish_order_.top().t < floor_) {
    retiring_.push_back(finish_order_.top());
    finish_order_.pop();
  }
  constexpr size_t kRecordAhead = 24, kLinksAhead = 16, kFrontsAhead = 8;
  static_assert(kLinksAhead < std::tuple_size_v<decltype(retiring_routes_)>);
  auto route_at = [&](size_t i) -> Route& { return retiring_routes_[i % retiring_routes_.size()]; };
  const size_t n = retiring_.size();
  // The first events' routes, which no earlier iteration prepared.
  for (size_t i = 0; i < std::min(n, kLinksAhead); ++i) prefetch_links(retiring_[i].slot, route_at(i));
  for (size_t i = 0; i < n; ++i) {
    if (i + kRecordAhead < n) {
      // Both lines retire() and prefetch_links() read (the group index is in line 1); kept in
      // the caches: the slot goes to the free list, and the next submission writes it.
      const char* p = reinterpret_cast<const char*>(&records_[retiring_[i + kRecordAhead].slot]);
      __builtin_prefetch(p);
      __builtin_prefetch(p + 64);
    }
    if (i + kLinksAhead < n) prefetch_links(retiring_[i + kLinksAhead].slot, route_at(i + kLinksAhead));
    if (i + kFrontsAhead < n) prefetch_fronts(retiring_[i + kFrontsAhead].slot, route_at(i + kFrontsAhead));
    const FinishEntry& e = retiring_[i];
    const Record& r = records_[e.slot];
    if (r.id != kNoEvent && r.finish_stamp == e.stamp) retire(e.slot, route_at(i));
  }
}

// A stale entry's record may be anything (even free): its route is only a hint for prefetching,
// and retire() does not run for it.
// A group's stages are its entry, then (only for a group whose members are retired one by one,
// FlowGroup::handle) its members' lines and its first member's id (the record's id: members'
// ids are handed out in call order, so the others mostly share its lines). A group retired
// through its handle reads neither: a 4096-GPU ring retires its groups ~180 steps after their
// sweep, when both come from memory.
void Simulator::prefetch_links(uint32_t slot, Route& route) const {
  const Record& r = records_[slot];
  route.count = 0;
  if (r.group != kNoGroup) {
    // Both lines of the entry: prefetch_fronts() reads its arrays (line 1), reset_group()
    // writes both, and the next submission takes the entry first (LIFO).
    const char* p = reinterpret_cast<const char*>(&groups_[r.group]);
    __builtin_prefetch(p, 1);
    __builtin_prefetch(p + 64, 1);
    return;
  }
  if (!r.indexed) return;
  route = route_of(r);
  for (int i = 0; i < route.count; ++i) {
    __builtin_prefetch(&links_[route.links[i]]);
    __builtin_prefetch(&link_starts_[route.links[i]]);
  }
}

void Simulator::prefetch_fronts(uint32_t slot, const Route& route) const {
  if (route.count == 0) {
    const Record& r = records_[slot];
    if (r.group == kNoGroup) return;
    const FlowGroup& g = groups_[r.group];
    if (g.handle == FlowGroup::kNoHandle) {  // its members are retired one by one
      constexpr size_t kMostLines = 8;
      const char* p = reinterpret_cast<const char*>(g.members.data());
      const size_t bytes = std::min(g.members.size() * sizeof(FlowGroup::Member), kMostLines * 64);
      for (size_t line = 0; line < bytes; line += 64) __builtin_prefetch(p + line, 0, 0);
      ids_.prefetch(r.id);
    } else {
      ids_.prefetch_handle(g.handle);
    }
    // The entry goes to the free list and the next step's groups take it first (LIFO): the
    // list of dependents it keeps, which retire_group() does not read, is written as soon as
    // it is reused (its scheduling arrays went back to the pool as it started, and its members
    // and dependencies go back to the LogPool untouched).
    fetch_lines(g.dependents.data(), g.dependents.capacity() * sizeof(FlowGroup::Dependent));
    return;
  }
  for (int i = 0; i < route.count; ++i) {
    const StartIndex& index = link_starts_[route.links[i]].by_start;
    if (!index.empty()) __builtin_prefetch(index.begin(), 0, 0);
  }
}

// Reads only the record's first line (and, with a timeline, the rest). Its neighbours keep
// their references to it (live_slot() finds it retired); allocate_slot() clears the record when
// the slot is used again.
void Simulator::retire(uint32_t slot, const Route& route) {
  Record& r = records_[slot];
  if (r.group != kNoGroup) {
    retire_group(slot);
    return;
  }
  ids_.retire(r.id, Interval{r.start, r.finish});
  if (record_timeline_) {
    retired_timeline_.push_back(timeline_entry(r, notes_[slot].label, notes_[slot].carried));
    notes_[slot] = TimelineNote{};
  }
  if (r.indexed) index_erase(slot, r, route);
  r.id = kNoEvent;
  free_slots_.push_back(slot);
  --live_;
}

Engine::Stats Simulator::stats() const {
  Engine::Stats s;
  s.events_submitted = ids_.last();
  s.events_live = live_;
  size_t history = records_.capacity() * sizeof(Record) + free_slots_.capacity() * sizeof(uint32_t) +
                   finish_order_.memory_bytes() + solver_.memory_bytes() +
                   queue_.memory_bytes() + fresh_.capacity() * sizeof(uint32_t) +
                   dirty_.capacity() * sizeof(uint32_t) + links_.capacity() * sizeof(LinkIndex);
  history += link_starts_.capacity() * sizeof(LinkStarts) + route_memo_.capacity() * sizeof(route_memo_[0]) +
             memo_rows_ * memo_gpus_ * sizeof(Route);
  for (const LinkStarts& ls : link_starts_) history += ls.by_start.memory_bytes();
  history += groups_by_start_.memory_bytes();
  history += group_links_.capacity() * sizeof(LinkId) + group_links_owners_.capacity() * sizeof(uint32_t);
  history += groups_.capacity() * sizeof(FlowGroup) + link_mark_.capacity() * sizeof(uint32_t);
  history += classes_.capacity() * sizeof(GroupClass) +
             (class_table_.capacity() + flow_class_.capacity() + class_members_.capacity()) * sizeof(uint32_t);
  history += flow_estimate_.capacity() * sizeof(Time);
  history += pin_stamp_.capacity() * sizeof(uint32_t) + pin_next_.capacity() * sizeof(Time);
  history += group_side_.capacity() * sizeof(GroupSide);
  for (const GroupSide& side : group_side_) history += side.memory_bytes();
  history += group_pool_.bytes() + log_pool_.bytes() + sched_pool_.bytes();
  uint64_t segments = 0;
  for (size_t slot = 0; slot < records_.size(); ++slot) {
    const Record& r = records_[slot];
    // small_vector spills to the heap once its capacity exceeds its inline elements (a free
    // slot keeps what its last event held until it is used again).
    if (r.deps.capacity() > 2) history += r.deps.capacity() * sizeof(EventId);
    if (r.dependents.capacity() > 2) history += r.dependents.capacity() * sizeof(EventId);
    if (r.segments.capacity() > 1) history += r.segments.capacity() * sizeof(Segment);
    if (r.id != kNoEvent) segments += r.segments.size();
  }
  s.flow_segments = segments;
  for (const TimelineNote& n : notes_) history += sizeof(TimelineNote) + n.label.capacity();
  s.history_bytes = history;
  s.result_bytes = ids_.bytes();
  size_t timeline = retired_timeline_.capacity() * sizeof(TimelineEntry);
  for (const TimelineEntry& t : retired_timeline_) timeline += t.label.capacity();
  s.timeline_bytes = timeline;
  s.rollbacks = rollbacks_;
  s.replayed_events = replayed_;
  s.solves = solver_.solves();
  s.solved_flows = solver_.solved_flows();
  s.group_members_apart = members_apart_;
  s.group_links = links_made_;
  s.group_links_expanded = links_expanded_;
  s.stale_items_dropped = stale_dropped_;
  s.floor = floor_;
  return s;
}

TimelineEntry Simulator::timeline_entry(const Record& r, const std::string& label, Time carried) const {
  TimelineEntry e;
  e.flow = r.kind == EventKind::flow;
  e.gpu = r.gpu;
  e.dst = r.dst;
  e.lane = r.lane;
  e.bytes = r.bytes;
  e.start = r.start;
  e.transfer_end = r.transfer_end;
  e.finish = r.finish;
  e.label = label;
  e.carried = carried;
  return e;
}

std::string Simulator::timeline_json() const {
  std::vector<TimelineEntry> entries = retired_timeline_;
  static const std::string kNoLabel;
  for (size_t slot = 0; slot < records_.size(); ++slot) {
    const Record& r = records_[slot];
    if (r.id == kNoEvent || r.phase != Phase::done) continue;
    if (r.group != kNoGroup) {
      append_member_entries(r, entries);
      continue;
    }
    if (record_timeline_) entries.push_back(timeline_entry(r, notes_[slot].label, notes_[slot].carried));
    else entries.push_back(timeline_entry(r, kNoLabel));
  }
  return chrome_trace_json(std::move(entries));
}

}  // namespace simcore::detail
