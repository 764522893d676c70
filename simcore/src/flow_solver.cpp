#include "flow_solver.h"

#include <algorithm>
#include <functional>

namespace simcore::detail {

FlowSolver::FlowSolver(const Topology& topology, SolverMode mode) : mode_(mode) {
  links_.resize(topology.links().size());
  for (size_t i = 0; i < links_.size(); ++i) links_[i].capacity = topology.links()[i].capacity;
  checks_.resize(links_.size());
  load_.assign(links_.size(), LinkLoad{});
  bottlenecked_.assign(links_.size(), 0);
  scanned_.assign(links_.size(), 0);
}

// Each link once per batch: a sweep's start attaches ~150 clean flows on a few dozen links, and
// seed_local() / unsolved_touched() scan every flow of every listed link.
void FlowSolver::touch(LinkId id) {
  LinkState& l = links_[id];
  if (l.touched == epoch_ + 1) return;  // solve() numbers the batch it closes epoch_ + 1
  l.touched = epoch_ + 1;
  touched_.push_back(id);
}

inline void FlowSolver::list_on_links(FlowState& f, uint32_t slot, const Route& route, bool dirty, bool touch_links) {
  for (int i = 0; i < route.count; ++i) {
    const LinkId id = route.links[i];
    f.links[i] = id;
    f.pos[i] = static_cast<uint32_t>(links_[id].flows.size());
    links_[id].flows.push_back(slot);
    ++load_[id].all;
    if (dirty) ++load_[id].dirty;
    if (touch_links) touch(id);
  }
}

void FlowSolver::attach(uint32_t slot, const Route& route, double rate, bool touch_links) {
  if (slot >= flows_.size()) flows_.resize(std::max<size_t>(slot + 1, flows_.size() * 2));
  FlowState& f = flows_[slot];
  f.count = static_cast<uint8_t>(route.count);
  f.attached = true;
  if (touch_links && !f.fresh) {
    f.fresh = true;
    fresh_.push_back(slot);
  }
  f.rate = rate;
  f.next_rate = rate;
  if (f.bottleneck != kNoLink) ++bottlenecked_[f.bottleneck];  // a rewound flow's, or a stale one
  list_on_links(f, slot, route, true, touch_links);
  ++attached_;
  if (mode_ == SolverMode::full_resolve) {
    f.all_pos = static_cast<uint32_t>(all_.size());
    all_.push_back(slot);
  }
}

// Whether another flow froze on one of this flow's links in its last filling (a flow attached
// since, whose field may be stale, touched its links itself, so its component is re-solved
// anyway).
bool FlowSolver::others_bottlenecked(uint32_t slot) const {
  const FlowState& f = flows_[slot];
  for (int i = 0; i < f.count; ++i) {
    const LinkId id = f.links[i];
    if (bottlenecked_[id] > (f.bottleneck == id ? 1u : 0u)) return true;
  }
  return false;
}

void FlowSolver::detach(uint32_t slot, bool touch_links) {
  FlowState& f = flows_[slot];
  if (!f.attached) return;
  if (touch_links && mode_ == SolverMode::incremental && !others_bottlenecked(slot)) touch_links = false;
  // Flows slower than this one keep their rates (top of flow_solver.h). One that arrived in
  // this batch had no max-min rate yet: leaving, it only undoes its own arrival.
  if (touch_links && !f.fresh) departed_floor_ = std::min(departed_floor_, f.rate);
  for (int i = 0; i < f.count; ++i) {
    const LinkId id = f.links[i];
    if (!f.pinned) --load_[id].dirty;
    auto& v = links_[id].flows;
    // Swap-remove, then tell the moved flow where it now sits in this link's vector.
    const uint32_t moved = v.back();
    v[f.pos[i]] = moved;
    v.pop_back();
    --load_[id].all;
    if (moved != slot) {
      FlowState& m = flows_[moved];
      for (int k = 0; k < m.count; ++k)
        if (m.links[k] == id) {
          m.pos[k] = f.pos[i];
          break;
        }
    }
    if (touch_links) touch(id);
  }
  if (f.bottleneck != kNoLink) --bottlenecked_[f.bottleneck];  // the field stays (attach() counts it again)
  --attached_;
  if (mode_ == SolverMode::full_resolve) {
    const uint32_t last = all_.back();
    all_[f.all_pos] = last;
    flows_[last].all_pos = f.all_pos;
    all_.pop_back();
  }
  f.attached = false;
  f.pinned = false;  // (a doomed one stays listed: unpin_doomed() skips it)
  f.rate = 0;
}

void FlowSolver::attach_pinned(uint32_t slot, const Route& route, double rate) {
  if (slot >= flows_.size()) flows_.resize(std::max<size_t>(slot + 1, flows_.size() * 2));
  FlowState& f = flows_[slot];
  // Its bottleneck is what verify_pinned() finds, not the one of its last filling.
  if (f.attached) return;
  f.bottleneck = kNoLink;
  f.pinned = true;
  f.doomed = false;
  f.fresh = false;
  f.count = static_cast<uint8_t>(route.count);
  f.attached = true;
  f.rate = rate;
  f.next_rate = rate;
  list_on_links(f, slot, route, false, false);
  ++attached_;
  verify_.push_back(slot);
}

void FlowSolver::set_pinned_rate(uint32_t slot, double rate) {
  FlowState& f = flows_[slot];
  if (f.rate == rate) return;
  f.rate = rate;
  f.next_rate = rate;
  // Its links gain or lose what it moved: the flows filled there are filled again, from no
  // floor (the floor's rules are about flows of a max-min allocation leaving or arriving).
  departed_floor_ = 0;
  for (int i = 0; i < f.count; ++i) touch(f.links[i]);
  verify_.push_back(slot);
}

void FlowSolver::doom(uint32_t slot) {
  FlowState& f = flows_[slot];
  if (f.doomed) return;
  f.doomed = true;
  unpinned_.push_back(slot);
}

void FlowSolver::make_fresh(uint32_t slot) {
  FlowState& f = flows_[slot];
  if (!f.fresh) {
    f.fresh = true;
    fresh_.push_back(slot);
  }
  for (int i = 0; i < f.count; ++i) touch(f.links[i]);
}

bool FlowSolver::adopt_known(bool usable) {
  if (known_.empty()) return true;
  // A known flow that left again within the instant told its departure from a stale bottleneck
  // (detach()): its neighbours are re-solved from scratch instead.
  for (uint32_t slot : known_)
    if (!flows_[slot].attached) usable = false;
  const bool ok = usable && mode_ == SolverMode::incremental && find_known_bottlenecks();
  if (!ok) {
    for (uint32_t slot : known_)
      if (flows_[slot].attached) make_fresh(slot);
  }
  known_.clear();
  return ok;
}

// Every known flow's links, with what the old allocation put on each: the attached flows that
// are not fresh (the solver was empty when the sweep began, so those are the known ones).
bool FlowSolver::find_known_bottlenecks() {
  // Relative slack for rounding, as widen_local()'s: the rates came from fillings whose sums
  // are exact up to a few ulps.
  constexpr double kEps = 1e-12;
  if (link_sum_.size() < links_.size()) {
    link_sum_.resize(links_.size());
    link_top_.resize(links_.size());
  }
  ++round_;
  for (uint32_t slot : known_) {
    const FlowState& f = flows_[slot];
    for (int i = 0; i < f.count; ++i) {
      LinkState& l = links_[f.links[i]];
      if (l.round == round_) continue;
      l.round = round_;
      double sum = 0, top = 0;
      for (uint32_t other : l.flows) {
        const FlowState& o = flows_[other];
        if (o.fresh) continue;
        sum += o.rate;
        top = std::max(top, o.rate);
      }
      link_sum_[f.links[i]] = sum;
      link_top_[f.links[i]] = top;
    }
  }
  for (uint32_t slot : known_) {
    FlowState& f = flows_[slot];
    LinkId found = kNoLink;
    for (int i = 0; i < f.count && found == kNoLink; ++i) {
      const LinkId id = f.links[i];
      if (link_sum_[id] >= links_[id].capacity * (1 - kEps) && f.rate >= link_top_[id] * (1 - kEps)) found = id;
    }
    if (found == kNoLink) return false;
    set_bottleneck(f, found);
  }
  return true;
}

// The rate the max-min allocation gives a flow arriving alone among flows whose rates are
// the max-min ones without it. A flow slower than the arrival keeps its rate and one at least as
// fast stays at least as fast (both directions of the departure rule), so on each link L the
// others take sum_f min(rate_f, x) at the arrival's rate x; the arrival gets the smallest x at
// which one of its links is full: on its bottleneck that sum + x = capacity, on the others it
// is at most the capacity.
double FlowSolver::arrival_rate(uint32_t slot) {
  const FlowState& a = flows_[slot];
  double rate = std::numeric_limits<double>::infinity();
  for (int i = 0; i < a.count; ++i) {
    const LinkState& l = links_[a.links[i]];
    rates_.clear();
    for (uint32_t other : l.flows)
      if (other != slot) rates_.push_back(flows_[other].rate);
    std::sort(rates_.begin(), rates_.end());
    // x with the j slowest below it: (capacity - their sum) / (the others + the arrival).
    double left = l.capacity;
    size_t j = 0;
    double x = left / static_cast<double>(rates_.size() + 1);
    while (j < rates_.size() && rates_[j] < x) {
      left -= rates_[j++];
      x = left / static_cast<double>(rates_.size() - j + 1);
    }
    rate = std::min(rate, x);
  }
  return rate;
}

double FlowSolver::batch_floor() {
  double floor = departed_floor_;
  uint32_t arrivals = 0, arrival = 0;
  for (uint32_t slot : fresh_)
    if (flows_[slot].attached) ++arrivals, arrival = slot;
  if (arrivals == 1 && floor == std::numeric_limits<double>::infinity()) {
    floor = arrival_rate(arrival);
  } else {
    for (uint32_t slot : fresh_) {
      const FlowState& f = flows_[slot];
      if (!f.attached) continue;
      // Among other changes: its new rate is at least the smallest initial share of its links.
      for (int i = 0; i < f.count; ++i) {
        const LinkState& l = links_[f.links[i]];
        floor = std::min(floor, l.capacity / static_cast<double>(l.flows.size()));
      }
    }
  }
  // Rounding: a flow that froze at the leaving flow's level may read a hair slower; one more
  // flow refilled is harmless, one kept that should move is not.
  return floor * (1 - 1e-9);
}

void FlowSolver::end_batch() {
  for (uint32_t slot : fresh_) flows_[slot].fresh = false;
  fresh_.clear();
  departed_floor_ = std::numeric_limits<double>::infinity();
}

bool FlowSolver::unsolved_touched() const {
  for (LinkId id : touched_)
    for (uint32_t slot : links_[id].flows)
      if (flows_[slot].seen != epoch_) return true;
  return false;
}

void FlowSolver::seed_local() {
  comp_flows_.clear();
  comp_links_.clear();  // add_bottlenecked() lists the links of every flow taken in
  ++round_;
  for (LinkId id : touched_) {
    scanned_[id] = epoch_;  // what add_bottlenecked() would take in here, the loop below takes
    for (uint32_t slot : links_[id].flows) {
      FlowState& f = flows_[slot];
      if (f.seen == epoch_) continue;  // solved alone, or already in
      if (f.pinned) {  // never filled; checked again if it froze here
        if (f.bottleneck == id) verify_.push_back(slot);
        continue;
      }
      if (f.fresh || (f.bottleneck == id && f.rate >= floor_)) {
        f.seen = epoch_;
        comp_flows_.push_back(slot);
      }
    }
  }
  add_bottlenecked(0);
}

// Transitively: a moved flow that speeds up takes from the flows bottlenecked on its other links
// (and they from the flows bottlenecked on theirs); widen_local() finding them one level per
// filling cost a round each (flow_solver_test's one-change traffic: 1.74 fillings per local
// re-solve, up to 8; with the closure 1.30, at most 4; the rollback benchmark's re-simulation
// -8% / -11% instructions 1 / 10 events back).
void FlowSolver::add_bottlenecked(size_t first) {
  for (size_t k = first; k < comp_flows_.size(); ++k) {
    const FlowState& s = flows_[comp_flows_[k]];
    for (int i = 0; i < s.count; ++i) {
      const LinkId id = s.links[i];
      LinkState& l = links_[id];
      if (l.round != round_) {  // the component's links, for prepare_local(), in flow order
        l.round = round_;
        comp_links_.push_back(id);
      }
      if (scanned_[id] == epoch_) continue;
      if (bottlenecked_[id] <= (s.bottleneck == id ? 1u : 0u)) continue;  // nobody else froze here
      scanned_[id] = epoch_;
      ++bottleneck_scans_;
      for (uint32_t slot : links_[id].flows) {
        FlowState& f = flows_[slot];
        if (f.seen == epoch_ || f.bottleneck != id || f.rate < floor_) continue;
        if (f.pinned) {  // widen_local() checks this link (it is in comp_links_)
          continue;
        }
        f.seen = epoch_;
        comp_flows_.push_back(slot);
      }
    }
  }
}

void FlowSolver::prepare_local() {
  heap_.clear();
  for (LinkId id : comp_links_) {
    LinkState& l = links_[id];
    double remaining = l.capacity;
    double kept_sum = 0, kept_top = 0, kept_least = std::numeric_limits<double>::infinity();
    uint32_t unfrozen = 0;
    for (uint32_t slot : l.flows) {
      FlowState& f = flows_[slot];
      f.frozen = f.seen != epoch_;
      if (f.frozen) {
        remaining -= f.rate;
        kept_sum += f.rate;
        kept_top = std::max(kept_top, f.rate);
        if (f.bottleneck == id) kept_least = std::min(kept_least, f.rate);
      } else {
        ++unfrozen;
      }
    }
    l.remaining = std::max(0.0, remaining);
    l.unfrozen = unfrozen;
    checks_[id] = LinkCheck{kept_sum, kept_top, kept_least, 0, 0, 0};
    if (unfrozen > 0) heap_.append(HeapItem::of(l.remaining / unfrozen, id));  // fill()'s queue
  }
}

bool FlowSolver::widen_local() {
  // Relative slack for rounding: a flagged flow is only refilled, never wrong.
  constexpr double kEps = 1e-12;
  const size_t before = comp_flows_.size();
  for (LinkId id : comp_links_) {
    const LinkState& l = links_[id];
    const LinkCheck& c = checks_[id];
    // The filled flows bottlenecked here froze here, all at one share.
    const double moved_top = c.frozen_here;
    const double others_top = c.kept_top;
    const double bottlenecked_least = c.kept_least;  // others' here
    const double top = std::max(c.kept_top, c.moved_top);
    const double sum = c.kept_sum + c.moved_sum;
    const bool full = sum >= l.capacity * (1 - kEps);
    // Mostly nothing to add: look for the flows only when the conditions below can hold.
    const bool outrun = moved_top > 0 && others_top > moved_top * (1 + kEps);
    const bool lost = bottlenecked_least != std::numeric_limits<double>::infinity() &&
                      (!full || bottlenecked_least < top * (1 - kEps));
    // Kept and pinned flows alone over the capacity: a pinned one cannot stay.
    const bool over = c.kept_sum > l.capacity * (1 + kEps);
    if (!outrun && !lost && !over) continue;
    for (uint32_t slot : l.flows) {
      FlowState& f = flows_[slot];
      if (f.seen == epoch_) continue;
      if (f.pinned) {
        if (f.doomed) continue;
        if (over || (moved_top > 0 && f.rate > moved_top * (1 + kEps))) doom(slot);
        else if (f.bottleneck == id && (!full || f.rate < top * (1 - kEps))) verify_.push_back(slot);
        continue;
      }
      if (f.rate < floor_) continue;  // below the floor nothing moves
      // A flow filled here is slower than it (so this is no bottleneck of theirs), or this was
      // its bottleneck and is no longer full or no longer has it the fastest.
      const bool outruns = moved_top > 0 && f.rate > moved_top * (1 + kEps);
      const bool lost_bottleneck = f.bottleneck == id && (!full || f.rate < top * (1 - kEps));
      if (!outruns && !lost_bottleneck) continue;
      f.seen = epoch_;
      comp_flows_.push_back(slot);
    }
  }
  add_bottlenecked(before);
  return comp_flows_.size() != before;
}

void FlowSolver::fill() {
  // The caller set every link's remaining capacity and unfrozen count, and every flow's frozen
  // mark, and appended every link with an unfrozen flow to the queue (prepare_local() does it
  // in the pass that counts them).
  heap_.order();
  // A link's share only grows as flows freeze elsewhere (a flow frozen at the smallest share s
  // leaves (R - s) / (U - 1) >= R / U), so its heap key may lag behind: it is brought up to date
  // when it reaches the top, and pushed back if it is no longer the smallest. One push per link
  // that turns out stale, not one per flow that froze.
  // Every flow of the component is unfrozen here: once the last one froze, the links still
  // queued have no flow to give a rate (on a dense fabric's large components about half of
  // them), so the filling stops there.
  size_t unfrozen_flows = comp_flows_.size();
  while (unfrozen_flows != 0 && !heap_.empty()) {
    const HeapItem top = heap_.pop();
    LinkState& l = links_[top.link()];
    if (l.unfrozen == 0) continue;
    const double current = l.remaining / l.unfrozen;
    if (current != top.share() && !heap_.empty() && current > heap_.top().share()) {
      heap_.push(HeapItem::of(current, top.link()));
      continue;
    }
    // Rounding can leave a share a hair below zero on a link that is exactly full; a flow must
    // never stall, so it keeps a sliver of the link.
    const double share = std::max(current, l.capacity * 1e-12);
    LinkCheck& c = checks_[top.link()];  // (full mode: written, never read)
    c.moved_sum += share * l.unfrozen;
    c.moved_top = std::max(c.moved_top, share);
    c.frozen_here = share;
    for (uint32_t slot : l.flows) {
      FlowState& f = flows_[slot];
      if (f.frozen) continue;
      f.frozen = true;
      --unfrozen_flows;
      f.next_rate = share;
      set_bottleneck(f, top.link());
      for (int i = 0; i < f.count; ++i) {
        const LinkId other = f.links[i];
        if (other == top.link()) continue;
        LinkState& o = links_[other];
        o.remaining = std::max(0.0, o.remaining - share);
        --o.unfrozen;
        LinkCheck& oc = checks_[other];
        oc.moved_sum += share;
        oc.moved_top = std::max(oc.moved_top, share);
      }
    }
    l.unfrozen = 0;
  }
}

size_t FlowSolver::memory_bytes() const {
  size_t bytes = links_.capacity() * sizeof(LinkState) +
                 checks_.capacity() * sizeof(LinkCheck) +
                 (2 * load_.capacity() + bottlenecked_.capacity() + scanned_.capacity() +
                  verify_.capacity() + unpinned_.capacity()) * sizeof(uint32_t) +
                 flows_.capacity() * sizeof(FlowState) +
                 all_.capacity() * sizeof(uint32_t) + heap_.capacity() * sizeof(HeapItem) +
                 (link_sum_.capacity() + link_top_.capacity()) * sizeof(double);
  for (const LinkState& l : links_)
    if (l.flows.capacity() > 2) bytes += l.flows.capacity() * sizeof(uint32_t);  // spilled
  return bytes;
}

}  // namespace simcore::detail
