// The discrete-event simulation behind the engine, single-threaded (the engine locks around
// it). It owns the events, their rate history, and the selective rollback that makes the answer
// independent of the order in which submissions arrive.
//
// After every sync() every known event is simulated to completion ("clean"). New submissions
// are "dirty": sync() sweeps forward in virtual time from the earliest start any of them can
// have, simulating only dirty events. A clean event joins the dirty set (its outcome from that
// instant on is re-simulated) exactly when something dirty could influence it:
// - through a link: a clean flow becomes dirty at the first instant it moves bytes on a link
//   that carries a dirty flow, or that carried one in the old history (a "ghost": the old
//   transfer of a dirty flow, which had shaped the rates of the flows beside it). A moving flow
//   keeps its rate history before that instant and continues from the bytes left then. It is
//   first pinned (flow_solver.h): attached at its old rates, still clean, no presence of its
//   own, and made dirty only when the solver cannot keep its old rate (a rollback 10 events
//   back on the rollback benchmark re-simulates 39 flows, against 108 joined dirty).
// - through a dependency: a clean event whose dependency's finish moved becomes dirty and waits
//   again; one whose dependency is still unfinished (dirty) at its old start becomes dirty then.
// Everything else keeps its recorded outcome, untouched. Max-min rates depend only on the flows
// sharing links (transitively) at that instant, so the sweep reproduces what a simulation that
// knew every submission from the start would give, up to floating-point rounding; the property
// tests check this. The cost of a late submission is the size of its causal cone, not of
// everything simulated after its start.
//
// Each link keeps an index of the flows that moved bytes on it (by start time, with the longest
// transfer seen), which answers "which clean flows move on this link at time t" and "the next
// clean flow to start on it". Flow groups are in one index of their own (groups_by_start_),
// searched for a link only while the link's group bounds say a clean group may be there.
//
// reclaim(F) (F = the ranks' floor; no sweep ever starts below it) retires events finishing
// before F: their interval moves to a 16-byte result and everything else is freed; results of
// released ids go too, a chunk of ids at a time (id_table.h).
//
// Within one virtual instant all queue items of that instant are applied first (starts, ends
// of transfers, finishes, and what they release), then the flow solver re-solves once.
//
// Like flows submitted together (Engine::add_flows) may share one record as a flow group
// (flow_group.h): the group is scheduled member by member, but started, ended and finished as
// one while its members stay alike, and becomes ordinary records the moment they could differ.
#pragma once

#include <array>
#include <boost/container/small_vector.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "chunked_store.h"
#include "flow_group.h"
#include "flow_solver.h"
#include "id_list.h"
#include "id_table.h"
#include "lazy_start_index.h"
#include "radix_queue.h"
#include "start_index.h"
#include "simcore/engine.h"
#include "simcore/topology.h"
#include "timeline.h"

namespace simcore::detail {

enum class EventKind : uint8_t { flow, task };

// A validated submission (the engine checks GPUs, ids and times before it gets here).
struct NewEvent {
  EventKind kind = EventKind::task;
  int gpu = 0;  // the task's GPU, or the flow's source
  int dst = 0;  // the flow's destination
  int lane = 0;
  uint64_t bytes = 0;
  Time duration = 0;
  Time not_before = 0;
  const std::vector<EventId>* after = nullptr;
  const std::string* label = nullptr;
  Time carried = 0;  // a task's, for the timeline (TaskSpec::carried)
};

// What submit_flows() reads of a call's flows, alike from validated events and from the
// caller's FlowSpecs as they stand (the engine passes those when it has nothing to refuse or
// move: a 4096-GPU ring's step built a 56-byte event per flow, 230 KB through the cache, the
// steps' state sharing 2 MB of it).
inline bool is_flow(const NewEvent& e) { return e.kind == EventKind::flow; }
inline bool is_flow(const FlowSpec&) { return true; }
inline int src_of(const NewEvent& e) { return e.gpu; }
inline int src_of(const FlowSpec& f) { return f.src_gpu; }
inline int dst_of(const NewEvent& e) { return e.dst; }
inline int dst_of(const FlowSpec& f) { return f.dst_gpu; }
inline uint64_t bytes_of(const NewEvent& e) { return e.bytes; }
inline uint64_t bytes_of(const FlowSpec& f) { return f.bytes; }
inline Time not_before_of(const NewEvent& e) { return e.not_before; }
inline Time not_before_of(const FlowSpec& f) { return f.not_before; }
inline const std::vector<EventId>* after_of(const NewEvent& e) { return e.after; }
inline const std::vector<EventId>* after_of(const FlowSpec& f) { return &f.after; }
inline const std::string* label_of(const NewEvent& e) { return e.label; }
inline const std::string* label_of(const FlowSpec& f) { return &f.label; }
inline const NewEvent& as_event(const NewEvent& e) { return e; }
inline NewEvent as_event(const FlowSpec& f) {
  NewEvent e;
  e.kind = EventKind::flow;
  e.gpu = f.src_gpu;
  e.dst = f.dst_gpu;
  e.bytes = f.bytes;
  e.not_before = f.not_before;
  e.after = &f.after;
  e.label = &f.label;
  return e;
}

class Simulator {
 public:
  Simulator(const ClusterSpec& cluster, const EngineOptions& options);
  // The groups' pooled arrays are not released one by one: their slabs go as a whole.
  ~Simulator() {
    group_pool_.close();
    log_pool_.close();
    sched_pool_.close();
  }
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  const Topology& topology() const { return topology_; }
  EventId last_id() const { return ids_.last(); }
  // Handed out, and not forgotten (released and retired: id_table.h).
  bool known(EventId id) const { return ids_.present(id); }
  // The submitter will not name `id` again: once it is also retired, its result may go.
  void release(EventId id) { ids_.release(id); }
  Time floor() const { return floor_; }

