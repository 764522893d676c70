// A flow group: like flows submitted in one Engine::add_flows() call, simulated as one event.
//
// Why: when every GPU of a ring starts a step at once, each flow is alone on its links and the
// max-min solver has nothing to do; what a flow costs is its bookkeeping (a 256-byte record, its
// queue items, its solver state, its finish). A group of m like flows pays that once.
//
// Alike means: same bytes, same not_before (after the floor and retired dependencies), routes
// of the same narrowest capacity and latency, the same latest finish of their dependencies
// when all of those are simulated, and no link shared by two members
// (Simulator::submit_flows() sorts a call's flows into groups by that key, GroupKey). While
// no other flow touches a member's links, each member moves at its route's narrowest capacity,
// which is exactly what the solver gives a flow alone (solve_alone); so members that start
// together end and finish together, with the same expressions as one-by-one flows:
// bit-identical answers.
//
// Each member keeps its own dependencies, dependents (in the group's list, by position),
// waiting count and ready time: a group starts as one only with all its members ready at the
// same instant. At the first instant some of them are ready and others not, the ready ones
// leave as a group of their own (or a flow, alone) and start; the rest wait on. So members
// whose dependencies finish apart start apart, as they would one by one.
//
// The group's record (Simulator::Record, `group` names its entry here) holds the times; every
// member id maps to that record's slot and, through IdTable::member(), to its position here.
// Once it moves, a group has one entry in the Simulator's index of groups by start (not one in
// each member link's index: on a large ring those were two cold cache lines per member link, a
// fifth of the run) and keeps the list of its members' links, so that a later sweep finds it
// where a member moved (the per-link group bounds say on which links it need look at all).
// A group becomes ordinary flows, one record per member in the state the group was in
// (Simulator::split()), the moment one member could differ from the others:
// - it starts on a link another flow or group uses, or another flow attaches to a link it holds
//   while it moves (members may then get different rates);
// - a rollback reaches it once simulated: dirty work appears on a link where it moved (pull_in,
//   a watch), or a dependency of a member finishes at another time (complete(), mark_dirty()).
//   The rollback then goes on with the members, as it would with flows submitted one by one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "group_pool.h"
#include "log_pool.h"
#include "pool_array.h"
#include "simcore/engine.h"
#include "simcore/topology.h"

namespace simcore::detail {

// What makes flows alike: members of one group agree on all of it (Simulator::submit_flows()).
struct GroupKey {
  uint64_t bytes = 0;
  Time base = 0;     // not_before, raised by the floor and by retired dependencies
  // The latest finish of its live dependencies (-1 when one is not known): members whose
  // dependencies finished at different instants (a ring's step behind a query) would start
  // apart and leave the group one instant at a time (extract()); grouped by this, they start
  // as whole groups. A dependency not simulated yet counts with its estimate
  // (Simulator::Record::estimate: its finish if nothing it meets slows it down), exact for
  // the steps of a ring submitted before one query, whose groups move alone; grouped by
  // class alone, those steps' members came apart as they got ready (each a copy).
  Time bound = 0;
  double rate = 0;   // narrowest link of the sharing route
  double latency = 0;

