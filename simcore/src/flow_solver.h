// Max-min fair rates for the flows in flight: which flow crosses which link, and what share of
// each link each flow gets. It knows nothing about time; the simulator attaches a flow when it
// starts moving bytes, detaches it when its last byte left, and asks for a re-solve after each
// batch of such changes.
//
// Incremental mode: a change marks the links it touches, and solve() re-solves locally. The
// flows that may move are the ones that arrived and those whose bottleneck (the link where they
// froze in their last filling) was touched, with the flows bottlenecked on their other links
// (transitively, add_bottlenecked());
// they are filled on what the other flows leave of each link. An allocation is max-min fair exactly when every flow has a bottleneck, a full
// link on which no flow gets more; so the result is checked on every link the moved flows cross,
// and a flow it leaves without its bottleneck (the link is no longer full, or a flow there now
// gets more) or that now outruns a moved flow on that one's bottleneck joins them, and the
// filling runs again (usually once or twice; at worst the whole component). Links no moved flow
// crosses keep their flows and rates (a leaving flow's links are touched), so the answer is the
// max-min one, which is unique: the full re-solve's up to rounding.
// A flow that leaves touches nothing when no other flow is bottlenecked on one of its links:
// every remaining flow keeps its bottleneck (the leaving flow crossed none of them).
// Flows below the batch's floor never join: every flow slower than a leaving flow keeps its
// rate (it froze, in the filling, on a link the leaving flow does not cross, before the leaving
// flow's level was reached; without it the filling runs the same up to that level), and so does
// every flow slower than an arriving flow's new rate (exact for a lone arrival: on each link the
// others take sum min(rate, x) at its rate x; among other changes the smallest initial share of
// its links bounds it). Several changes at one instant take the smallest floor (departures
// first, then arrivals: the allocation is unique, so the order is free). On the rollback
// benchmark's dense traffic a re-solve after a departure fills ~10 flows instead of the
// component's ~100.
// Pinned flows (a rollback's sweep, simulator.h): a clean flow moving beside dirty work may be
// attached at the rate its old history gives it, which the simulator changes at its old segment
// boundaries. The filling never gives it a rate (its rate is subtracted from its links like a
// kept flow's); it stays only while the result is max-min with it: none of its links where a
// dirty flow is attached (seen whole: the simulator attaches every clean flow moving there) is
// over its capacity, it does not outrun a filled flow on that one's bottleneck, and it has a
// bottleneck: full, no flow faster, either such a link, or a link without dirty work (every
// flow there clean at its old rate: the simulator reads them from its index, and checks the flow
// again where the old history changes there). A link without dirty work is as in the old
// history, which was max-min, so the allocation is max-min (unique: the full re-solve's up to
// rounding). A pinned flow failing the check is unpinned: solve() hands it to pins.unpin() (the
// simulator makes it dirty and pulls in its links' clean flows) and it joins the next solve() as
// an arrival, with no floor.
// Full mode (benchmark baseline): every flow in flight is re-solved at every solve().
//
// Both run the same progressive filling: the link with the smallest fair share (remaining
// capacity / unfrozen flows) is the next bottleneck; its flows freeze at that share, which is
// subtracted from the other links they cross. Links wait in a queue keyed by share (share_queue.h); since
// shares only grow, a key is refreshed only when it reaches the top.
// The flows of a link live in an intrusive vector: each flow remembers its position in each of
// its links' vectors, so attaching and detaching cost O(route length).
#pragma once

#include <algorithm>
#include <array>
#include <boost/container/small_vector.hpp>
#include <limits>
#include <cstdint>
#include <vector>

#include "share_queue.h"
#include "simcore/engine.h"
#include "simcore/topology.h"

namespace simcore::detail {

class FlowSolver {
 public:
  FlowSolver(const Topology& topology, SolverMode mode);

  // `slot` names the flow (the simulator's record index). A flow attaches with the rate it had
  // (0 for a new flow; its recorded rate when a rewind puts it back). `touch` marks its links for
  // the next solve(); a rewind restoring a known state does not touch.
  void attach(uint32_t slot, const Route& route, double rate, bool touch);
  void detach(uint32_t slot, bool touch);
  size_t attached_count() const { return attached_; }