  // `id`: one handed out ahead (submit_flows()), else a new one.
  EventId submit(const NewEvent& event, EventId id = kNoEvent);
  // Several flows (validated like submit()'s): like ones become flow groups (flow_group.h),
  // the others ordinary events. ids[k] receives events[k]'s id.
  // Event: NewEvent, or FlowSpec (flows the engine validated, their not_before at or above the
  // floor).
  template <class Event>
  void submit_flows(std::span<const Event> events, std::span<EventId> ids);
  // Simulates every submission to completion.
  void sync();
  // True when sync() cannot change this event's interval: it is simulated and finishes before
  // anything submitted since can start.
  bool settled(EventId id) const;

  // After sync() (or when settled): where an event stands.
  Interval interval(EventId id) const;
  // After sync(): retire every event finishing before `floor` (never moves the floor back).
  void reclaim(Time floor);
  // After sync(): no event finishes later than this.
  Time frontier() const { return frontier_; }

  Engine::Stats stats() const;
  std::string timeline_json() const;
  // For tests: entries in the finish order (live and stale), and the ghosts (old transfers of
  // re-simulated flows) begun so far.
  size_t finish_entries() const { return finish_order_.size(); }
  uint64_t ghosts_begun() const { return ghosts_begun_; }
  // For tests: the slabs the groups' schedules were ever given (64 KiB each), and the room the
  // list of moving groups' links ever took (entries).
  size_t schedule_slabs() const { return sched_pool_.slabs(); }
  size_t group_links_capacity() const { return group_links_.capacity(); }

 private:
  enum class Phase : uint8_t { pending, moving, tail, done };
  // Order within one instant: finishes first (they release starts); a clean event's finish is
  // announced last, once everything else at that instant had its chance to make it dirty.
  enum ItemKind : uint8_t {
    kFinish, kTransferEnd, kPin, kGhostEnd, kStart, kGhostBegin, kWatch, kDepCheck, kCleanFinish,
  };

  static constexpr uint32_t kNoGroup = std::numeric_limits<uint32_t>::max();

  struct Segment {
    Time t;            // from this time on
    double rate;       // bytes/s
    double remaining;  // bytes still to move at t
  };

  // 256 bytes, cache-line aligned. The first line holds what retire() reads (an event is retired
  // long after it was simulated, from memory, so every line it touches there is a miss); the
  // first two (which the hardware fetches as a pair) hold everything read of an older event
  // while later ones are submitted and simulated: its flags, times and dependents. The last two
  // are read while the event itself is submitted and simulated, when they are in cache anyway.
  struct alignas(64) Record {
    // Line 0.
    EventId id = kNoEvent;
    uint64_t finish_stamp = 0;  // matches its live entry in finish_order_
    Time start = 0, transfer_end = 0, finish = 0;
    int32_t gpu = 0, dst = 0;
    uint32_t version = 0;  // queue items carrying an older version are stale
    // A flow group's entry in groups_ (flow_group.h). In this line: a later step's submission
    // reads it of each dependency (submit_flows()), whose finish the queries of its step just
    // read here; in line 1 it was that submission's one cold line a group of a large ring.
    uint32_t group = kNoGroup;
    EventKind kind = EventKind::task;
    Phase phase = Phase::pending;
    bool dirty = false;      // simulated by the current sync()
    bool has_old = false;    // dirty, and simulated before: old_finish keeps that finish
    bool indexed = false;    // its transfer is in its links' indexes
    bool finish_queued = false;     // clean: the sweep will announce its finish
    bool finish_announced = false;  // clean: the sweep announced its finish
    // Joined while moving (dirty_moving()): its old transfer from then on is a ghost, which
    // starts only if its new transfer ends first (while it moves, its own presence is there).
    bool ghost_deferred = false;
    // Line 1. Dependents by id, not slot (so are dependencies): retire() does not unlink an
    // event from its neighbours (their records are as cold as its own), so a reference may
    // outlive the event; resolving it through the id table (live_slot) tells a retired one from
    // a reused slot.
    IdList dependents;
    Time lower_bound = 0;  // fresh: no earlier start is possible (where the sweep begins)
    Time ready = 0;        // scheduling: the latest dependency finish seen so far
    Time tail = 0;         // a task's duration; a flow's route latency (after its last byte)
    uint32_t waiting = 0;  // scheduling: dependencies not finished yet
    // Submitted among others (submit_flows()): when it would finish if it started as soon as
    // its dependencies' finishes (their estimates, while not simulated) allow and ran alone
    // at its route's narrowest rate; -1: not known. Only which flows form a group depends on
    // it (flow_group.h: GroupKey::bound).
    Time estimate = -1;
    // Lines 2 and 3.
    uint64_t bytes = 0;
    Time base_ready = 0;   // not_before, raised by the finishes of dependencies retired at submit
    Time old_finish = 0;
    int32_t lane = 0;
    uint32_t trim_at = 8;  // segment count at which old segments are trimmed next
    // A moving flow: the time of its live kTransferEnd item (infinity: none). A rate change
    // that moves the end later pushes nothing; the item then finds the end ahead and moves on
    // to it (a queue item per rate change, most of them stale, was a fifth of a rollback).
    Time end_queued = std::numeric_limits<Time>::infinity();
    IdList deps;
    boost::container::small_vector<Segment, 1> segments;  // flow rate history