  bool operator==(const GroupKey&) const = default;
};

// A class of one call's alike flows: its members are class_members_[begin .. begin + count).
struct GroupClass {
  GroupKey key;
  uint32_t stamp = 0;  // marks the links its members hold (they may not share one)
  uint32_t count = 0, begin = 0;
  uint32_t deps = 0;  // its members' dependencies, counted as they join (what submit_group() reserves)
};

struct alignas(64) FlowGroup {
  // A member taken out (it started apart, extract()) leaves a hole: id kNoEvent, the rest
  // keep their positions.
  // 16 bytes (it was 24, with its id whole and both ends of its dependencies: a 4096-GPU
  // ring's step writes ~370 groups' member arrays, each last touched ~180 steps before).
  struct Member {
    static constexpr uint32_t kTakenOut = 0x80000000u;
    // Its id less its group record's id (Simulator::Record::id, that of the group's first
    // member), as a 32-bit two's complement (a call's ids lie within 2^31 of each other).
    uint32_t off = kTakenOut;
    int32_t src = 0, dst = 0;  // its route is worked out again when needed
    // Its live dependencies: deps[dep_from .. dep_end()), the next member's dep_from (members'
    // dependencies lie in deps in member order; a member taken out keeps its range).
    uint32_t dep_from = 0;
    bool present() const { return off != kTakenOut; }
    EventId id(EventId first) const {
      return first + static_cast<EventId>(static_cast<int64_t>(static_cast<int32_t>(off)));
    }
    static uint32_t offset(EventId id, EventId first) { return static_cast<uint32_t>(id - first); }
  };
  static_assert(sizeof(Member) == 16);
  // An event that depends on member `pos` (12 bytes: an edge costs what an inline IdList
  // entry did). pos == kLinkBit | L: a link, every edge from the members of a dependent group
  // to members of this one at once (its record's id is `id`; L: the link's index there, the
  // edges are its deps whose dep_link is L): one entry where there was one per edge, and one
  // telling of the group when this one finishes (Simulator::group_deps_done()) where each
  // edge was resolved through the id table. A ring's step depends on a few groups of the step
  // before (its route classes): a link in each. A link stands for its edges, in their order,
  // while both groups keep their members; before either comes apart (extract(), split()) it
  // becomes them (Simulator::expand_link()).
  struct [[gnu::packed]] Dependent {
    EventId id;
    uint32_t pos;
  };
  static constexpr uint32_t kLinkBit = 0x80000000u;
  static constexpr int kMaxLinks = 8;      // dependency groups linked; more get edges
  static constexpr uint8_t kEdge = 0xFF;   // dep_link: an edge in the dependency's own list
  // A member's scheduling state, apart from the rest (sched[j] is members[j]'s): a finishing
  // dependency tells each of its dependents, which reads and writes only this. (In Member it
  // made that a 64-byte line per member, cold on a large ring or a long trace.)
  struct Schedule {
    Time ready = 0;        // the latest dependency finish seen so far
    uint32_t waiting = 0;  // dependencies not finished yet
  };

  // The entry is two cache lines (pool_array.h says why); what a rollback or a timeline
  // needs besides (the sorted links, the labels) is in the Simulator's GroupSide, by index.
  // Line 0: what submission, scheduling and the start read.
  double rate = 0;  // every member's narrowest link: its rate alone
  // The arrays live in the Simulator's GroupPool (group_pool.h), but for members, deps and
  // dep_link, written once at submission: in its LogPool (log_pool.h); and sched and ready,
  // written as it is scheduled and released as it starts: in a LogPool of their own (a free
  // list's next block was a read of a line the sweep had since evicted, each waiting on the
  // last).
  PoolArray<Member> members;
  PoolArray<Schedule> sched;  // by member position, from Simulator::schedule_group() on
  PoolArray<uint32_t> ready;  // positions of members ready to start, in the order they got so
  uint32_t live = 0;          // members not taken out
  // Its members' ids name it through this IdTable handle (kNoHandle: each its record slot, as
  // in a group made by extract(), or from a call spanning more chunks than a handle counts):
  // its retirement is then one write and a count per chunk (IdTable::retire_handle()).
  static constexpr uint32_t kNoHandle = 0xFFFFFFFFu;
  uint32_t handle = kNoHandle;
  // Line 1.
  PoolArray<EventId> deps;
  // By deps' index, only when it has links: the link an edge is told through (kEdge: none).
  PoolArray<uint8_t> dep_link;
  // Every member's dependents, one list for the group, in the order they were added (each
  // member's in its own order): the next step of a ring appends here as it is submitted,
  // where a list in each member wrote into every member's line of the previous step, and a
  // finishing group tells its dependents from this list alone (no member read). A member taken
  // out takes its entries along (Simulator::extract(), split()).
  PoolArray<Dependent> dependents;
  // Every member's sharing links (members share none): while its sweep runs, at
  // Simulator::group_links_[links_from .. links_to) (written as it starts, read as its
  // transfer ends and as the sweep ends: a scratch that stays in cache, where an array per
  // group was a cold write per member); sorted in its GroupSide only once a rollback asks
  // whether the group holds a link (Simulator::group_holds(); most groups never are).
  uint32_t links_from = 0, links_to = 0;
  // Bit L: its link L still stands (Dependent::kLinkBit) in its dependency group's list.
  uint8_t linked = 0;
  // Every member names this many dependencies (0: not all the same), so member j's are
  // deps[j * dep_stride ..): group_deps_done() then walks dep_link alone, not each member's
  // entry (cold since its submission: two thirds of that function's samples).
  uint8_t dep_stride = 0;
  // Scheduled with every member waiting on every one of its dependencies through a standing
  // link (Simulator::schedule_group()): sched and ready hold nothing yet; each member's state is
  // {its record's base_ready, dep_stride} until the first link is told (materialize_schedule()).
  // A ring submitted whole before one query scheduled every step's groups at once: their
  // schedules were 20 bytes a flow of fresh pages, each read once an instant before its start.
  bool sched_lazy = false;