  // A pinned flow (top of this file): attached at `rate`, touching nothing; solve() checks it.
  void attach_pinned(uint32_t slot, const Route& route, double rate);
  // Its old history's next segment: its links are touched, and it is checked again.
  void set_pinned_rate(uint32_t slot, double rate);
  bool pinned(uint32_t slot) const { return slot < flows_.size() && flows_[slot].pinned; }
  // Dirty (not pinned) flows attached to a link: the simulator's presence of dirty work.
  uint32_t dirty_load(LinkId id) const { return load_[id].dirty; }
  // Something for solve() to do (touched links, or pinned flows to check).
  bool pending() const { return !touched_.empty() || !verify_.empty(); }
  uint64_t unpins() const { return unpins_; }

  // A sweep's first instant (simulator.h) starts from the old history's allocation at that
  // instant: a clean flow moving then (or starting then again) goes on at the rate it had,
  // which was max-min among the flows moving then. attach_known() attaches it untouched;
  // adopt_known() then gives every such flow its bottleneck in that allocation (a full link of
  // its route where no flow goes faster), so that the instant's solve re-solves only what the
  // new arrivals reach. When some flow has no such link, or `usable` is false (the simulator saw
  // something it cannot vouch for), every known flow is touched, as if attached with touch.
  // Returns whether the old allocation was adopted.
  void attach_known(uint32_t slot, const Route& route, double rate) {
    attach(slot, route, rate, /*touch=*/false);
    known_.push_back(slot);
  }
  bool adopt_known(bool usable);
  // The slot will soon attach (a reused slot's state is cold on a large cluster): fetch it.
  void prefetch(uint32_t slot) const {
    if (slot >= flows_.size()) return;
    const char* p = reinterpret_cast<const char*>(&flows_[slot]);
    __builtin_prefetch(p, 1);
    __builtin_prefetch(p + sizeof(FlowState) - 1, 1);
  }
  bool attached(uint32_t slot) const { return slot < flows_.size() && flows_[slot].attached; }
  double rate(uint32_t slot) const { return flows_[slot].rate; }
  // How many flows are attached to a link (from an array of its own: the simulator asks it of
  // every link a flow group starts on, and a link's LinkState was a cache miss there).
  size_t load(LinkId id) const { return load_[id].all; }

  // Re-solves what changed. on_change(slot, new_rate) is called for every flow whose rate moved;
  // pins.unpin(slot) for every pinned flow the result cannot keep (it is attached as an arrival
  // for the next solve(), at the rate it had). pins.present(link): whether dirty work the solver
  // does not hold (a ghost) is on a link; a pinned flow none of whose links has dirty work is
  // as in the old history on all of them, and leaves the solver quietly (released).
  template <class OnChange, class Pins> void solve(OnChange&& on_change, Pins&& pins);
  // pins.old_bottleneck(link, slot, rate): a link without dirty work, where every flow moves as
  // in the old history; whether it is full there with no flow faster than `rate`.
  struct NoPins {
    void unpin(uint32_t) {}
    bool present(LinkId) const { return false; }
    bool old_bottleneck(LinkId, uint32_t, double) const { return false; }
  };
  template <class OnChange> void solve(OnChange&& on_change) { solve(on_change, NoPins{}); }
  // A pinned flow to check after the next solve() (the old history changed on the link it was
  // vouched for by).
  void verify(uint32_t slot) { verify_.push_back(slot); }
  uint64_t released() const { return released_; }

  uint64_t solves() const { return solves_; }
  uint64_t solved_flows() const { return solved_flows_; }
  // Local re-solves run (incremental mode, the flows solved alone aside), the fillings they ran
  // (one per widen_local() round) and the most one of them needed.
  uint64_t local_solves() const { return local_solves_; }
  uint64_t local_fillings() const { return local_fillings_; }
  uint32_t most_local_fillings() const { return most_local_fillings_; }
  // Links whose flows add_bottlenecked() read, over every solve().
  uint64_t bottleneck_scans() const { return bottleneck_scans_; }
  size_t memory_bytes() const;