    // Back to a new record for a reused slot, in place (assigning Record{} built and moved a
    // second one). A vector that spilled to the heap is freed: a slot keeps no old history.
    void clear() {
      if (dependents.capacity() > 2 || deps.capacity() > 2 || segments.capacity() > 1) {
        *this = Record{};
        return;
      }
      id = kNoEvent;
      finish_stamp = 0;
      start = transfer_end = finish = 0;
      gpu = dst = 0;
      version = waiting = 0;
      kind = EventKind::task;
      phase = Phase::pending;
      dirty = has_old = indexed = finish_queued = finish_announced = ghost_deferred = false;
      dependents.clear();
      lower_bound = ready = tail = 0;
      group = kNoGroup;
      estimate = -1;
      bytes = 0;
      base_ready = old_finish = 0;
      lane = 0;
      trim_at = 8;
      end_queued = std::numeric_limits<Time>::infinity();
      deps.clear();
      segments.clear();
    }
  };
  static_assert(sizeof(Record) == 256);

  // Queue order: time, then kind, then first pushed first served (radix_queue.h).
  struct QueueItem {
    Time t;
    uint32_t target;   // a slot, or a link for kWatch
    uint32_t version;  // the target's version (or watch stamp) when pushed
    ItemKind kind;
  };
  static constexpr int kItemKinds = kCleanFinish + 1;

  struct FinishEntry {
    Time t;
    uint64_t stamp;
    uint32_t slot;
    uint8_t kind = 0;
  };

  // What the sweep reads of a link for nearly every flow (a group's claim, whether anything
  // else is there, the bound of clean groups), in a quarter of a cache line; its counts, its
  // watch's stamp, the index of its flows and their bounds are beside it (LinkStarts), read
  // only when something other than a lone group is there. (A ring's step touches two links per
  // flow, every step: at 4096 GPUs the claim's read in start_group() was the largest miss of
  // the run, 256 KB a step at 32 bytes a link; 128 KB at 16.)
  struct alignas(16) LinkIndex {
    // No member of a clean group moving here ends its transfer after group_bound, nor starts
    // after it (a start comes before its transfer's end): groups have no entry here and no
    // count, and only while the bound reaches `now` need groups_by_start_ be searched. It
    // never comes down, so it stays true as entries go; a group raises it as its transfer
    // ends in its sweep.
    Time group_bound = 0;
    uint32_t claim = kNoGroup;  // the slot of the dirty flow group moving here (it is alone)
    uint32_t flags = 0;         // kHasGhosts | kHasClean | kWatchLive
  };
  static_assert(sizeof(LinkIndex) == 16);
  static constexpr uint32_t kHasGhosts = 1;  // LinkStarts::ghosts != 0
  static constexpr uint32_t kHasClean = 2;   // LinkStarts::clean != 0
  // A kWatch item with the link's current stamp may be in the queue: only then does voiding
  // the watch need its stamp raised (a stale item's stamp is below the current one).
  static constexpr uint32_t kWatchLive = 4;
  struct LinkStarts {
    StartIndex by_start;       // (start, slot) of flows (not groups: groups_by_start_), sorted
    double max_duration = 0;   // longest transfer among them (bounds the backward scan)
    // No clean flow indexed here ends its transfer after clean_end_bound or starts after
    // clean_start_bound (bounds, as the group one).
    Time clean_end_bound = 0, clean_start_bound = 0;
    uint32_t clean = 0;        // entries of clean flows (their bounds above)
    uint32_t ghosts = 0;       // old transfers of dirty flows in progress now
    uint32_t watch_stamp = 0;  // the live kWatch item's stamp
  };
  void add_ghost(LinkId id, bool up) {
    uint32_t& n = link_starts_[id].ghosts;
    n = up ? n + 1 : n - 1;
    set_flag(links_[id], kHasGhosts, n != 0);
  }
  void add_clean(LinkId id, bool up) {
    uint32_t& n = link_starts_[id].clean;
    n = up ? n + 1 : n - 1;
    set_flag(links_[id], kHasClean, n != 0);
  }
  static void set_flag(LinkIndex& li, uint32_t flag, bool on) {
    li.flags = on ? (li.flags | flag) : (li.flags & ~flag);
  }
  // Any kWatch item of the link is void from now on.
  void void_watch(LinkId id) {
    LinkIndex& li = links_[id];
    if (!(li.flags & kWatchLive)) return;
    li.flags &= ~kWatchLive;
    ++link_starts_[id].watch_stamp;
  }

