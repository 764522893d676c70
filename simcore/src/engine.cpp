// The in-process Engine: validation, ranks and floors, finality and waiting, around one
// Simulator behind one mutex. Submissions only record; the simulation catches up lazily (the
// first call that needs an answer), so a burst of submissions costs one rewind, not one each.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "common/log.h"
#include "simcore/engine.h"
#include "simulator.h"

namespace simcore {
namespace {

constexpr Time kForever = std::numeric_limits<Time>::infinity();

void complain(const char* key, const std::string& message) {
  vgpu::log::once(vgpu::log::Level::warn, key, "simcore: " + message);
}

class LocalEngine final : public Engine {
 public:
  LocalEngine(const ClusterSpec& cluster, const EngineOptions& options) : sim_(cluster, options) {}

  EventId add_flow(const FlowSpec& f) override {
    std::lock_guard lock(mu_);
    detail::NewEvent e;
    if (!flow_event(f, "add_flow", e)) return kNoEvent;
    return submitted(sim_.submit(e));
  }

  void add_flows(std::span<const FlowSpec> flows, std::span<EventId> ids) override {
    std::lock_guard lock(mu_);
    const size_t n = std::min(flows.size(), ids.size());
    if (flows.size() > ids.size())
      complain("simcore-flows-ids", fmt::format("add_flows: {} flows but room for {} ids (the rest ignored)",
                                                flows.size(), ids.size()));
    if (n == 0) return;
    // Nothing to refuse or move (every flow checks, none starts before the floor): the
    // simulator reads the caller's flows as they stand, no event built for each.
    bool as_given = true;
    const Time floor = engine_floor();
    for (size_t k = 0; k < n && as_given; ++k)
      as_given = flow_valid(flows[k]) && flows[k].not_before >= floor;
    if (as_given) {
      sim_.submit_flows(flows.first(n), ids.first(n));
      submitted(ids[0]);
      return;
    }
    batch_.clear();
    batch_at_.clear();
    // Where each accepted flow came from, listed only once one is refused: until then the
    // k-th event is flows[k] and its id goes straight to ids[k] (two arrays of 8 bytes a flow
    // less to write and read back: a 4096-GPU ring's step passes ~2 MB through the cache).
    bool refused = false;
    for (size_t k = 0; k < n; ++k) {
      ids[k] = kNoEvent;
      // Filled in place: made on the stack and copied in, the event's narrow fields were read
      // back in 16-byte moves right after their stores, each waiting on them (a stall a flow).
      detail::NewEvent& e = batch_.emplace_back();
      if (!flow_event(flows[k], "add_flows", e)) {
        batch_.pop_back();
        if (!refused) {
          for (size_t i = 0; i < k; ++i) batch_at_.push_back(i);
          refused = true;
        }
        continue;
      }
      if (refused) batch_at_.push_back(k);
    }
    if (batch_.empty()) return;
    if (!refused) {
      sim_.submit_flows<detail::NewEvent>(batch_, ids.first(n));
      submitted(ids[0]);
      return;
    }
    batch_ids_.resize(batch_.size());
    sim_.submit_flows<detail::NewEvent>(batch_, batch_ids_);
    for (size_t i = 0; i < batch_.size(); ++i) ids[batch_at_[i]] = batch_ids_[i];
    submitted(batch_ids_[0]);
  }

  EventId add_task(const TaskSpec& t) override {
    std::lock_guard lock(mu_);
    const int gpus = sim_.topology().gpu_count();
    if (t.gpu < 0 || t.gpu >= gpus) {
      complain("simcore-task-gpu", fmt::format("add_task: GPU {} is outside 0..{}", t.gpu, gpus - 1));
      return kNoEvent;
    }
    if (!std::isfinite(t.duration) || t.duration < 0) {
      complain("simcore-task-duration", fmt::format("add_task: duration {} is not a time", t.duration));
      return kNoEvent;
    }
    if (!valid_common(t.not_before, t.after, "add_task")) return kNoEvent;
    detail::NewEvent e;
    e.kind = detail::EventKind::task;
    e.gpu = t.gpu;
    e.lane = t.lane;
    e.duration = t.duration;
    e.not_before = earliest(t.not_before, "add_task");
    e.after = &t.after;
    e.label = &t.label;
    e.carried = std::isfinite(t.carried) && t.carried > 0 ? std::min(t.carried, t.duration) : 0;
    return submitted(sim_.submit(e));
  }