 private:
  struct LinkState {
    double capacity = 0;
    // Attached flows (slots); most links carry one or two, kept inline: a separate buffer was
    // one more cache miss per link at every attach and detach on a large cluster.
    boost::container::small_vector<uint32_t, 2> flows;
    uint32_t seen = 0;            // epoch of the last solve() that solved it (alone, or full mode)
    uint32_t round = 0;           // add_bottlenecked(): round_ when it was listed in comp_links_
    uint32_t touched = 0;         // touch(): epoch_ + 1 once listed in touched_ for the next solve()
    uint32_t unfrozen = 0;        // progressive filling: flows not yet given a rate
    double remaining = 0;         // progressive filling: capacity not yet handed out
  };
  // By link, a local re-solve's check (widen_local()), gathered by prepare_local() over the flows
  // that keep their rates and by fill() as it freezes the others, so that the check reads no
  // flow of a link where nothing is to be added (most of them). An array of its own: in
  // LinkState it made every link's state larger for the paths that never read it (a ring's
  // attach, detach and lone solves).
  struct LinkCheck {
    double kept_sum = 0;     // rates of the flows kept
    double kept_top = 0;     // the fastest of them
    double kept_least = 0;   // the slowest kept flow bottlenecked here (infinity: none)
    double moved_sum = 0;    // new rates of the flows filled
    double moved_top = 0;    // the fastest of them
    double frozen_here = 0;  // the share at which flows froze on this link (0: none)
  };
  struct FlowState {
    std::array<LinkId, kMaxRouteLinks> links{};
    std::array<uint32_t, kMaxRouteLinks> pos{};  // index of this flow in each link's vector
    uint8_t count = 0;
    bool attached = false;
    bool frozen : 1 = false;   // the filling under way gave it its rate (or it lies below the floor)
    bool fresh : 1 = false;    // attached with touch since the last solve(): its rate is not a max-min one
    bool pinned : 1 = false;   // at its old rate (top of this file)
    bool doomed : 1 = false;   // pinned, listed in unpinned_
    uint32_t seen = 0;     // epoch_ of the last solve() that gave it a rate (or may still)
    uint32_t all_pos = 0;  // index in all_ (full mode)
    LinkId bottleneck = kNoLink;  // where it froze in the last filling that gave it its rate
    double rate = 0;
    double next_rate = 0;
  };
  static constexpr LinkId kNoLink = std::numeric_limits<LinkId>::max();
  static_assert(sizeof(FlowState) == 80);
  using HeapItem = ShareKey;  // share_key.h

  void touch(LinkId id);
  // Lists the flow in `slot` on its route's links and counts it in their load (`dirty`: also in
  // their dirty load; `touch_links`: the links join this batch): what attach() and
  // attach_pinned() share.
  void list_on_links(FlowState& f, uint32_t slot, const Route& route, bool dirty, bool touch_links);
  void set_bottleneck(FlowState& f, LinkId id) {  // f is attached
    if (f.bottleneck == id) return;  // mostly: a re-filled flow froze where it did before
    if (f.bottleneck != kNoLink) --bottlenecked_[f.bottleneck];
    if (id != kNoLink) ++bottlenecked_[id];
    f.bottleneck = id;
  }
  bool others_bottlenecked(uint32_t slot) const;  // detach(): see the top of this file
  // A flow alone on every link of its route is a component of its own: its rate is its
  // narrowest link (what the filling gives, without the heap). False when it
  // shares a link.
  template <class OnChange> bool solve_alone(uint32_t slot, OnChange& on_change);
  // The local re-solve (top of this file): the flows that may move (seen == epoch_, in
  // comp_flows_, seeded from the touched links) are filled on what the others leave of every
  // link they cross (prepare_local(): comp_links_, remaining, unfrozen, frozen marks);
  // widen_local() adds every flow the result would leave without a bottleneck and says whether
  // it added any.
  bool unsolved_touched() const;  // a touched link carries a flow not solved in this epoch
  bool find_known_bottlenecks();  // adopt_known()
  void make_fresh(uint32_t slot);  // as if attached with touch
  void seed_local();
  void prepare_local();
  bool widen_local();
  // Adds the flows bottlenecked on a link of comp_flows_[first...] (above the floor), transitively.
  void add_bottlenecked(size_t first);
  double batch_floor();                 // the floor of the changes since the last solve()
  void end_batch();                     // forgets the changes since the last solve()
  double arrival_rate(uint32_t slot);   // batch_floor(): a lone arrival's exact new rate
  void fill();                          // progressive filling of comp_flows_ (queue: heap_)
  template <class OnChange> void apply(OnChange& on_change);
  // The pinned flows' checks (top of this file) after a solve: the listed ones (verify_) need
  // a bottleneck; widen_local() dooms one that outruns a filled flow.
  void doom(uint32_t slot);
  template <class Pins> void verify_pinned(Pins& pins);
  // Whether pinned flow `slot` keeps its rate: its bottleneck (kNoLink: it does not; kRelease:
  // no link of its route has dirty work).
  static constexpr LinkId kRelease = kNoLink - 1;
  template <class Pins> LinkId pinned_bottleneck(uint32_t slot, Pins& pins) const;
  template <class Pins> void unpin_doomed(Pins& pins);