  static constexpr uint32_t kRetired = std::numeric_limits<uint32_t>::max();

  uint32_t allocate_slot();
  uint32_t allocate_group();  // an index into groups_ (flow_group.cpp)
  static void take_group_state(Record& out, const Record& group);  // flow_group.cpp
  // The live record of an event, or kRetired once it is retired (or forgotten). Every sweep
  // starts at or after the floor, past the finish of every retired event, so a retired
  // dependency never holds anything back and a retired dependent cannot be reached.
  uint32_t live_slot(EventId id) const { return ids_.slot_or_retired(id); }
  void push(Time t, uint32_t target, ItemKind kind, uint32_t version);
  void push(Time t, uint32_t slot, ItemKind kind) { push(t, slot, kind, records_[slot].version); }
  void push_start(Time t, uint32_t slot);  // a kStart item
  // Every use of a route here is about sharing (solver, link indexes, presence, ghosts). A
  // re-simulated flow asks for its route five or six times (joining, its ghost's begin and end,
  // starting, finalize()): on small clusters each pair's route is built once (route_memo_).
  Route route_of(const Record& r) const {
    if (memo_gpus_ == 0) return topology_.sharing_links(r.gpu, r.dst);
    Route* row = route_memo_[static_cast<size_t>(r.gpu)].get();
    if (row == nullptr) [[unlikely]] row = memo_row(r.gpu);
    Route& m = row[r.dst];
    if (m.count < 0) m = topology_.sharing_links(r.gpu, r.dst);
    return m;
  }
  Route* memo_row(int src) const;  // route_memo_'s row for `src`, made now (every route unknown)

  // The sweep.
  void run();
  void prefetch_item(const QueueItem& item) const;
  void handle(const QueueItem& item, Time now);
  void begin(uint32_t slot, Time now);
  void end_transfer(uint32_t slot, Time now);
  void finish_after_tail(uint32_t slot, Time now);  // its transfer (or start) is at `now`
  void complete(uint32_t slot, Time now);
  void clean_finished(uint32_t slot, Time now);
  void dep_check(uint32_t slot, Time now);
  // Inlined into the solve's callback in run(): a rollback applies ~730 rate changes, each a
  // call whose saving and restoring of registers was ~20 of its ~110 instructions.
  [[gnu::always_inline]] inline void on_rate(uint32_t slot, double rate, Time now);
  void queue_transfer_end(Record& r, uint32_t slot, Time due);
  void note_stale_end();  // a live transfer-end item just went stale
  void transfer_end_due(uint32_t slot, Time now);
  void schedule_if_ready(uint32_t slot, Time now);

  // Clean -> dirty.
  void mark_dirty(Record& r, uint32_t slot, Time now, const Route& route);  // route_of(r)
  void join(uint32_t slot, Time now);
  void dirty_moving(uint32_t slot, Time now);
  void dirty_pending(uint32_t slot, Time now);
  // Pinned flows (flow_solver.h): a clean flow moving at `now` beside dirty work goes on along
  // its old history, attached to the solver at its old rates (a kPin item at each of its old
  // segment boundaries, the last one its old transfer end, where it leaves the solver), its
  // record untouched and no presence of its own. pin_step() handles the item; unpin() makes it a
  // dirty moving flow when the solver cannot keep it.
  void pin(uint32_t slot, Time now);
  // Its next item: at its next boundary after `now`, or `recheck` if earlier. Each item pushed
  // voids the ones before it (pin_stamp_).
  void push_pin_step(const Record& r, uint32_t slot, Time now, Time recheck = std::numeric_limits<Time>::infinity());
  void pin_step(uint32_t slot, Time now);
  void unpin(uint32_t slot, Time now);
  // A link without dirty work (so every flow moving there is clean and at its old rate): whether
  // it is full at `now` with flow `slot` on it and no flow faster than `rate`, read from its
  // index (false where a clean flow group may be there: groups are not in it).
  bool old_bottleneck(LinkId id, uint32_t slot, double rate, Time now);