  std::optional<Interval> query(EventId id) const override {
    std::lock_guard lock(mu_);
    if (!sim_.known(id)) return std::nullopt;
    if (!sim_.settled(id)) sim_.sync();
    return sim_.interval(id);
  }

  void release(EventId id) override {
    std::lock_guard lock(mu_);
    sim_.release(id);
  }

  void release(std::span<const EventId> ids) override {
    std::lock_guard lock(mu_);
    for (EventId id : ids) sim_.release(id);
  }

  bool is_final(EventId id) const override {
    std::lock_guard lock(mu_);
    if (!sim_.known(id)) return false;
    settle();
    return final_now(id);
  }

  void register_rank(int rank) override {
    std::lock_guard lock(mu_);
    if (ranks_.count(rank)) return;
    sim_.sync();
    // The first rank starts where history was reclaimed; a later one at the others' floor, so
    // that nothing final becomes tentative again.
    Time start = ranks_.empty() ? sim_.floor() : threshold_;
    if (!std::isfinite(start)) start = std::max(sim_.floor(), sim_.frontier());
    ranks_[rank] = Rank{start, kNoEvent};
    settle();
  }

  void set_rank_floor(int rank, Time t) override {
    std::lock_guard lock(mu_);
    auto it = ranks_.find(rank);
    if (it == ranks_.end()) {
      complain("simcore-floor-unregistered",
               fmt::format("set_rank_floor: rank {} is not registered (ignored)", rank));
      return;
    }
    if (std::isnan(t) || t < it->second.floor) {
      if (!std::isnan(t) && it->second.floor - t > 1e-12 * std::abs(t))
        complain("simcore-floor-back",
                 fmt::format("set_rank_floor: rank {} moved its floor back from {} to {} (ignored)",
                             rank, it->second.floor, t));
      return;
    }
    it->second.floor = t;
    settle();
  }

  void unregister_rank(int rank) override {
    std::lock_guard lock(mu_);
    if (ranks_.erase(rank) == 0) return;
    settle();
    cv_.notify_all();
  }

  std::optional<Interval> wait_final(EventId id) override { return wait_final_for_rank(id, kNoRank); }

  std::optional<Interval> wait_final_for_rank(EventId id, int rank) override {
    std::unique_lock lock(mu_);
    if (!sim_.known(id)) return std::nullopt;
    const bool as_rank = rank != kNoRank && ranks_.count(rank) > 0;
    if (as_rank) ranks_[rank].waiting_on = id;
    ++waiters_;
    settle();  // this rank's raised floor may finalize others' work
    std::optional<Interval> out;
    for (;;) {
      if (final_now(id)) {
        out = sim_.interval(id);
        break;
      }
      if (shutdown_) break;
      cv_.wait(lock);
      settle();
    }
    --waiters_;
    if (as_rank) {
      auto it = ranks_.find(rank);  // it may have been unregistered while we waited
      if (it != ranks_.end()) {
        it->second.waiting_on = kNoEvent;
        if (out) it->second.floor = std::max(it->second.floor, out->finish);
      }
    }
    return out;
  }

  void shutdown() override {
    std::lock_guard lock(mu_);
    shutdown_ = true;
    cv_.notify_all();
  }

  std::string timeline_json() const override {
    std::lock_guard lock(mu_);
    sim_.sync();
    return sim_.timeline_json();
  }

  Stats stats() const override {
    std::lock_guard lock(mu_);
    sim_.sync();
    return sim_.stats();
  }

 private:
  static constexpr int kNoRank = std::numeric_limits<int>::min();

  struct Rank {
    Time floor = 0;
    EventId waiting_on = kNoEvent;  // blocked in wait_final_for_rank on this event
  };

