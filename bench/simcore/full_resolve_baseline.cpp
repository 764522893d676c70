#include "full_resolve_baseline.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <queue>

#include "share_queue.h"

namespace simcore::bench {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

struct Running {
  uint32_t event;
  uint32_t count;
  std::array<LinkId, kMaxRouteLinks> links;
  double latency;
  double t0;    // bytes_left and rate hold from this time on
  double left;  // bytes still to move at t0
  double rate;
  double end;   // when its last byte leaves at this rate
};

struct Item {
  double t;
  uint32_t kind;  // 0: finish, 1: start (finishes first: they release starts)
  uint32_t event;
  bool operator>(const Item& o) const { return t != o.t ? t > o.t : kind > o.kind; }
};

// The engine's packed (share, link) key and its filling queue: both fill the same way.
using LinkHeapItem = simcore::detail::ShareKey;

class Baseline {
 public:
  Baseline(const Topology& topology, const std::vector<BaselineEvent>& events)
      : topo_(topology), events_(events) {
    const size_t links = topology.links().size();
    capacity_.resize(links);
    for (size_t i = 0; i < links; ++i) capacity_[i] = topology.links()[i].capacity;
    stamp_.assign(links, 0);
    count_.resize(links);
    offset_.resize(links);
    unfrozen_.resize(links);
    remaining_.resize(links);
  }

  BaselineResult run() {
    const size_t n = events_.size();
    result_.intervals.assign(n, Interval{});
    waiting_.assign(n, 0);
    ready_.resize(n);
    // Dependents as one flat array (counting sort by dependency).
    dep_offset_.assign(n + 1, 0);
    for (const BaselineEvent& e : events_)
      for (uint32_t d : e.after) ++dep_offset_[d + 1];
    for (size_t i = 0; i < n; ++i) dep_offset_[i + 1] += dep_offset_[i];
    dependents_.resize(dep_offset_[n]);
    std::vector<uint32_t> fill(dep_offset_.begin(), dep_offset_.end() - 1);
    for (size_t i = 0; i < n; ++i) {
      const BaselineEvent& e = events_[i];
      ready_[i] = e.not_before;
      waiting_[i] = static_cast<uint32_t>(e.after.size());
      for (uint32_t d : e.after) dependents_[fill[d]++] = static_cast<uint32_t>(i);
      if (waiting_[i] == 0) queue_.push(Item{e.not_before, 1, static_cast<uint32_t>(i)});
    }

    double next_end = kNever;
    while (!queue_.empty() || !running_.empty()) {
      const double now = std::min(queue_.empty() ? kNever : queue_.top().t, next_end);
      bool changed = false;
      if (next_end <= now) {
        for (size_t i = running_.size(); i-- > 0;) {
          if (running_[i].end > now) continue;
          queue_.push(Item{now + running_[i].latency, 0, running_[i].event});
          running_[i] = running_.back();
          running_.pop_back();
          changed = true;
        }
      }
      while (!queue_.empty() && queue_.top().t <= now) {
        const Item it = queue_.top();
        queue_.pop();
        if (it.kind == 0) finish(it.event, now);
        else changed |= start(it.event, now);
      }
      if (changed) next_end = solve(now);
    }
    return std::move(result_);
  }

 private:
  // True when a flow joined the running set.
  bool start(uint32_t idx, double now) {
    const BaselineEvent& e = events_[idx];
    result_.intervals[idx].start = now;
    if (e.task) {
      queue_.push(Item{now + e.duration, 0, idx});
      return false;
    }
    const Route route = topo_.sharing_route(e.src, e.dst);
    if (e.bytes == 0) {
      queue_.push(Item{now + route.latency, 0, idx});
      return false;
    }
    Running r{};
    r.event = idx;
    r.count = static_cast<uint32_t>(route.count);
    r.links = route.links;
    r.latency = route.latency;
    r.t0 = now;
    r.left = static_cast<double>(e.bytes);
    r.rate = 0;
    r.end = kNever;
    running_.push_back(r);
    return true;
  }