  // Whether a clean flow or a clean group's member may move on this link at `now` or start
  // later (false: nothing there for dirty work to pull in or watch).
  bool may_hold_clean_flows(LinkId id, Time now) const {
    if (!(links_[id].flags & kHasClean)) return false;
    const LinkStarts& ls = link_starts_[id];
    return !(ls.clean_end_bound <= now && ls.clean_start_bound <= now);
  }
  static bool may_hold_clean_groups(const LinkIndex& li, Time now) { return li.group_bound > now; }
  // Link presence of dirty work (attached dirty flows + ghosts + a moving group) and the clean
  // flows it pulls in.
  // (Pinned flows are clean: they are no presence.)
  bool present(LinkId id) const {
    return dirty_loaded(id) || (links_[id].flags & kHasGhosts) || links_[id].claim != kNoGroup;
  }
  bool dirty_loaded(LinkId id) const { return solver_.attached_count() != 0 && solver_.dirty_load(id) != 0; }
  // Whether dirty flows are attached to the link in the solver. A sweep of flow groups only
  // (a ring's step) attaches none, and then no link's load need be read: 4 bytes a link, but
  // two links a flow, from a step ago.
  bool loaded(LinkId id) const { return solver_.attached_count() != 0 && solver_.load(id) != 0; }
  void note_presence(const Route& route, Time now);  // call before raising presence on `route`
  void attach_dirty(uint32_t slot, const Route& route, double rate, Time now);
  // begin() at the sweep's first instant: true when the flow went on as a known one.
  bool restart_known(uint32_t slot, const Route& route, Time now);
  // The end of the sweep's first instant, before its solve (flow_solver.h: adopt_known()).
  void adopt_first_instant();
  void pull_in(Time now);  // drains presence_work_
  void watch(LinkId id, Time now);
  // `after`: the link index's first entry > now.
  void watch_from(LinkId id, const StartIndex::Entry* after, Time now);
  void watch_fired(LinkId id, uint32_t stamp, Time now);
  void index_insert(uint32_t slot, const Record& r, const Route& route);
  void index_erase(uint32_t slot, const Record& r) { index_erase(slot, r, route_of(r)); }
  void index_erase(uint32_t slot, const Record& r, const Route& route);
  // A clean flow's entries on `route` count in its links' clean bounds.
  void count_clean(const Record& r, const Route& route);

  // Flow groups (flow_group.h).
  // `tail`: the members' route latency.
  // `estimate`: the members' Record::estimate; `deps`: how many dependencies they name.
  template <class Event>
  void submit_group(std::span<const Event> events, std::span<const uint32_t> members,
                    std::span<EventId> ids, double rate, Time tail, Time estimate, uint32_t deps);
  template <class F> void for_each_member_route(const Record& r, F&& f) const;
  // Every dependent id of an event (a group's: every member's). A link in a group's list
  // (FlowGroup::kLinkBit) is offered to whole(slot of the dependent group, link index) first:
  // true when that told the group as a whole (or had nothing to tell it); false, and the link
  // becomes its edges (expand_link()), each told to f as before.
  template <class F, class W> void for_each_dependent(Record& r, F&& f, W&& whole);
  // Links (FlowGroup::kLinkBit). link_group(): group record `slot`'s edges to members of group
  // record `ds` (just submitted; their dep_link is L) are one entry in `ds`'s list.
  // expand_link(): entry k of g's list becomes those edges again, in their order. unlink():
  // before group record `slot` comes apart, its links become their edges; expand_links():
  // before group `g` comes apart, every link in its list does (their positions are its
  // members').
  void link_group(uint32_t slot, uint32_t dep_group, uint8_t L);
  void expand_link(FlowGroup& g, size_t k);
  void unlink(uint32_t slot);
  void expand_links(FlowGroup& g);
  // The dependencies of group record `slot`'s members told through its link L finished at
  // `now`: each member is told once per such edge, as member_dep_done() would be.
  void group_deps_done(uint32_t slot, uint8_t L, Time now);
  bool has_dependents(const Record& r) const {
    return r.group == kNoGroup ? !r.dependents.empty() : !groups_[r.group].dependents.empty();
  }
  // The first two lines of an event's record (its flags, and its group).
  void prefetch_record(EventId id) const {
    const uint32_t slot = ids_.slot_or_retired(id);
    if (slot == kRetired) return;
    const char* p = reinterpret_cast<const char*>(&records_[slot]);
    __builtin_prefetch(p, 1);
    __builtin_prefetch(p + 64, 1);
  }
  void prefetch_dependent(EventId dep) const {
    const uint32_t ds = ids_.slot_or_retired(dep);
    if (ds == kRetired) return;
    const Record& d = records_[ds];
    if (d.group == kNoGroup) {
      __builtin_prefetch(&d, 1);
      return;
    }
    // A scheduled member is told through its scheduling state alone (member_dep_done()); a
    // simulated group's member is split out (member_record() reads the member).
    const FlowGroup& g = groups_[d.group];
    const uint32_t j = ids_.member(dep);
    if (d.dirty && j < g.sched.size()) __builtin_prefetch(&g.sched[j], 1);
    else __builtin_prefetch(&g.members[j], 1);
  }
  // `dependent` depends on `dep`, whose record is in `ds`.
  void add_dependent(uint32_t ds, EventId dep, EventId dependent) {
    Record& d = records_[ds];
    if (d.group == kNoGroup) {
      d.dependents.push_back(dependent);
      return;
    }
    FlowGroup& g = groups_[d.group];
    // Once, for two a member (a ring step's), not one allocation per doubling.
    if (g.dependents.capacity() == 0) g.dependents.reserve(group_pool_, 2 * g.members.size());
    g.dependents.push_back(group_pool_, FlowGroup::Dependent{dependent, ids_.member(dep)});
  }
  // Moves the entries of group `g`'s members at `positions` out of its list: each to
  // sink(i, id) for the member at positions[i], in the list's order (each member's own order
  // kept).
  template <class F> void take_dependents(FlowGroup& g, const std::vector<uint32_t>& positions, F&& sink);
  // Scheduling: whether `dep` holds its dependent back at `now` (else `ready` takes its finish).
  bool dep_waits(EventId dep, Time now, Time& ready);
  void schedule_group(uint32_t slot, Time now);
  // A group scheduled lazily (FlowGroup::sched_lazy): its members' scheduling state written now.
  void materialize_schedule(FlowGroup& g, const Record& r);
  // A dependency of group member `member` finished (or was announced) at `now`.
  void member_dep_done(uint32_t slot, EventId member, Time now);
  void member_ready(uint32_t slot, Time t);
  void begin_group(uint32_t slot, Time now);
  void start_group(uint32_t slot, Time now);  // every member is ready now
  // The group's transfer ended: its claims go and its links' group bounds take it in.
  void end_group_transfer(uint32_t slot);
  void release_claims(uint32_t slot);
  // Member j of the group in `slot` as an ordinary record (its id rebound), and members at
  // `positions` as a group of their own; both leave the record's times as the group's.
  uint32_t member_record(uint32_t slot, uint32_t j);
  uint32_t extract(uint32_t slot, const std::vector<uint32_t>& positions);
  // The group in `slot` becomes its members, in its state, at `now` (in a sweep, or before one).
  void split(uint32_t slot, Time now);
  // A flow is about to move on `route`: a group holding one of its links is split first.
  void split_claims(const Route& route, Time now);
  // Splits the simulated groups among `slots`; true if any.
  bool split_groups(const std::vector<uint32_t>& slots, Time now);
  // Simulated groups holding `link` (groups_by_start_), into starting_: the ones moving at
  // `now` (started by then, transfer ending after), or with `exactly_now`, the ones starting
  // at `now`.
  void collect_groups(LinkId link, Time now, bool exactly_now);
  // The start of the first simulated group holding `link` that starts after `now` (infinity:
  // none).
  Time next_group_start(LinkId link, Time now);
  // Splits the simulated groups on `link` that collect_groups() finds, so that their members
  // are in the link's index; true if any.
  bool split_groups_on(LinkId link, Time now, bool exactly_now);
  // Whether a member of the group moves on `link`.
  bool group_holds(uint32_t gi, LinkId link) const;
  // Group gi's side state (flow_group.h), made when first asked for.
  GroupSide& side(uint32_t gi) const {
    if (gi >= group_side_.size()) group_side_.resize(groups_.size());
    return group_side_[gi];
  }
  // Entry gi empty again, for the next group (its side state too, where it has one).
  void reset_group(uint32_t gi) {
    groups_[gi].reset(group_pool_, log_pool_, sched_pool_);
    if (gi < group_side_.size()) group_side_[gi].reset();
  }
  // groups_by_start_: an entry is live while its slot holds a group that moved then.
  bool group_entry_live(const LazyStartIndex::Entry& e) const {
    const Record& r = records_[e.second];
    return r.group != kNoGroup && r.indexed && r.start == e.first;
  }
  void unindex_group(Record& r) {
    r.indexed = false;
    groups_by_start_.erase([this](const LazyStartIndex::Entry& e) { return group_entry_live(e); });
  }
  std::span<const LazyStartIndex::Entry> sorted_groups() {
    return groups_by_start_.sorted([this](const LazyStartIndex::Entry& e) { return group_entry_live(e); });
  }
  void report_group_reached(const char* where) const;
  void retire_group(uint32_t slot);
  void append_member_entries(const Record& r, std::vector<TimelineEntry>& out) const;