  // What flow_event() accepts without a word (add_flows() then passes the flows as they are).
  bool flow_valid(const FlowSpec& f) const {
    const int gpus = sim_.topology().gpu_count();
    if (f.src_gpu < 0 || f.src_gpu >= gpus || f.dst_gpu < 0 || f.dst_gpu >= gpus) return false;
    if (!std::isfinite(f.not_before)) return false;
    for (EventId dep : f.after)
      if (!sim_.known(dep)) return false;
    return true;
  }

  // A flow checked and turned into the simulator's form; false (logged) when refused.
  bool flow_event(const FlowSpec& f, const char* what, detail::NewEvent& e) const {
    const int gpus = sim_.topology().gpu_count();
    if (f.src_gpu < 0 || f.src_gpu >= gpus || f.dst_gpu < 0 || f.dst_gpu >= gpus) {
      complain("simcore-flow-gpu", fmt::format("{}: GPU {} -> {} is outside 0..{}", what,
                                               f.src_gpu, f.dst_gpu, gpus - 1));
      return false;
    }
    if (!valid_common(f.not_before, f.after, what)) return false;
    e.kind = detail::EventKind::flow;
    e.gpu = f.src_gpu;
    e.dst = f.dst_gpu;
    e.bytes = f.bytes;
    e.not_before = earliest(f.not_before, what);
    e.after = &f.after;
    e.label = &f.label;
    return true;
  }

  bool valid_common(Time not_before, const std::vector<EventId>& after, const char* what) const {
    if (!std::isfinite(not_before)) {
      complain("simcore-not-before", fmt::format("{}: not_before {} is not a time", what, not_before));
      return false;
    }
    for (EventId dep : after) {
      if (!sim_.known(dep)) {
        complain("simcore-after-unknown",
                 fmt::format("{}: 'after' names unknown event {} (rejected)", what, dep));
        return false;
      }
    }
    return true;
  }

  // Where a submission may start at the earliest: not before reclaimed history, and, with
  // ranks, not before the floor they all promised (that would change final events).
  Time engine_floor() const {
    Time floor = sim_.floor();
    if (!ranks_.empty() && std::isfinite(threshold_)) floor = std::max(floor, threshold_);
    return floor;
  }
  // not_before, or that floor when it lies before it (said once).
  Time earliest(Time not_before, const char* what) const {
    const Time floor = engine_floor();
    if (not_before >= floor) return not_before;
    complain("simcore-not-before-floor",
             fmt::format("{}: not_before {} lies before the floor {} that every rank promised; "
                         "moved to the floor", what, not_before, floor));
    return floor;
  }

  EventId submitted(EventId id) {
    // A submission can move the finish that a waiting rank's floor follows.
    if (waiters_ > 0) cv_.notify_all();
    return id;
  }

  // Simulates what is pending, recomputes the floor, reclaims history below it and wakes the
  // waiters when it moved. Caller holds mu_.
  void settle() const {
    sim_.sync();
    Time threshold = kForever;
    if (!ranks_.empty()) {
      for (const auto& [rank, r] : ranks_) {
        Time f = r.floor;
        if (r.waiting_on != kNoEvent) f = std::max(f, sim_.interval(r.waiting_on).finish);
        threshold = std::min(threshold, f);
      }
      sim_.reclaim(std::min(threshold, sim_.frontier()));
    }
    if (threshold != threshold_) {
      threshold_ = threshold;
      if (waiters_ > 0) cv_.notify_all();
    }
  }

  bool final_now(EventId id) const { return sim_.interval(id).finish <= threshold_; }

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable detail::Simulator sim_;
  mutable Time threshold_ = kForever;  // events finishing at or before it are final
  std::unordered_map<int, Rank> ranks_;
  bool shutdown_ = false;
  int waiters_ = 0;
  // add_flows()' scratch: the accepted flows, where each came from, their ids.
  std::vector<detail::NewEvent> batch_;
  std::vector<size_t> batch_at_;
  std::vector<EventId> batch_ids_;
};

}  // namespace

std::unique_ptr<Engine> make_engine(const ClusterSpec& cluster) {
  return make_engine(cluster, EngineOptions{});
}

std::unique_ptr<Engine> make_engine(const ClusterSpec& cluster, const EngineOptions& options) {
  return std::make_unique<LocalEngine>(cluster, options);
}

}  // namespace simcore