  // The end of member j's dependencies in deps (Member::dep_from).
  uint32_t dep_end(uint32_t j) const {
    return j + 1 < members.size() ? members[j + 1].dep_from : static_cast<uint32_t>(deps.size());
  }

  // Empty again, for the next group to take this entry (Simulator::allocate_group()). A large
  // ring ends a group and makes one every dozen flows: its arrays' malloc and free were a
  // sixth of a 2048-GPU ring. Its list of dependents keeps its capacity up to kKeep members'
  // worth (with 256, every free entry kept what its largest group had held: vgpu-netsim's
  // 1024-GPU ring ended with 22 bytes of history per event against 4.6 with 32); its other
  // arrays go back to their LogPools (reset()).
  // A started group's scheduling state is not read again: a member split out of it takes
  // none (member_record()), and a record set back to pending has its readiness counted anew
  // (schedule_group(), schedule_if_ready()). Its arrays go back to their pool as it starts,
  // whose slabs the groups scheduled next take again: a ring submitted all at once otherwise
  // held 20 bytes per flow to its end, every one a fresh page.
  void release_schedule(LogPool& pool) {
    sched_lazy = false;
    sched.release(pool);
    ready.release(pool);
  }

  // Its members, dependencies and their links go back to `log` whatever their size: the next
  // group writes its own in submission order (log_pool.h), not into this entry's old lines;
  // its scheduling arrays (if it never started) to `sched_log`.
  void reset(GroupPool& pool, LogPool& log, LogPool& sched_log) {
    static constexpr size_t kKeep = 32;
    rate = 0;
    live = 0;
    links_from = links_to = 0;
    linked = 0;
    dep_stride = 0;
    sched_lazy = false;
    handle = kNoHandle;
    members.clear();
    sched.clear();
    ready.clear();
    deps.clear();
    dep_link.clear();
    dependents.clear();
    members.release(log);
    deps.release(log);
    dep_link.release(log);
    sched.release(sched_log);
    ready.release(sched_log);
    if (dependents.capacity() > 2 * kKeep) dependents.release(pool);
  }
};
static_assert(sizeof(FlowGroup) == 128);

// What a flow group holds outside its entry, needed only by a rollback that asks whether the
// group holds a link, or with a timeline (Simulator::group_side_, by group index).
struct GroupSide {
  std::vector<std::string> labels;  // by member position, only when the timeline is recorded
  std::vector<LinkId> links;        // every member's sharing links, sorted once asked
  bool links_sorted = false;

  static constexpr size_t kKeep = 32;
  void reset() {
    labels.clear();
    links.clear();
    links_sorted = false;
    if (labels.capacity() > kKeep) labels = std::vector<std::string>();
    if (links.capacity() > 4 * kKeep) links = std::vector<LinkId>();
  }
  size_t memory_bytes() const {
    size_t b = links.capacity() * sizeof(LinkId);
    for (const std::string& l : labels) b += sizeof(std::string) + l.capacity();
    return b;
  }
};

}  // namespace simcore::detail