  void finalize();
  void retire(uint32_t slot, const Route& route);  // `route`: its links, when indexed
  // reclaim()'s stages ahead of retire(): its link indexes (and its route, kept in `route`
  // for the later stages; count 0 when it is not indexed), then their first entries.
  void prefetch_links(uint32_t slot, Route& route) const;
  void prefetch_fronts(uint32_t slot, const Route& route) const;
  // Fetches the first lines (up to four) of a block that is about to be written.
  static void fetch_lines(const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    for (size_t line = 0; line < std::min<size_t>(bytes, 4 * 64); line += 64) __builtin_prefetch(p + line, 1);
  }
  void trim_segments(Record& r);
  TimelineEntry timeline_entry(const Record& r, const std::string& label, Time carried = 0) const;

  Topology topology_;
  // Routes by (source, destination) for clusters of up to kRouteMemoGpus GPUs (count -1: not
  // built yet); empty above (a large cluster's table would outgrow the caches it is meant to
  // save a trip through, and its flows rarely share a pair). A row per source GPU, made when a
  // route from it is first asked for: the whole table written up front was 2.6 MB of fresh pages
  // at 256 GPUs (0.9 ms, ~7% of a 256-GPU ring, whose flow groups never ask; 0.2 ms at 128).
  static constexpr int kRouteMemoGpus = 256;
  size_t memo_gpus_ = 0;
  mutable std::vector<std::unique_ptr<Route[]>> route_memo_;
  mutable size_t memo_rows_ = 0;  // rows made
  FlowSolver solver_;
  bool record_timeline_;

  ChunkedStore<Record> records_;
  // What the timeline writes of an event besides its record, by slot, only with record_timeline_.
  struct TimelineNote {
    std::string label;
    Time carried = 0;  // a task's (TaskSpec::carried)
  };
  std::vector<TimelineNote> notes_;
  std::vector<uint32_t> free_slots_;
  IdTable ids_;                      // slot by id, or the final interval once retired
  std::vector<TimelineEntry> retired_timeline_;
  std::vector<LinkIndex> links_;
  std::vector<LinkStarts> link_starts_;  // by link, beside links_

