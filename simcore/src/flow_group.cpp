// The Simulator's flow groups (flow_group.h): sorting a call's flows into groups, scheduling
// members, a group's start and transfer end, and taking members out of a group.
#include <algorithm>
#include <array>
#include <bit>
#include <limits>

#include "common/log.h"
#include "simulator.h"

namespace simcore::detail {
namespace {

uint64_t hash_key(const GroupKey& k) {
  auto mix = [](uint64_t h, uint64_t v) { return (h ^ v) * 0x9E3779B97F4A7C15ull; };
  uint64_t h = mix(0, k.bytes);
  for (double d : {k.base, k.bound, k.rate, k.latency}) h = mix(h, std::bit_cast<uint64_t>(d));
  return h ^ (h >> 29);
}

}  // namespace

// A step of a collective has a handful of route classes (inside a node, between nodes, between
// leaves) times the instants its dependencies finished at (a 1024-GPU ring behind a query:
// ~14): the classes are found through an open-addressing table, and their members laid out in
// one array, all of it the Simulator's scratch (no allocation per call once warm).
template <class Event>
void Simulator::submit_flows(std::span<const Event> events, std::span<EventId> ids) {
  constexpr uint32_t kAlone = std::numeric_limits<uint32_t>::max();
  constexpr Time kUnknownBound = -1;  // some dependency's finish is not known
  if (link_mark_.size() != links_.size()) link_mark_.assign(links_.size(), 0);
  const uint32_t n = static_cast<uint32_t>(events.size());
  // The table is kept at most half full of classes, sized from the last call's count (a
  // ring's steps have about as many classes each; never more than twice this call's flows, so
  // that a small call after a large one zeroes no more than it did) and doubled when it fills.
  // Sized from the call's flows alone, a 4096-GPU ring's step zeroed and probed 32 KB for the
  // ~230 groups it makes, lines the rest of the step had evicted from the first-level cache.
  size_t table_size =
      std::bit_ceil(std::max<size_t>(16, std::min(2 * size_t{n}, 4 * size_t{class_hint_})));
  size_t mask = table_size - 1;
  class_table_.assign(table_size, 0);  // a class's index + 1; 0: empty
  classes_.clear();
  const auto place = [&](const GroupKey& key) {  // the slot of `key`, or the empty one it takes
    size_t h = static_cast<size_t>(hash_key(key)) & mask;
    while (class_table_[h] != 0 && !(classes_[class_table_[h] - 1].key == key)) h = (h + 1) & mask;
    return h;
  };
  flow_class_.assign(n, kAlone);
  flow_estimate_.assign(n, -1);
  dep_seen_.clear();
  dep_groups_.clear();
  flow_deps_.resize(size_t{n} + 1);
  for (uint32_t k = 0; k < n; ++k) {
    const Event& e = events[k];
    flow_deps_[k] = static_cast<uint32_t>(dep_seen_.size());
    if (!is_flow(e) || bytes_of(e) == 0) continue;
    GroupKey key;
    key.bytes = bytes_of(e);
    key.base = std::max(not_before_of(e), floor_);
    Time bound = 0;
    bool known = true;
    if (after_of(e))
      for (EventId dep : *after_of(e)) {
        const uint32_t ds = ids_.slot(dep);
        if (ds == IdTable::kRetired) {
          key.base = std::max(key.base, ids_.result(dep).finish);
          dep_seen_.push_back(DepSeen{0, kRetiredDep});
          continue;
        }
        const Record& d = records_[ds];
        dep_seen_.push_back(DepSeen{d.dirty ? d.lower_bound : d.finish, d.group});
        if (d.group != kNoGroup && (dep_groups_.empty() || dep_groups_.back() != d.group)) {
          dep_groups_.push_back(d.group);
          __builtin_prefetch(&groups_[d.group].dependents, 1);
        }
        if (!d.dirty) {
          bound = std::max(bound, d.finish);
        } else if (d.estimate >= 0) {
          // Not simulated yet: its estimate (its lower bound says little of when it finishes:
          // flows starting spread out would fall into many small groups that split all the
          // same).
          bound = std::max(bound, d.estimate);
        } else {
          known = false;
        }
      }
    key.bound = known ? std::max(bound, key.base) : kUnknownBound;
    // route()'s latency, and the narrowest capacity of its sharing links.
    const Route route = topology_.sharing_route(src_of(e), dst_of(e), key.rate);
    key.latency = route.latency;
    // Its finish if it starts at the bound and moves alone: what start_group() and
    // finish_after_tail() would compute, expression for expression, so that a group's
    // dependents are keyed by the very instant it finishes when nothing slows it down.
    if (key.bound != kUnknownBound)
      flow_estimate_[k] = (key.bound + static_cast<double>(key.bytes) / key.rate) + key.latency;
    const size_t h = place(key);
    uint32_t ci = class_table_[h] - 1;
    if (class_table_[h] == 0) {
      if (++mark_stamp_ == 0) {  // wrapped: old marks could match again
        std::fill(link_mark_.begin(), link_mark_.end(), 0);
        mark_stamp_ = 1;
      }
      classes_.push_back(GroupClass{key, mark_stamp_, 0, 0});
      ci = static_cast<uint32_t>(classes_.size() - 1);
      class_table_[h] = ci + 1;
      if (2 * classes_.size() > table_size) {  // past half full: twice the size, filled again
        table_size *= 2;
        mask = table_size - 1;
        class_table_.assign(table_size, 0);
        for (uint32_t i = 0; i < classes_.size(); ++i) class_table_[place(classes_[i].key)] = i + 1;
      }
    }
    GroupClass& c = classes_[ci];
    bool disjoint = true;
    for (int i = 0; i < route.count; ++i) disjoint = disjoint && link_mark_[route.links[i]] != c.stamp;
    if (!disjoint) continue;  // alone
    for (int i = 0; i < route.count; ++i) link_mark_[route.links[i]] = c.stamp;
    flow_class_[k] = ci;
    ++c.count;
    c.deps += after_of(e) ? static_cast<uint32_t>(after_of(e)->size()) : 0;
  }
  flow_deps_[n] = static_cast<uint32_t>(dep_seen_.size());
  class_hint_ = static_cast<uint32_t>(classes_.size());
  // Where link_group() will append to each dependency group's list of dependents (its entry
  // was fetched above, as the group was first seen): a step's groups of the step before were
  // written a whole step of submissions and sweeps ago, and the list's end was a cold write
  // per link.
  for (const uint32_t gi : dep_groups_) {
    const FlowGroup& a = groups_[gi];
    __builtin_prefetch(a.dependents.data() + a.dependents.size(), 1);
  }
  // Each class's members, in call order, side by side.
  uint32_t at = 0;
  for (GroupClass& c : classes_) {
    c.begin = at;
    at += c.count;
    c.count = 0;
  }
  class_members_.resize(at);
  for (uint32_t k = 0; k < n; ++k)
    if (flow_class_[k] != kAlone) {
      GroupClass& c = classes_[flow_class_[k]];
      class_members_[c.begin + c.count++] = k;
    }
  // Ids in call order, as add_flow() one by one would number them (a caller that maps its
  // events to ids, such as vgpu-netsim, then keeps two numbers, not a table); each is bound to
  // its record below.
  for (uint32_t k = 0; k < n; ++k) ids[k] = ids_.add(IdTable::kRetired);
  for (const GroupClass& c : classes_) {
    const std::span<const uint32_t> members(class_members_.data() + c.begin, c.count);
    if (c.count >= 2)
      submit_group(events, members, ids, c.key.rate, c.key.latency, flow_estimate_[members[0]], c.deps);
    else if (c.count == 1) flow_class_[members[0]] = kAlone;
  }
  for (uint32_t k = 0; k < n; ++k)
    if (flow_class_[k] == kAlone) {
      submit(as_event(events[k]), ids[k]);
      records_[ids_.slot(ids[k])].estimate = flow_estimate_[k];
    }
}

// A group's index: a freed one reused, else a new one at the end.
// A freed entry was last written when its group retired (reclaim(), a step's worth of other
// groups ago on a large ring) and submit_group() writes it at once: the entries handed out next
// are fetched for writing two groups ahead, as allocate_slot() does for records, so that their
// misses overlap the work on the groups before. (Its members and dependencies are written in
// the LogPool's order, not where the entry's last group had them: nothing to fetch there.)
uint32_t Simulator::allocate_group() {
  if (free_groups_.empty()) {
    groups_.emplace_back();
    return static_cast<uint32_t>(groups_.size() - 1);
  }
  const uint32_t gi = free_groups_.back();
  free_groups_.pop_back();
  const size_t left = free_groups_.size();
  if (left >= 2) {
    const char* p = reinterpret_cast<const char*>(&groups_[free_groups_[left - 2]]);
    for (size_t line = 0; line < sizeof(FlowGroup); line += 64) __builtin_prefetch(p + line, 1);
  }
  return gi;
}

template <class Event>
void Simulator::submit_group(std::span<const Event> events, std::span<const uint32_t> members,
                             std::span<EventId> ids, double rate, Time tail, Time estimate,
                             uint32_t deps) {
  const uint32_t slot = allocate_slot();
  const uint32_t gi = allocate_group();
  FlowGroup& g = groups_[gi];
  const uint32_t m = static_cast<uint32_t>(members.size());
  g.rate = rate;
  g.members.resize(log_pool_, m);
  g.live = m;
  g.deps.reserve(log_pool_, deps);  // (counted in submit_flows(): a pass over the members' events here
                         // read every flow's list of dependencies once more, cold)
  const Event& e0 = events[members[0]];
  Record& r = records_[slot];
  r.kind = EventKind::flow;
  r.phase = Phase::pending;
  r.dirty = true;
  r.gpu = src_of(e0);
  r.dst = dst_of(e0);
  r.bytes = bytes_of(e0);
  r.tail = tail;
  r.group = gi;
  r.estimate = estimate;
  // The same for every member (their key): not_before, the floor, retired dependencies.
  r.base_ready = std::max(not_before_of(e0), floor_);
  if (after_of(e0))
    for (EventId dep : *after_of(e0))
      if (ids_.slot(dep) == IdTable::kRetired) r.base_ready = std::max(r.base_ready, ids_.result(dep).finish);

  Time lower_bound = std::numeric_limits<Time>::infinity();
  // The groups its members depend on, up to kMaxLinks, each told of them through one link;
  // each edge's link (FlowGroup::kEdge: to an ordinary record, or past kMaxLinks) by index.
  std::array<uint32_t, FlowGroup::kMaxLinks> link_groups;
  int links = 0;
  dep_link_.clear();
  uint32_t stride = 0;  // every member's count of dependencies while they agree, else 0
  // Members are in call order: their ids lie from the first's to the last's. Only once a floor
  // was promised: without one nothing ever retires, and the handle is only cost (a whole ring
  // submitted all at once, no floors: 6 more bytes per flow and a slower run).
  if (floor_ > 0 && IdTable::can_share(ids[members[0]], ids[members[m - 1]]))
    g.handle = ids_.open_handle(slot, ids[members[0]]);
  const EventId first = ids[members[0]];  // the record's id
  for (uint32_t j = 0; j < m; ++j) {
    const uint32_t k = members[j];
    const Event& e = events[k];
    const EventId id = ids[k];
    if (g.handle != FlowGroup::kNoHandle) {
      ids_.bind_handle(id, g.handle, j);
    } else {
      ids_.bind_member(id, slot, j);  // (a fresh id: no handle to leave)
    }
    FlowGroup::Member& mb = g.members[j];
    mb.off = FlowGroup::Member::offset(id, first);
    mb.src = src_of(e);
    mb.dst = dst_of(e);
    mb.dep_from = static_cast<uint32_t>(g.deps.size());
    Time bound = r.base_ready;
    // Its live dependencies as submit_flows() saw them (retired ones are marked).
    for (uint32_t x = flow_deps_[k]; x < flow_deps_[k + 1]; ++x) {
      const DepSeen& d = dep_seen_[x];
      if (d.group == kRetiredDep) continue;
      const EventId dep_id = (*after_of(e))[x - flow_deps_[k]];
      if (std::find(g.deps.begin() + mb.dep_from, g.deps.end(), dep_id) != g.deps.end()) continue;
      g.deps.push_back(log_pool_, dep_id);
      uint8_t L = FlowGroup::kEdge;
      if (d.group != kNoGroup) {
        int i = 0;
        while (i < links && link_groups[i] != d.group) ++i;
        if (i == links && links < FlowGroup::kMaxLinks) link_groups[links++] = d.group;
        if (i < links) L = static_cast<uint8_t>(i);
      }
      dep_link_.push_back(L);
      bound = std::max(bound, d.bound);
    }
    const uint32_t count = static_cast<uint32_t>(g.deps.size()) - mb.dep_from;
    if (j == 0) stride = count;
    else if (count != stride) stride = 0;
    lower_bound = std::min(lower_bound, bound);  // the group's: its earliest member's
    if (record_timeline_) side(gi).labels.push_back(label_of(e) ? *label_of(e) : std::string());
  }
  r.id = first;
  g.dep_stride = stride <= std::numeric_limits<uint8_t>::max() ? static_cast<uint8_t>(stride) : 0;
  // A link in each group it depends on (a ring's step: the few of the step before), and the
  // other edges into their dependencies' lists, each list in the order a pass over the
  // members gives (as one edge at a time did).
  if (links != 0) {
    g.dep_link.assign(log_pool_, dep_link_.data(), dep_link_.data() + dep_link_.size());
    for (int i = 0; i < links; ++i) link_group(slot, link_groups[i], static_cast<uint8_t>(i));
  }
  for (uint32_t j = 0; j < m; ++j)
    for (uint32_t d = g.members[j].dep_from; d < g.dep_end(j); ++d)
      if (dep_link_[d] == FlowGroup::kEdge) add_dependent(ids_.slot(g.deps[d]), g.deps[d], g.members[j].id(first));
  r.lower_bound = lower_bound;
  rewind_to_ = std::min(rewind_to_, lower_bound);
  live_ += m;
  fresh_.push_back(slot);
}

void Simulator::link_group(uint32_t slot, uint32_t dep_group, uint8_t L) {
  FlowGroup& a = groups_[dep_group];
  // (No reserve: a group whose dependents are linked holds a link or two.)
  a.dependents.push_back(group_pool_, FlowGroup::Dependent{records_[slot].id, FlowGroup::kLinkBit | L});
  groups_[records_[slot].group].linked |= static_cast<uint8_t>(1u << L);
  ++links_made_;
}

void Simulator::expand_link(FlowGroup& a, size_t k) {
  const EventId bid{a.dependents[k].id};
  const auto L = static_cast<uint8_t>(a.dependents[k].pos & ~FlowGroup::kLinkBit);
  const uint32_t bs = live_slot(bid);
  a.dependents.erase(k);
  if (bs == kRetired) return;  // retired: nothing will be told to it
  if (records_[bs].group == kNoGroup) {
    vgpu::log::once(vgpu::log::Level::error, "simcore-link-lost",
                    "simcore: internal: a flow group came apart without its dependency links");
    return;
  }
  FlowGroup& b = groups_[records_[bs].group];
  b.linked &= static_cast<uint8_t>(~(1u << L));
  ++links_expanded_;
  // Its edges, as submit_group() would have added them: by member, each in its order (a
  // dependency's position here: the id table's).
  link_edges_.clear();
  const EventId b_first = records_[bs].id;
  for (uint32_t j = 0; j < b.members.size(); ++j) {
    const FlowGroup::Member& mb = b.members[j];
    if (!mb.present()) continue;
    // (A retired dependency finishes no more: no edge; and its position may be gone with
    // its chunk's, IdTable::all_retired().)
    for (uint32_t d = mb.dep_from; d < b.dep_end(j); ++d)
      if (b.dep_link[d] == L && ids_.slot_or_retired(b.deps[d]) != kRetired)
        link_edges_.push_back(FlowGroup::Dependent{mb.id(b_first), ids_.member(b.deps[d])});
  }
  a.dependents.insert(group_pool_, k, link_edges_.data(), link_edges_.data() + link_edges_.size());
}

void Simulator::unlink(uint32_t slot) {
  FlowGroup& b = groups_[records_[slot].group];
  const EventId bid = records_[slot].id;
  while (b.linked != 0) {
    const auto L = static_cast<uint8_t>(std::countr_zero(b.linked));
    const auto bit = static_cast<uint8_t>(1u << L);
    // The group it is linked to: the one its edges of link L name.
    uint32_t as = kRetired;
    for (size_t d = 0; d < b.deps.size() && as == kRetired; ++d)
      if (b.dep_link[d] == L) as = live_slot(b.deps[d]);
    bool found = false;
    if (as != kRetired && records_[as].group != kNoGroup) {
      FlowGroup& a = groups_[records_[as].group];
      for (size_t k = 0; k < a.dependents.size() && !found; ++k)
        if (a.dependents[k].pos == (FlowGroup::kLinkBit | L) && EventId{a.dependents[k].id} == bid) {
          expand_link(a, k);
          found = true;
        }
    }
    // Else its dependency group retired (it told it long ago) or came apart (which expanded
    // the link first and cleared the bit: not here).
    b.linked &= static_cast<uint8_t>(~bit);
  }
}

void Simulator::expand_links(FlowGroup& g) {
  for (size_t k = 0; k < g.dependents.size();) {
    if (!(g.dependents[k].pos & FlowGroup::kLinkBit)) {
      ++k;
      continue;
    }
    const size_t before = g.dependents.size();
    expand_link(g, k);
    k += g.dependents.size() + 1 - before;  // past its edges
  }
}

// As schedule_if_ready(), member by member; the group's start is queued at the earliest time a
// member is ready (r.ready: infinity while none is).
void Simulator::schedule_group(uint32_t slot, Time now) {
  Record& r = records_[slot];
  FlowGroup& g = groups_[r.group];
  r.waiting = 0;
  r.ready = std::numeric_limits<Time>::infinity();
  Time first = std::numeric_limits<Time>::infinity();
  g.ready.clear();
  g.sched.clear();
  g.sched_lazy = false;
  // The dependencies told through a standing link are members of one group record: whether
  // they hold a member back, and the finish they give it, are that record's, asked once per
  // link (at its first edge, where one edge at a time asked it first: the same side effects
  // in the same order) instead of once per edge through the id table.
  std::array<int8_t, FlowGroup::kMaxLinks> link_waits;  // -1: not asked yet
  std::array<Time, FlowGroup::kMaxLinks> link_ready;
  link_waits.fill(-1);
  // Members' edges by position when they allow it (FlowGroup::dep_stride): no member entry read.
  const uint32_t stride = g.live == g.members.size() ? g.dep_stride : 0;
  // Every dependency told through a standing link, each link's group not finished: every
  // member waits on all of its dependencies, and its state is written only once a link is
  // told (FlowGroup::sched_lazy). The links are asked in the order of their first edges, as
  // the loop below asks them (it finds them answered).
  if (stride != 0 && g.linked != 0) {
    bool all_linked = true;
    uint8_t used = 0;
    for (const uint8_t L : g.dep_link) {
      if (L == FlowGroup::kEdge || !(g.linked & (1u << L))) {
        all_linked = false;
        break;
      }
      used |= static_cast<uint8_t>(1u << L);
    }
    bool all_wait = all_linked;
    if (all_linked) {
      uint8_t asked = 0;
      for (uint32_t d = 0; d < g.dep_link.size() && asked != used; ++d) {
        const uint8_t L = g.dep_link[d];
        if (asked & (1u << L)) continue;
        asked |= static_cast<uint8_t>(1u << L);
        link_ready[L] = -std::numeric_limits<Time>::infinity();
        link_waits[L] = dep_waits(g.deps[d], now, link_ready[L]) ? 1 : 0;
        if (link_waits[L] == 0) all_wait = false;
      }
    }
    if (all_wait) {
      g.sched_lazy = true;
      r.waiting = g.live;
      return;
    }
  }
  g.ready.reserve(sched_pool_, g.live);  // one allocation, not one per doubling as members get ready
  g.sched.resize(sched_pool_, g.members.size());
  for (uint32_t j = 0; j < g.members.size(); ++j) {
    uint32_t dep_from = j * stride, dep_to = dep_from + stride;
    if (stride == 0) {
      const FlowGroup::Member& mb = g.members[j];
      if (!mb.present()) continue;
      dep_from = mb.dep_from;
      dep_to = g.dep_end(j);
    }
    FlowGroup::Schedule& sc = g.sched[j];
    sc.ready = r.base_ready;
    sc.waiting = 0;
    for (uint32_t d = dep_from; d < dep_to; ++d) {
      const uint8_t L = g.linked != 0 ? g.dep_link[d] : FlowGroup::kEdge;
      if (L == FlowGroup::kEdge || !(g.linked & (1u << L))) {
        if (dep_waits(g.deps[d], now, sc.ready)) ++sc.waiting;
        continue;
      }
      if (link_waits[L] < 0) {
        link_ready[L] = -std::numeric_limits<Time>::infinity();
        link_waits[L] = dep_waits(g.deps[d], now, link_ready[L]) ? 1 : 0;
      }
      if (link_waits[L] != 0) ++sc.waiting;
      else sc.ready = std::max(sc.ready, link_ready[L]);
    }
    if (sc.waiting != 0) {
      ++r.waiting;
    } else {
      g.ready.push_back(sched_pool_, j);
      first = std::min(first, sc.ready);
    }
  }
  if (first != std::numeric_limits<Time>::infinity()) member_ready(slot, first);
}

void Simulator::materialize_schedule(FlowGroup& g, const Record& r) {
  if (!g.sched_lazy) return;
  g.sched_lazy = false;
  g.ready.reserve(sched_pool_, g.live);
  g.sched.resize(sched_pool_, g.members.size());
  for (FlowGroup::Schedule& sc : g.sched) sc = FlowGroup::Schedule{r.base_ready, g.dep_stride};
}

void Simulator::member_dep_done(uint32_t slot, EventId member, Time now) {
  Record& r = records_[slot];
  FlowGroup& g = groups_[r.group];
  materialize_schedule(g, r);
  const uint32_t j = ids_.member(member);
  FlowGroup::Schedule& sc = g.sched[j];
  if (sc.waiting == 0) return;  // scheduled after this instant: it saw the dependency done
  sc.ready = std::max(sc.ready, now);
  if (--sc.waiting == 0) {
    --r.waiting;
    g.ready.push_back(sched_pool_, j);
    member_ready(slot, sc.ready);
  }
}

void Simulator::group_deps_done(uint32_t slot, uint8_t L, Time now) {
  Record& r = records_[slot];
  FlowGroup& g = groups_[r.group];
  materialize_schedule(g, r);
  if (g.dep_stride != 0 && g.live == g.members.size()) {
    // The same steps in the same order as below, with each member's edges found by position
    // (none is taken out: live counts them all; schedule_group() does the same).
    const uint32_t k = g.dep_stride;
    for (uint32_t d = 0; d < g.dep_link.size(); ++d) {
      if (g.dep_link[d] != L) continue;
      const uint32_t j = d / k;
      FlowGroup::Schedule& sc = g.sched[j];
      if (sc.waiting == 0) continue;
      sc.ready = std::max(sc.ready, now);
      if (--sc.waiting == 0) {
        --r.waiting;
        g.ready.push_back(sched_pool_, j);
        member_ready(slot, sc.ready);
      }
    }
    return;
  }
  for (uint32_t j = 0; j < g.members.size(); ++j) {
    const FlowGroup::Member& mb = g.members[j];
    if (!mb.present()) continue;
    FlowGroup::Schedule& sc = g.sched[j];
    // member_dep_done() once per edge of the link (a member scheduled after this instant
    // counted its dependencies done: waiting is 0 and nothing happens).
    for (uint32_t d = mb.dep_from; d < g.dep_end(j) && sc.waiting != 0; ++d) {
      if (g.dep_link[d] != L) continue;
      sc.ready = std::max(sc.ready, now);
      if (--sc.waiting == 0) {
        --r.waiting;
        g.ready.push_back(sched_pool_, j);
        member_ready(slot, sc.ready);
      }
    }
  }
}

void Simulator::member_ready(uint32_t slot, Time t) {
  Record& r = records_[slot];
  if (!(t < r.ready)) return;
  r.ready = t;
  ++r.version;  // a start queued for later is void (a pending group has no other item)
  push_start(t, slot);
}

// The group's start is due: the members ready now start, as the whole group when that is all
// of them, else as a group (or a flow) of their own; the others wait on.
void Simulator::begin_group(uint32_t slot, Time now) {
  Record& r = records_[slot];
  r.ready = std::numeric_limits<Time>::infinity();
  std::vector<uint32_t> now_ready;
  Time later = std::numeric_limits<Time>::infinity();
  {
    FlowGroup& g = groups_[r.group];
    // Its members (start_group() reads each one's ends for its route), written when the group
    // was submitted a step ago: fetched while its schedule is read below.
    const char* mp = reinterpret_cast<const char*>(g.members.data());
    const size_t mbytes = std::min<size_t>(g.members.size() * sizeof(FlowGroup::Member), 8 * 64);
    for (size_t line = 0; line < mbytes; line += 64) __builtin_prefetch(mp + line);
    if (g.ready.size() == g.live &&
        std::all_of(g.ready.begin(), g.ready.end(), [&](uint32_t j) { return g.sched[j].ready <= now; })) {
      g.ready.clear();
      start_group(slot, now);
      return;
    }
    size_t keep = 0;
    for (uint32_t j : g.ready) {
      const Time t = g.sched[j].ready;
      if (t <= now) {
        now_ready.push_back(j);
      } else {
        later = std::min(later, t);
        g.ready[keep++] = j;
      }
    }
    g.ready.resize(sched_pool_, keep);
  }
  if (later != std::numeric_limits<Time>::infinity()) member_ready(slot, later);
  if (now_ready.empty()) return;
  const uint32_t started = extract(slot, now_ready);
  dirty_.push_back(started);
  if (records_[started].group != kNoGroup) start_group(started, now);
  else begin(started, now);
}

// Starts the group as one when each member's links carry nothing else now; the flows that move
// on them later (clean ones pulled in, dirty ones starting) split it when they attach.
// The links it claims are listed as it goes (group_links_): end_group_transfer() releases them
// and raises their group bounds without working out the members' routes again.
void Simulator::start_group(uint32_t slot, Time now) {
  Record& r = records_[slot];
  FlowGroup& g = groups_[r.group];
  g.release_schedule(sched_pool_);
  if (group_links_.size() >= group_links_compact_at_) compact_group_links();
  g.links_from = static_cast<uint32_t>(group_links_.size());
  bool alone = true;
  for_each_member_route(r, [&](uint32_t, const Route& route) {
    if (!alone) return;
    for (int i = 0; i < route.count; ++i) {
      const LinkId id = route.links[i];
      if (loaded(id) || links_[id].claim != kNoGroup) alone = false;
    }
    if (!alone) return;
    note_presence(route, now);
    claimed_ = true;
    for (int i = 0; i < route.count; ++i) links_[route.links[i]].claim = slot;
    group_links_.insert(group_links_.end(), route.links.begin(), route.links.begin() + route.count);
  });
  g.links_to = static_cast<uint32_t>(group_links_.size());
  if (!alone) {
    release_claims(slot);  // the links it claimed so far
    split(slot, now);  // its members start now, one by one
    return;
  }
  group_links_owners_.push_back(slot);
  r.start = now;
  r.phase = Phase::moving;
  // Into the index of groups (with its links), so that a later sweep finds the group where its
  // members moved (a rollback reaching it splits it there).
  groups_by_start_.insert(std::make_pair(now, slot));
  r.indexed = true;
  // What the solver gives a flow alone on its links (solve_alone) and what on_rate() makes of
  // it, expression for expression: the members end exactly where one-by-one flows would.
  const double rate = groups_[r.group].rate;
  const double remaining = static_cast<double>(r.bytes);
  r.segments.clear();
  r.segments.push_back(Segment{now, rate, remaining});
  r.end_queued = std::numeric_limits<Time>::infinity();
  queue_transfer_end(r, slot, now + remaining / rate);
}

void Simulator::compact_group_links() {
  size_t to = 0, kept = 0;
  for (const uint32_t slot : group_links_owners_) {
    const Record& r = records_[slot];
    // Split since (its record is dead, or its entry another group's), or its transfer ended.
    if (r.group == kNoGroup || r.phase != Phase::moving) continue;
    FlowGroup& g = groups_[r.group];
    if (g.links_to <= g.links_from) continue;
    const uint32_t n = g.links_to - g.links_from;
    // Ranges lie in the owners' order: a range only moves down.
    std::copy(group_links_.begin() + g.links_from, group_links_.begin() + g.links_to, group_links_.begin() + to);
    g.links_from = static_cast<uint32_t>(to);
    g.links_to = static_cast<uint32_t>(to + n);
    to += n;
    group_links_owners_[kept++] = slot;
  }
  group_links_.resize(to);
  group_links_owners_.resize(kept);
  group_links_compact_at_ = std::max(kGroupLinksCompactMin, 2 * to);
}

void Simulator::release_claims(uint32_t slot) {
  const FlowGroup& g = groups_[records_[slot].group];
  for (uint32_t i = g.links_from; i < g.links_to; ++i)
    if (links_[group_links_[i]].claim == slot) links_[group_links_[i]].claim = kNoGroup;
}

// The group's start and transfer end are final for this sweep (nothing splits a group in its
// tail), so the group bounds its clean self will need are raised here, in the same pass over
// its links as the claims' release: raised at finalize(), they were a second pass over every
// member link, a step's worth of link state later, when a large ring had long evicted it.
// Raised while the group is still dirty, they bound one more group than they need to, which
// a bound may (the searches they allow skip dirty groups).
void Simulator::end_group_transfer(uint32_t slot) {
  const Record& r = records_[slot];
  const FlowGroup& g = groups_[r.group];
  group_max_duration_ = std::max(group_max_duration_, r.transfer_end - r.start);
  for (uint32_t i = g.links_from; i < g.links_to; ++i) {
    LinkIndex& li = links_[group_links_[i]];
    if (li.claim == slot) li.claim = kNoGroup;
    li.group_bound = std::max(li.group_bound, std::max(r.transfer_end, r.start));
  }
}

// What a record split off group record `G` (one member, or a sub-group) shares with it.
void Simulator::take_group_state(Record& out, const Record& G) {
  out.kind = EventKind::flow;
  out.phase = G.phase;
  out.dirty = G.dirty;
  out.bytes = G.bytes;
  out.tail = G.tail;
  out.base_ready = G.base_ready;
  out.lower_bound = G.lower_bound;
  out.estimate = G.estimate;
}

uint32_t Simulator::member_record(uint32_t slot, uint32_t j) {
  const uint32_t ms = allocate_slot();
  const Record& G = records_[slot];  // records never move (chunked_store.h)
  FlowGroup& g = groups_[G.group];
  FlowGroup::Member& mb = g.members[j];
  Record& M = records_[ms];
  take_group_state(M, G);
  const EventId id = mb.id(G.id);
  M.id = id;
  M.gpu = mb.src;
  M.dst = mb.dst;
  M.start = G.start;
  M.transfer_end = G.transfer_end;
  M.finish = G.finish;
  materialize_schedule(g, G);
  if (j < g.sched.size()) {  // scheduled (a group is split only once it is)
    M.ready = g.sched[j].ready;
    M.waiting = g.sched[j].waiting;
  }
  M.trim_at = G.trim_at;
  for (const Segment& s : G.segments) M.segments.push_back(s);
  for (uint32_t d = mb.dep_from; d < g.dep_end(j); ++d) M.deps.push_back(g.deps[d]);
  // (Its dependents: the caller takes them from the group's list, take_dependents().)
  if (record_timeline_) {
    GroupSide& gs = side(G.group);
    if (j < gs.labels.size()) notes_[ms] = TimelineNote{std::move(gs.labels[j])};
  }
  ids_.rebind(id, ms);
  return ms;
}

// Only for a pending group's ready members (the group keeps its times: none yet).
uint32_t Simulator::extract(uint32_t slot, const std::vector<uint32_t>& positions) {
  members_apart_ += positions.size();
  // Links stand for edges only while both groups keep their members (ids not rebound yet).
  unlink(slot);
  expand_links(groups_[records_[slot].group]);
  uint32_t out;
  if (positions.size() == 1) {
    out = member_record(slot, positions[0]);
    take_dependents(groups_[records_[slot].group], positions,
                    [&](uint32_t, EventId dep) { records_[out].dependents.push_back(dep); });
  } else {
    out = allocate_slot();
    const uint32_t gi = allocate_group();
    const Record& G = records_[slot];
    FlowGroup& g = groups_[G.group];
    FlowGroup& n = groups_[gi];
    n.rate = g.rate;
    Record& N = records_[out];
    take_group_state(N, G);
    N.ready = std::numeric_limits<Time>::infinity();
    N.group = gi;
    n.members.reserve(log_pool_, positions.size());
    const EventId n_first = g.members[positions[0]].id(G.id);  // N's id
    for (uint32_t j : positions) {
      FlowGroup::Member& mb = g.members[j];
      const EventId id = mb.id(G.id);
      FlowGroup::Member& nm = n.members.emplace_back(log_pool_);
      nm.off = FlowGroup::Member::offset(id, n_first);
      nm.src = mb.src;
      nm.dst = mb.dst;
      n.sched.push_back(sched_pool_, FlowGroup::Schedule{g.sched[j].ready, 0});  // ready: waits on nothing
      nm.dep_from = static_cast<uint32_t>(n.deps.size());
      n.deps.insert(log_pool_, n.deps.size(), g.deps.data() + mb.dep_from, g.deps.data() + g.dep_end(j));
      if (record_timeline_) {
        GroupSide& ns = side(gi);  // (first: side() may grow the table once)
        GroupSide& gs = side(G.group);
        if (j < gs.labels.size()) ns.labels.push_back(std::move(gs.labels[j]));
      }
      ids_.rebind(id, out);
      ids_.set_member(id, static_cast<uint32_t>(n.members.size() - 1));
    }
    take_dependents(g, positions, [&](uint32_t i, EventId dep) {
      n.dependents.push_back(group_pool_, FlowGroup::Dependent{dep, i});  // n's members are in positions' order
    });
    n.live = static_cast<uint32_t>(n.members.size());
    N.id = n_first;
    N.gpu = n.members[0].src;
    N.dst = n.members[0].dst;
  }
  // The members taken out leave holes (the others keep their positions: no id is rebound).
  FlowGroup& g = groups_[records_[slot].group];
  g.live -= static_cast<uint32_t>(positions.size());
  for (uint32_t j : positions) g.members[j].off = FlowGroup::Member::kTakenOut;  // (their dependents went along)
  return out;
}

void Simulator::split_claims(const Route& route, Time now) {
  if (!claimed_) return;
  for (int i = 0; i < route.count; ++i) {
    const uint32_t claim = links_[route.links[i]].claim;
    if (claim != kNoGroup) split(claim, now);
  }
}

bool Simulator::split_groups(const std::vector<uint32_t>& slots, Time now) {
  bool any = false;
  for (uint32_t slot : slots) {
    // A group's entries on one link are one per member there: at most one, but the list may
    // name a group split a moment ago (its record is dead then).
    if (records_[slot].group == kNoGroup || records_[slot].dirty) continue;
    split(slot, now);
    any = true;
  }
  return any;
}

void Simulator::split(uint32_t gslot, Time now) {
  Record& G = records_[gslot];  // records never move (chunked_store.h)
  const uint32_t gi = G.group;
  const bool moving = G.dirty && G.phase == Phase::moving;
  const bool pending = G.dirty && G.phase == Phase::pending;
  if (G.dirty && !moving && !pending) {
    // Nothing reaches a group in its tail or done within its sweep.
    vgpu::log::once(vgpu::log::Level::error, "simcore-group-split-phase",
                    "simcore: internal: a flow group was split after its transfer");
  }
  unlink(gslot);  // (as in extract())
  expand_links(groups_[gi]);
  first_usable_ = false;  // its members join touched, at the group's rate
  std::vector<uint32_t> slots, positions;
  std::vector<Route> routes;
  for_each_member_route(G, [&](uint32_t j, const Route& route) {
    if (moving)
      for (int i = 0; i < route.count; ++i) links_[route.links[i]].claim = kNoGroup;
    routes.push_back(route);
    positions.push_back(j);
    slots.push_back(member_record(gslot, j));
  });
  take_dependents(groups_[gi], positions,
                  [&](uint32_t i, EventId dep) { records_[slots[i]].dependents.push_back(dep); });
  const size_t m = slots.size();
  // The group's index entry becomes its members' entries in their links' indexes (same start),
  // counted there when simulated (a group counts only in its links' group bounds).
  if (G.indexed) {
    unindex_group(G);
    for (size_t j = 0; j < m; ++j) {
      const Record& M = records_[slots[j]];
      index_insert(slots[j], M, routes[j]);
      if (!G.dirty) count_clean(M, routes[j]);
    }
  }
  // A simulated group whose finish the sweep was to announce: each member's is announced.
  if (!G.dirty && (G.finish_queued || G.finish_announced)) {
    for (uint32_t ms : slots) {
      Record& M = records_[ms];
      M.finish_queued = G.finish_queued;
      M.finish_announced = G.finish_announced;
      announced_.push_back(ms);
      if (M.finish_queued && !M.finish_announced) push(M.finish, ms, kCleanFinish);
    }
  }
  const double rate = G.segments.empty() ? 0.0 : G.segments.back().rate;
  const Time end_due = G.end_queued;
  // The record is dead: its queue items are stale, its slot is freed once the sweep is over.
  G.id = kNoEvent;
  ++G.version;
  G.indexed = false;
  G.phase = Phase::done;
  G.group = kNoGroup;
  dead_slots_.push_back(gslot);
  if (groups_[gi].handle != FlowGroup::kNoHandle) ids_.close_handle(groups_[gi].handle);
  reset_group(gi);
  free_groups_.push_back(gi);

  if (!G.dirty) {
    // Simulated already (before a sweep): each member is the same finished history.
    for (uint32_t ms : slots) {
      Record& M = records_[ms];
      M.finish_stamp = ++stamps_;
      finish_order_.push(FinishEntry{M.finish, M.finish_stamp, ms});
    }
    return;
  }
  for (uint32_t ms : slots) dirty_.push_back(ms);
  if (moving) {
    // Every member goes on at the group's rate; the solve at the end of this instant gives the
    // ones beside the newcomer their share.
    for (size_t j = 0; j < m; ++j) {
      Record& M = records_[slots[j]];
      solver_.attach(slots[j], routes[j], rate, /*touch=*/true);
      M.end_queued = std::numeric_limits<Time>::infinity();
      queue_transfer_end(M, slots[j], end_due);
    }
  } else if (pending) {
    // start_group() found a link in use: every member is ready now and starts one by one.
    for (uint32_t ms : slots) begin(ms, now);
  }
}

bool Simulator::group_holds(uint32_t gi, LinkId link) const {
  const FlowGroup& g = groups_[gi];
  GroupSide& gs = side(gi);
  if (!gs.links_sorted) {
    gs.links.clear();
    for (const FlowGroup::Member& mb : g.members) {
      if (!mb.present()) continue;
      const Route route = topology_.sharing_links(mb.src, mb.dst);
      gs.links.insert(gs.links.end(), route.links.begin(), route.links.begin() + route.count);
    }
    std::sort(gs.links.begin(), gs.links.end());
    gs.links_sorted = true;
  }
  return std::binary_search(gs.links.begin(), gs.links.end(), link);
}

void Simulator::retire_group(uint32_t slot) {
  Record& r = records_[slot];
  const uint32_t gi = r.group;
  FlowGroup& g = groups_[gi];
  if (record_timeline_) append_member_entries(r, retired_timeline_);
  if (r.indexed) unindex_group(r);
  const Interval final_interval{r.start, r.finish};
  // Its members' ids through its handle at once, else one by one (those taken out were
  // rebound: neither way reaches them).
  if (g.handle != FlowGroup::kNoHandle) {
    ids_.retire_handle(g.handle, final_interval);
    ids_.close_handle(g.handle);
  } else {
    for (const FlowGroup::Member& mb : g.members)
      if (mb.present()) ids_.retire(mb.id(r.id), final_interval);
  }
  live_ -= g.live;
  reset_group(gi);
  free_groups_.push_back(gi);
  r.group = kNoGroup;
  r.id = kNoEvent;
  free_slots_.push_back(slot);
}

void Simulator::append_member_entries(const Record& r, std::vector<TimelineEntry>& out) const {
  const FlowGroup& g = groups_[r.group];
  const GroupSide& gs = side(r.group);
  static const std::string kNoLabel;
  for (uint32_t j = 0; j < g.members.size(); ++j) {
    if (!g.members[j].present()) continue;
    TimelineEntry e = timeline_entry(r, j < gs.labels.size() ? gs.labels[j] : kNoLabel);
    e.gpu = g.members[j].src;
    e.dst = g.members[j].dst;
    out.push_back(std::move(e));
  }
}

void Simulator::report_group_reached(const char* where) const {
  vgpu::log::once(vgpu::log::Level::error, "simcore-group-reached",
                  fmt::format("simcore: internal: a simulated flow group was reached by a rewind "
                              "({}); its members keep their old times",
                              where));
}

template void Simulator::submit_flows<NewEvent>(std::span<const NewEvent>, std::span<EventId>);
template void Simulator::submit_flows<FlowSpec>(std::span<const FlowSpec>, std::span<EventId>);

}  // namespace simcore::detail