  SolverMode mode_;
  std::vector<LinkState> links_;
  std::vector<LinkCheck> checks_;  // by link
  // By link: links_[id].flows.size(), and how many of them are not pinned (side by side: a
  // second array was a second cache miss per link at every attach and detach of a large ring).
  struct LinkLoad {
    uint32_t all = 0, dirty = 0;
  };
  std::vector<LinkLoad> load_;
  std::vector<uint32_t> verify_;      // pinned flows to check after this solve
  std::vector<uint32_t> unpinned_;    // pinned flows doomed by it
  uint64_t unpins_ = 0, released_ = 0;
  // By link: the attached flows whose bottleneck it is, so that others_bottlenecked() and
  // add_bottlenecked() skip a link nobody froze on without reading its flows' states.
  std::vector<uint32_t> bottlenecked_;
  // By link: epoch_ once seed_local() or add_bottlenecked() took in every flow bottlenecked on
  // it. Within one solve() a second scan finds nothing new (only the moved flows' bottlenecks and
  // rates change, and those are in already), and the moved flows of a re-solve mostly share
  // links: the rollback benchmark's re-solves scanned each such link once per moved flow on it.
  std::vector<uint32_t> scanned_;
  std::vector<FlowState> flows_;
  std::vector<LinkId> touched_;
  // Every attached flow, listed in full mode only: the incremental re-solve never reads the
  // list, and keeping it wrote another flow's state at every detach (the one moved into the gap).
  std::vector<uint32_t> all_;
  size_t attached_ = 0;
  std::vector<LinkId> comp_links_;
  std::vector<uint32_t> comp_flows_;
  std::vector<uint32_t> fresh_;  // flows attached with touch since the last solve()
  std::vector<double> rates_;    // arrival_rate()'s scratch
  std::vector<uint32_t> known_;  // attach_known() since the last adopt_known()
  std::vector<double> link_sum_, link_top_;  // adopt_known()'s scratch, by link
  double departed_floor_ = std::numeric_limits<double>::infinity();  // slowest leaving flow's rate
  double floor_ = 0;             // the floor of the solve() under way
  ShareQueue heap_;  // share_queue.h
  uint32_t epoch_ = 0;
  uint32_t round_ = 0;
  uint64_t solves_ = 0, solved_flows_ = 0;
  uint64_t local_solves_ = 0, local_fillings_ = 0;
  uint32_t most_local_fillings_ = 0;
  uint64_t bottleneck_scans_ = 0;
};

template <class OnChange> void FlowSolver::apply(OnChange& on_change) {
  ++solves_;
  solved_flows_ += comp_flows_.size();
  for (uint32_t slot : comp_flows_) {
    FlowState& f = flows_[slot];
    if (f.next_rate != f.rate) {
      f.rate = f.next_rate;
      on_change(slot, f.rate);
    }
  }
}

template <class OnChange> bool FlowSolver::solve_alone(uint32_t slot, OnChange& on_change) {
  FlowState& f = flows_[slot];
  double rate = std::numeric_limits<double>::infinity();
  LinkId narrowest = kNoLink;
  for (int i = 0; i < f.count; ++i) {
    const LinkState& l = links_[f.links[i]];
    if (l.flows.size() != 1) return false;
    if (l.capacity < rate) {
      rate = l.capacity;
      narrowest = f.links[i];
    }
  }
  set_bottleneck(f, narrowest);
  for (int i = 0; i < f.count; ++i) links_[f.links[i]].seen = epoch_;
  f.seen = epoch_;
  ++solves_;
  ++solved_flows_;
  f.next_rate = rate;
  if (rate != f.rate) {
    f.rate = rate;
    on_change(slot, rate);
  }
  return true;
}

// Its bottleneck (top of this file), with the rates just applied; kNoLink if it has none, or if
// one of its links where a dirty flow is attached is over its capacity.
template <class Pins> LinkId FlowSolver::pinned_bottleneck(uint32_t slot, Pins& pins) const {
  constexpr double kEps = 1e-12;  // rounding, as widen_local()'s
  const FlowState& f = flows_[slot];
  LinkId found = kNoLink;
  bool dirty_work = false;
  for (int i = 0; i < f.count; ++i) {
    const LinkId id = f.links[i];
    if (load_[id].dirty == 0) {  // not seen whole: as in the old history, unless a ghost is there
      if (pins.present(id)) dirty_work = true;
      else if (found == kNoLink && pins.old_bottleneck(id, slot, f.rate)) found = id;
      continue;
    }
    dirty_work = true;
    const LinkState& l = links_[id];
    double sum = 0, top = 0;
    for (uint32_t other : l.flows) {
      const double r = flows_[other].rate;
      sum += r;
      top = std::max(top, r);
    }
    if (sum > l.capacity * (1 + kEps)) return kNoLink;
    if (found == kNoLink && sum >= l.capacity * (1 - kEps) && f.rate >= top * (1 - kEps)) found = id;
  }
  return dirty_work ? found : kRelease;
}

template <class Pins> void FlowSolver::verify_pinned(Pins& pins) {
  for (uint32_t slot : verify_) {
    FlowState& f = flows_[slot];
    if (!f.attached || !f.pinned || f.doomed) continue;
    const LinkId b = pinned_bottleneck(slot, pins);
    if (b == kNoLink) {
      doom(slot);
    } else if (b == kRelease) {
      detach(slot, /*touch=*/false);  // (its links hold no flow it could check against)
      ++released_;
    } else {
      set_bottleneck(f, b);
    }
  }
  verify_.clear();
}

template <class Pins> void FlowSolver::unpin_doomed(Pins& pins) {
  if (unpinned_.empty()) return;
  // Every unpinned flow is an arrival of the next solve(); no floor: the rates around it were
  // max-min with a rate it could not keep.
  departed_floor_ = 0;
  for (uint32_t slot : unpinned_) {
    FlowState& f = flows_[slot];
    f.doomed = false;
    if (!f.attached || !f.pinned) continue;
    // Told first: the simulator notes the presence it brings where there was none.
    pins.unpin(slot);
    f.pinned = false;
    for (int i = 0; i < f.count; ++i) ++load_[f.links[i]].dirty;
    ++unpins_;
    make_fresh(slot);
  }
  unpinned_.clear();
}

template <class OnChange, class Pins>
void FlowSolver::solve(OnChange&& on_change, Pins&& pins) {
  if (touched_.empty()) {
    if (verify_.empty()) return;
    verify_pinned(pins);
    unpin_doomed(pins);
    return;
  }
  ++epoch_;
  if (mode_ == SolverMode::full_resolve) {
    touched_.clear();
    end_batch();
    comp_flows_.assign(all_.begin(), all_.end());
    comp_links_.clear();
    for (uint32_t slot : comp_flows_) {
      const FlowState& f = flows_[slot];
      for (int i = 0; i < f.count; ++i) {
        LinkState& l = links_[f.links[i]];
        if (l.seen != epoch_) {
          l.seen = epoch_;
          comp_links_.push_back(f.links[i]);
        }
      }
    }
    if (comp_flows_.empty()) return;
    for (uint32_t slot : comp_flows_) flows_[slot].frozen = false;
    heap_.clear();
    for (LinkId id : comp_links_) {
      LinkState& l = links_[id];
      l.remaining = l.capacity;
      l.unfrozen = static_cast<uint32_t>(l.flows.size());
      heap_.append(HeapItem::of(l.remaining / l.unfrozen, id));  // every listed link has a flow
    }
    fill();
    apply(on_change);
    return;
  }
  for (LinkId id : touched_) {
    const LinkState& l = links_[id];
    if (l.seen != epoch_ && l.flows.size() == 1 && !flows_[l.flows[0]].pinned) solve_alone(l.flows[0], on_change);
  }
  // The floor and the local re-solve only where a touched link still has a flow that was not
  // solved alone (a ring's flows never share a link: batch_floor() and seed_local() over every
  // flow of a step were 2% of such a ring). The floor does not depend on the rates solve_alone()
  // set: those flows share no link with any other.
  if (unsolved_touched()) {
    floor_ = batch_floor();
    seed_local();
  } else {
    comp_flows_.clear();
  }
  if (!comp_flows_.empty()) {
    uint32_t fillings = 0;
    do {
      prepare_local();
      fill();
      ++fillings;
    } while (widen_local());
    ++local_solves_;
    local_fillings_ += fillings;
    most_local_fillings_ = std::max(most_local_fillings_, fillings);
    apply(on_change);
  }
  touched_.clear();
  end_batch();
  verify_pinned(pins);
  unpin_doomed(pins);
}

}  // namespace simcore::detail