  std::vector<uint32_t> fresh_;
  std::vector<uint32_t> dirty_;      // everything simulated by the current sync()
  std::vector<LinkId> presence_work_;
  std::vector<uint32_t> announced_;  // clean events whose finish the sweep will announce
  std::vector<uint32_t> starting_;   // scratch for watch_fired()
  Time rewind_to_ = std::numeric_limits<Time>::infinity();
  // The sweep's first instant, while the solver held nothing before it, starts from the old
  // allocation at that instant (flow_solver.h: adopt_known()): a clean flow moving then joins
  // at its old rate from then on, untouched (dirty_moving()), and one whose old transfer began
  // then and that starts again then does so at its old first rate (restarts_: slot and rate,
  // noted by dirty_pending(), taken by begin()). The solver adopts that allocation at the end of
  // the instant unless something there keeps it from being the old one (first_usable_ false: a
  // flow group came apart, or a noted flow did not start again). A rollback's first instant
  // pulls in the whole component in flight beside the late flow (~120 flows on the rollback
  // benchmark): re-solved from scratch, every one of them was filled again.
  bool first_instant_ = false, first_usable_ = true;
  bool pin_ok_ = false;  // incremental solver (full mode fills every flow at every instant)
  // Pins and unpins in the sweep under way. Where the late work reaches most of what it touches
  // (dense traffic of large flows: nearly every pinned flow unpinned again, 1.8x the rollback's
  // time of joining them dirty), the rest of the sweep joins flows dirty.
  uint32_t sweep_pins_ = 0, sweep_unpins_ = 0;
  bool pinning() const { return pin_ok_ && (sweep_pins_ < kPinTrial || 2 * sweep_unpins_ < sweep_pins_); }
  static constexpr uint32_t kPinTrial = 32;
  std::vector<std::pair<uint32_t, double>> restarts_;
  RadixQueue<QueueItem, kItemKinds> queue_;
  size_t stale_ends_ = 0;  // stale kTransferEnd items in queue_, about (note_stale_end())
  RadixQueue<FinishEntry, 1> finish_order_;
  std::vector<FinishEntry> retiring_;  // scratch for reclaim()
  std::array<Route, 32> retiring_routes_{};  // reclaim(): routes by position, modulo 32
  uint64_t stamps_ = 0;

  GroupPool group_pool_;  // before groups_: destroyed after them
  LogPool log_pool_;      // a group's members, deps and dep_link (flow_group.h)
  LogPool sched_pool_;    // a group's sched and ready (flow_group.h)
  ChunkedStore<FlowGroup, 6> groups_;  // by index; an entry never moves
  // (start, slot) of every group that moved (dirty or clean), sorted when searched; and the
  // longest transfer of a clean one (bounds the backward scan).
  LazyStartIndex groups_by_start_;
  double group_max_duration_ = 0;
  mutable std::vector<GroupSide> group_side_;  // by group index, as far as one was asked for
  std::vector<LinkId> group_links_;  // the links of the groups started in this sweep (flow_group.h)
  // The groups that started in this sweep with their links in group_links_, in the order of
  // their ranges there: compact_group_links() keeps only the ranges of groups still moving (a
  // range is read until the group's transfer ends), once the list has grown to
  // group_links_compact_at_. A ring submitted whole is one sweep: the list grew to every
  // member's links, 16 bytes a flow, where a few steps' groups move at once.
  std::vector<uint32_t> group_links_owners_;
  size_t group_links_compact_at_ = kGroupLinksCompactMin;
  static constexpr size_t kGroupLinksCompactMin = size_t{1} << 15;
  void compact_group_links();
  // A flow group ever claimed a link (start_group()): until then split_claims() has nothing to
  // look for (traffic without groups, as the rollback benchmark's, read a claim per link of
  // every flow joining or starting in a sweep).
  bool claimed_ = false;
  std::vector<uint32_t> free_groups_;
  std::vector<uint32_t> taken_mark_;  // take_dependents(): where each position goes
  std::vector<uint8_t> dep_link_;     // submit_group()'s scratch: FlowGroup::dep_link
  std::vector<FlowGroup::Dependent> link_edges_;  // expand_link()'s scratch
  std::vector<uint32_t> dead_slots_;  // split groups' records, freed once the sweep is over
  std::vector<uint32_t> link_mark_;   // submit_flows(): a class's stamp on the links it holds
  // submit_flows()'s scratch: its classes, a hash table of them, each flow's class (or none:
  // alone) and the classes' members side by side.
  std::vector<GroupClass> classes_;
  std::vector<uint32_t> class_table_, flow_class_, class_members_;
  uint32_t class_hint_ = 0;  // the last call's count of classes: what sizes its table
  std::vector<Time> flow_estimate_;  // each flow's Record::estimate
  // What submit_flows() read of each flow's live dependencies (whether it holds a flow group,
  // the bound it gives), kept for submit_group(): nothing they hold changes in
  // between, and a second lookup of each through the id table and its record, by then out of
  // cache at a few thousand flows a call, was a fifth of submit_group() at 4096 GPUs.
  // flow_deps_[k] .. flow_deps_[k + 1]: flow k's entries in dep_seen_, one for each entry of
  // its `after` (its id is there: 16 bytes an entry, not 24, of a scratch a 4096-GPU ring's
  // step wrote 200 KB of).
  struct DepSeen {
    Time bound;   // its finish if simulated, else its lower bound
    // The flow group its record holds (kNoGroup: none; kRetiredDep: retired, not a live
    // dependency), for link_group(): read again there through the record, the record's line
    // had left the cache at a few hundred groups a call. (A live group's index names its
    // record as well as the slot does.)
    uint32_t group;
  };
  static constexpr uint32_t kRetiredDep = kNoGroup - 1;
  std::vector<DepSeen> dep_seen_;
  // The flow groups those dependencies lie in, as first seen (a run of flows naming the same
  // group lists it once), whose lists of dependents submit_group() appends to.
  std::vector<uint32_t> dep_groups_;
  std::vector<uint32_t> flow_deps_;
  uint32_t mark_stamp_ = 0;