  void finish(uint32_t idx, double now) {
    result_.intervals[idx].finish = now;
    for (uint32_t k = dep_offset_[idx]; k < dep_offset_[idx + 1]; ++k) {
      const uint32_t d = dependents_[k];
      ready_[d] = std::max(ready_[d], now);
      if (--waiting_[d] == 0) queue_.push(Item{ready_[d], 1, d});
    }
  }

  // Progressive filling over every running flow; returns the next transfer end.
  double solve(double now) {
    ++result_.solves;
    result_.solved_flows += running_.size();
    ++epoch_;
    links_.clear();
    for (const Running& f : running_) {
      for (uint32_t i = 0; i < f.count; ++i) {
        const LinkId l = f.links[i];
        if (stamp_[l] != epoch_) {
          stamp_[l] = epoch_;
          count_[l] = 0;
          links_.push_back(l);
        }
        ++count_[l];
      }
    }
    uint32_t acc = 0;
    heap_.clear();
    for (LinkId l : links_) {
      offset_[l] = acc;
      acc += count_[l];
      unfrozen_[l] = count_[l];
      remaining_[l] = capacity_[l];
      heap_.append(LinkHeapItem::of(capacity_[l] / count_[l], l));
    }
    flat_.resize(acc);
    for (uint32_t k = 0; k < running_.size(); ++k) {
      const Running& f = running_[k];
      for (uint32_t i = 0; i < f.count; ++i) flat_[offset_[f.links[i]]++] = k;
    }
    // offset_ now points one past each link's list; its start is offset_ - count_.
    new_rate_.assign(running_.size(), -1.0);
    heap_.order();
    // Shares only grow as flows freeze elsewhere: a stale key is refreshed when it reaches the
    // top (the same filling as the engine's).
    while (!heap_.empty()) {
      const LinkHeapItem top = heap_.pop();
      const LinkId l = top.link();
      if (unfrozen_[l] == 0) continue;
      const double current = remaining_[l] / unfrozen_[l];
      if (current != top.share() && !heap_.empty() && current > heap_.top().share()) {
        heap_.push(LinkHeapItem::of(current, l));
        continue;
      }
      const double share = std::max(current, capacity_[l] * 1e-12);
      for (uint32_t k = offset_[l] - count_[l]; k < offset_[l]; ++k) {
        const uint32_t fi = flat_[k];
        if (new_rate_[fi] >= 0) continue;
        new_rate_[fi] = share;
        const Running& f = running_[fi];
        for (uint32_t i = 0; i < f.count; ++i) {
          const LinkId o = f.links[i];
          if (o == l) continue;
          remaining_[o] = std::max(0.0, remaining_[o] - share);
          --unfrozen_[o];
        }
      }
      unfrozen_[l] = 0;
    }
    double next_end = kNever;
    for (uint32_t k = 0; k < running_.size(); ++k) {
      Running& f = running_[k];
      const double rate = new_rate_[k];
      if (rate != f.rate) {
        if (f.t0 != now) {
          f.left = std::max(0.0, f.left - f.rate * (now - f.t0));
          f.t0 = now;
        }
        f.rate = rate;
        f.end = now + f.left / rate;
      }
      next_end = std::min(next_end, f.end);
    }
    return next_end;
  }

  const Topology& topo_;
  const std::vector<BaselineEvent>& events_;
  BaselineResult result_;
  std::vector<uint32_t> waiting_;
  std::vector<double> ready_;
  std::vector<uint32_t> dep_offset_, dependents_;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue_;
  std::vector<Running> running_;
  // Per link, valid where stamp_ == epoch_.
  std::vector<double> capacity_, remaining_;
  std::vector<uint32_t> stamp_, count_, offset_, unfrozen_;
  std::vector<LinkId> links_;
  std::vector<uint32_t> flat_;
  std::vector<double> new_rate_;
  simcore::detail::ShareQueue heap_;
  uint32_t epoch_ = 0;
};

}  // namespace

BaselineResult full_resolve_simulate(const Topology& topology,
                                     const std::vector<BaselineEvent>& events) {
  return Baseline(topology, events).run();
}

}  // namespace simcore::bench