  Time floor_ = 0, frontier_ = 0;
  uint64_t live_ = 0, rollbacks_ = 0, replayed_ = 0, members_apart_ = 0;
  uint64_t pins_ = 0;
  // By slot: the stamp of a pinned flow's live kPin item (QueueItem::version), and its time.
  std::vector<uint32_t> pin_stamp_;
  std::vector<Time> pin_next_;  // clean flows pinned (flow_solver.h): a rollback that pins only is one too
  uint64_t links_made_ = 0, links_expanded_ = 0, stale_dropped_ = 0, ghosts_begun_ = 0;
};

// Every member's sharing route, with the member's position.
template <class F> void Simulator::for_each_member_route(const Record& r, F&& f) const {
  const FlowGroup& g = groups_[r.group];
  for (uint32_t j = 0; j < g.members.size(); ++j) {
    const FlowGroup::Member& mb = g.members[j];
    if (mb.present()) f(j, topology_.sharing_links(mb.src, mb.dst));
  }
}

template <class F, class W> void Simulator::for_each_dependent(Record& r, F&& f, W&& whole) {
  if (r.group == kNoGroup) {
    for (EventId dep : r.dependents) f(dep);
    return;
  }
  // By index: f may add dependents elsewhere, never to this group. A large ring's dependents
  // were submitted long before (their state is cold), and reaching a member's scheduling
  // state is a chain of loads (its id's slot, the record, the group entry, its position): the
  // chain is walked in stages ahead of the entry being told, each stage reading only what an
  // earlier one fetched, so that the misses overlap instead of stalling each entry.
  FlowGroup& g = groups_[r.group];
  constexpr size_t kIdsAhead = 16, kRecordsAhead = 8, kStateAhead = 4;
  size_t n = g.dependents.size();
  for (size_t k = 0; k < std::min(n, kIdsAhead); ++k) ids_.prefetch(g.dependents[k].id);
  for (size_t k = 0; k < std::min(n, kRecordsAhead); ++k) prefetch_record(g.dependents[k].id);
  for (size_t k = 0; k < std::min(n, kStateAhead); ++k) prefetch_dependent(g.dependents[k].id);
  for (size_t k = 0; k < n;) {
    if (k + kIdsAhead < n) ids_.prefetch(g.dependents[k + kIdsAhead].id);
    if (k + kRecordsAhead < n) prefetch_record(g.dependents[k + kRecordsAhead].id);
    if (k + kStateAhead < n) prefetch_dependent(g.dependents[k + kStateAhead].id);
    const FlowGroup::Dependent d = g.dependents[k];
    if (d.pos & FlowGroup::kLinkBit) {
      const uint32_t bs = live_slot(EventId{d.id});
      if (bs == kRetired ||
          (records_[bs].group != kNoGroup && whole(bs, static_cast<uint8_t>(d.pos & ~FlowGroup::kLinkBit)))) {
        ++k;
        continue;
      }
      expand_link(g, k);  // entries k on are now its edges: told one by one
      n = g.dependents.size();
      continue;
    }
    f(EventId{d.id});
    ++k;
  }
}

template <class F>
void Simulator::take_dependents(FlowGroup& g, const std::vector<uint32_t>& positions, F&& sink) {
  if (g.dependents.empty()) return;
  // Where each position goes (its index in `positions` + 1; 0: it stays), a scratch by
  // position, cleared again below.
  if (taken_mark_.size() < g.members.size()) taken_mark_.resize(g.members.size(), 0);
  for (uint32_t i = 0; i < positions.size(); ++i) taken_mark_[positions[i]] = i + 1;
  size_t keep = 0;
  for (size_t k = 0; k < g.dependents.size(); ++k) {
    const FlowGroup::Dependent d = g.dependents[k];
    if (const uint32_t to = taken_mark_[d.pos]; to != 0) sink(to - 1, EventId{d.id});
    else g.dependents[keep++] = d;
  }
  g.dependents.resize(group_pool_, keep);
  for (uint32_t j : positions) taken_mark_[j] = 0;
}

}  // namespace simcore::detail
