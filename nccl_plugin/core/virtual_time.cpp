#include "virtual_time.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/log.h"
#include "common/settings.h"
#include "driver_link.h"
#include "simcore/rank_gpu.h"
#include "simcore/remote_engine.h"

namespace vgpu::nccl {
namespace {

constexpr size_t kLogCapacity = 4096;

thread_local int t_gpu_override = -1;
thread_local bool t_has_last = false;
thread_local vgpu_nccl_completion t_last{};

}  // namespace

EngineMode engine_mode_from_env() {
  const std::string mode = vgpu::settings::text(vgpu::settings::Id::simcore);
  if (mode == "daemon") return EngineMode::daemon;
  if (mode == "off") return EngineMode::off;
  return EngineMode::local;
}

std::unique_ptr<simcore::Engine> open_engine(EngineMode mode, const simcore::ClusterSpec& cluster,
                                             int rank, std::string* error) {
  switch (mode) {
    case EngineMode::off:
      *error = "VGPU_SIMCORE=off";
      return nullptr;
    case EngineMode::daemon: {
      simcore::RemoteOptions options;
      options.rank = rank;
      return simcore::connect_engine(options, error);
    }
    case EngineMode::local:
      break;
  }
  // Nobody reads this engine's timeline (the plugin has no timeline output of its own): keep
  // neither labels nor timeline entries.
  simcore::EngineOptions options;
  options.record_timeline = false;
  return simcore::make_engine(cluster, options);
}

int VirtualTime::rank_gpu(std::string* error) const {
  if (t_gpu_override >= 0) {
    if (t_gpu_override < cluster_.total_gpus()) return t_gpu_override;
    *error = fmt::format("the contract's set_thread_gpu gives GPU {} but the cluster ({}) has {} GPUs",
                         t_gpu_override, cluster_.source, cluster_.total_gpus());
    return -1;
  }
  // A driver that renumbers its devices (the sim backend under CUDA_VISIBLE_DEVICES) names the
  // cluster's GPU itself; VGPU_GLOBAL_RANK_GPU, set by a launcher, still comes first.
  if (int g = -1; !vgpu::settings::is_set(vgpu::settings::Id::global_rank_gpu) && driver_current_global_gpu(&g)) {
    if (g >= 0 && g < cluster_.total_gpus()) return g;
    *error = fmt::format("the driver's current GPU {} is not in the cluster ({}), which has {} GPUs", g,
                         cluster_.source, cluster_.total_gpus());
    return -1;
  }
  int dev = 0;
  // The rank's current CUDA device, from the vgpu driver's side of the contract (the plugin
  // knocks on the loaded driver for it). Without it every rank of a PyTorch job counted as GPU 0,
  // and its transfers as flows from GPU 0 to itself. (Not needed when VGPU_GLOBAL_RANK_GPU
  // names the GPU, but asking costs nothing.)
  if (!driver_current_device(&dev)) {
    dev = 0;
    vgpu::log::once(vgpu::log::Level::info, "nccl-no-ctx",
                    "nccl plugin: no current CUDA device from a vgpu driver; the rank counts as local GPU 0");
  }
  const simcore::RankGpu r = simcore::rank_gpu(cluster_, dev);  // the one mapping (simcore/rank_gpu.h)
  if (r.gpu < 0) *error = r.error;
  return r.gpu;
}

VirtualTime::VirtualTime(const simcore::ClusterSpec& cluster)
    : cluster_(cluster),
      mode_(engine_mode_from_env()),
      gpus_(std::max(0, cluster.total_gpus())),
      pinning_(mode_ == EngineMode::daemon) {
  latest_ = std::make_unique<std::atomic<double>[]>(static_cast<size_t>(gpus_));
  for (int i = 0; i < gpus_; ++i) latest_[i].store(-1, std::memory_order_relaxed);
}

double VirtualTime::now(int gpu, uint64_t launch) const {
  if (launch != 0) {
    if (LaunchClockFn fn = driver_launch_clock()) {
      const double t = fn(gpu, launch);
      if (std::isfinite(t) && t >= 0) return t;
    }
  }
  if (GpuClockFn fn = driver_gpu_clock()) {
    double t = fn(gpu);
    return std::isfinite(t) && t > 0 ? t : 0;
  }
  if (gpu < 0 || gpu >= gpus_) return 0;
  return std::max(0.0, latest_[gpu].load(std::memory_order_acquire));
}

simcore::Engine* VirtualTime::engine() {
  if (simcore::Engine* e = engine_ptr_.load(std::memory_order_acquire)) return e;
  std::lock_guard lock(engine_mu_);
  if (!engine_tried_.load(std::memory_order_relaxed)) {
    engine_tried_.store(true, std::memory_order_release);
    std::string error;
    std::string rank_error;
    int rank = rank_gpu(&rank_error);
    engine_ = open_engine(mode_, cluster_, rank, &error);
    if (engine_ != nullptr) {
      if (mode_ == EngineMode::daemon) {
        // One rank of this process in vgpud (virtual_time.h): its floor lets vgpud reclaim.
        rank_floor_.register_in(*engine_);
        if (rank_floor_.expected() == 0)
          vgpu::log::info("nccl plugin: no RANK and WORLD_SIZE: the job's vgpud keeps every transfer (its memory "
                          "grows with the job)");
      }
      engine_ptr_.store(engine_.get(), std::memory_order_release);
    } else if (mode_ == EngineMode::off) {
      vgpu::log::info("nccl plugin: VGPU_SIMCORE=off: transfers carry no virtual time");
    } else {
      vgpu::log::always(fmt::format("vgpu nccl plugin: no simulation engine ({}); transfers move "
                                    "but carry no virtual time", error));
    }
  }
  return engine_.get();
}

uint64_t VirtualTime::add_flow(int src_gpu, int dst_gpu, uint64_t bytes, double not_before,
                               uint64_t after_a, uint64_t after_b) {
  simcore::Engine* e = engine();
  if (e == nullptr) return 0;
  simcore::FlowSpec f;
  f.src_gpu = src_gpu;
  f.dst_gpu = dst_gpu;
  f.bytes = bytes;
  f.not_before = not_before;
  if (after_a != 0) f.after.push_back(after_a);
  if (after_b != 0 && after_b != after_a) f.after.push_back(after_b);
  // Only the daemon's timeline shows labels (VGPU_TIMELINE); the local engine keeps none.
  if (mode_ == EngineMode::daemon) f.label = fmt::format("nccl {}->{} {}B", src_gpu, dst_gpu, bytes);
  simcore::EventId id = e->add_flow(f);
  vgpu::log::debug("nccl plugin: flow {} gpu {}->{} {} B not before {:.9f} after {},{}", id, src_gpu, dst_gpu,
                   bytes, not_before, after_a, after_b);
  if (pinning_) pins_.own(id);  // held by its placement until its transfer completed
  if (id == simcore::kNoEvent) check_lost(*e);
  if (id == simcore::kNoEvent && !lost()) {
    vgpu::log::once(vgpu::log::Level::warn, "nccl-flow-rejected",
                    "nccl plugin: simcore rejected a transfer; it carries no virtual time");
  }
  return id;
}

bool VirtualTime::query(uint64_t flow, double* start, double* finish) {
  if (flow == 0) return false;
  simcore::Engine* e = engine();
  if (e == nullptr) return false;
  auto iv = e->query(flow);
  if (!iv) {
    check_lost(*e);
    return false;
  }
  *start = iv->start;
  *finish = iv->finish;
  return true;
}

void VirtualTime::check_lost(const simcore::Engine& e) {
  const std::string why = e.lost();
  if (why.empty() || lost_.exchange(true)) return;
  vgpu::log::always(fmt::format("vgpu nccl plugin: lost the job's vgpud ({}): this rank's "
                                "transfers fail from now on, because their virtual time can no "
                                "longer be simulated", why));
}

void VirtualTime::record(vgpu_nccl_completion c) {
  vgpu::log::debug("nccl plugin: {} of flow {} on gpu {} (peer {}, launch {}) {} B done: virtual {:.9f} .. {:.9f}",
                   c.is_send ? "send" : "recv", c.flow_id, c.gpu, c.peer_gpu, c.launch, c.bytes, c.start, c.finish);
  {
    std::lock_guard lock(log_mu_);
    c.seq = next_seq_++;
    log_.push_back(c);
    if (log_.size() > kLogCapacity) log_.pop_front();
    if (c.launch != 0) {
      auto [it, added] = launches_.try_emplace(c.launch);
      if (added) {
        launch_order_.push_back(c.launch);
        while (launch_order_.size() > kLaunchRecords) {
          if (auto old = launches_.find(launch_order_.front()); old != launches_.end()) {
            for (uint64_t f : old->second.flows) unpin(f);
            launches_.erase(old);
          }
          launch_order_.pop_front();
        }
      }
      LaunchRecord& l = it->second;
      ++l.count;
      if (std::isfinite(c.finish)) l.finish = std::max(l.finish, c.finish);
      if (std::isfinite(c.ready)) l.ready = std::max(l.ready, c.ready);
      if (c.flow_id != 0) {
        l.flows.push_back(c.flow_id);
        pin(c.flow_id);  // asked again while the record keeps it
        if (l.flows.size() > kRequeryFlows) {
          unpin(l.flows.front());
          l.flows.pop_front();
        }
      }
    }
  }
  if (std::isfinite(c.finish) && c.gpu >= 0 && c.gpu < gpus_) {
    std::atomic<double>& l = latest_[c.gpu];
    double cur = l.load(std::memory_order_relaxed);
    while (cur < c.finish && !l.compare_exchange_weak(cur, c.finish, std::memory_order_acq_rel)) {
    }
  }
  t_last = c;
  t_has_last = true;
}

bool VirtualTime::latest(int gpu, double* finish) {
  if (gpu < 0 || gpu >= gpus_) return false;
  double t = latest_[gpu].load(std::memory_order_acquire);
  if (t < 0) return false;
  *finish = t;
  return true;
}

int VirtualTime::completions(uint64_t after_seq, vgpu_nccl_completion* out, int max) {
  std::lock_guard lock(log_mu_);
  int n = 0;
  for (const auto& c : log_) {
    if (n >= max) break;
    if (c.seq > after_seq) out[n++] = c;
  }
  return n;
}

double VirtualTime::launch_ready(uint64_t launch) {
  if (launch == 0) return -1;
  std::lock_guard lock(log_mu_);
  auto it = launches_.find(launch);
  return it == launches_.end() ? -1 : it->second.ready;
}

bool VirtualTime::launch_window(uint64_t launch, double* ready, double* last_finish, uint64_t* count) {
  {
    std::lock_guard lock(log_mu_);
    auto it = launches_.find(launch);
    if (it == launches_.end() || it->second.ready < 0) return false;
    *ready = it->second.ready;
  }
  uint64_t n = 0;
  if (!launch_transfers(launch, last_finish, &n)) *last_finish = *ready;
  *count = n;
  return true;
}

bool VirtualTime::launch_transfers(uint64_t launch, double* finish, uint64_t* count) {
  double out = -1;
  std::deque<uint64_t> flows;
  {
    std::lock_guard lock(log_mu_);
    auto it = launches_.find(launch);
    if (it == launches_.end()) return false;
    out = it->second.finish;
    if (count != nullptr) *count = it->second.count;
    flows = it->second.flows;
  }
  // Outside the lock: through the daemon each query is a round trip.
  for (uint64_t flow : flows) {
    double s = 0, f = 0;
    if (query(flow, &s, &f)) out = std::max(out, f);
  }
  if (out < 0) return false;  // completed, but none carried virtual time
  *finish = out;
  return true;
}

void VirtualTime::forget_launch(uint64_t launch) {
  std::lock_guard lock(log_mu_);
  auto it = launches_.find(launch);
  if (it == launches_.end()) return;
  for (uint64_t f : it->second.flows) unpin(f);
  launches_.erase(it);  // its place in launch_order_ ages out with the rest
}

bool VirtualTime::last_on_thread(vgpu_nccl_completion* out) {
  if (!t_has_last) return false;
  *out = t_last;
  return true;
}

void VirtualTime::use_gpu(int gpu) {
  if (!pinning_) return;
  std::lock_guard l(holds_mu_);
  note_gpu(gpu);
}

void VirtualTime::note_gpu(int gpu) {
  if (std::find(gpus_used_.begin(), gpus_used_.end(), gpu) != gpus_used_.end()) return;
  gpus_used_.push_back(gpu);
  if (rank_floor_.floor_sent() && !floor_stopped_) {
    floor_stopped_ = true;
    vgpu::log::info("nccl plugin: GPU {} first transfers after this process moved its floor in vgpud: the floor "
                    "moves no more (vgpud keeps the job's transfers from here)", gpu);
  }
}

VirtualTime::FloorRule VirtualTime::floor_rule() const {
  if (driver_gpu_floor() != nullptr) return FloorRule::driver;
  return driver_gpu_clock() != nullptr || driver_launch_clock() != nullptr ? FloorRule::none : FloorRule::completions;
}

double VirtualTime::rule_bound(FloorRule rule, int gpu) const {
  if (rule == FloorRule::driver) {
    const GpuClockFn promise = driver_gpu_floor();
    return promise != nullptr ? promise(gpu) : -1;
  }
  if (rule == FloorRule::completions && gpu >= 0 && gpu < gpus_)
    return std::max(0.0, latest_[gpu].load(std::memory_order_acquire));
  return -1;
}

bool VirtualTime::hold(int gpu, double* held_at) {
  if (!pinning_) return false;
  // The rule's bound before the receive takes now() (virtual_time.h: an own_floor() that misses
  // this hold read the rule before it, so at or below what now() answers after it).
  const double b = rule_bound(floor_rule(), gpu);
  *held_at = std::isfinite(b) && b > 0 ? b : 0;
  std::lock_guard l(holds_mu_);
  holds_.insert(*held_at);
  note_gpu(gpu);
  return true;
}

void VirtualTime::unhold(double held_at) {
  std::lock_guard l(holds_mu_);
  if (auto it = holds_.find(held_at); it != holds_.end()) holds_.erase(it);
}

double VirtualTime::own_floor() {
  std::vector<int> gpus;
  {
    std::lock_guard l(holds_mu_);
    if (floor_stopped_ || gpus_used_.empty()) return -1;
    gpus = gpus_used_;
  }
  // The rule for receives posted from now on, read before the holds: a receive's hold goes in
  // before its now(), so one this read misses takes its now() after the rule was read here.
  const FloorRule rule = floor_rule();
  double floor = std::numeric_limits<double>::infinity();
  for (int g : gpus) {
    const double b = rule_bound(rule, g);
    if (!(b >= 0)) return -1;
    floor = std::min(floor, b);
  }
  std::lock_guard l(holds_mu_);
  if (!holds_.empty()) floor = std::min(floor, *holds_.begin());
  if (rule_ != rule && rank_floor_.floor_sent()) {
    if (!floor_stopped_)
      vgpu::log::info("nccl plugin: the driver's clocks changed after this process moved its floor in vgpud: the "
                      "floor moves no more (vgpud keeps the job's transfers from here)");
    floor_stopped_ = true;
    return -1;
  }
  rule_ = rule;
  return std::isfinite(floor) ? floor : -1;
}

void VirtualTime::settle() {
  if (!pinning_) return;
  simcore::Engine* e = engine_ptr_.load(std::memory_order_acquire);
  // A process that only sends connects (and registers) at its first completed transfer.
  if (e == nullptr && !engine_tried_.load(std::memory_order_acquire)) e = engine();
  if (e == nullptr || lost()) return;
  const double floor = own_floor();
  const bool due = rank_floor_.floor_due(floor);
  const std::vector<uint64_t> ids = pins_.take(due ? 0 : kReleaseBatch);
  if (ids.empty() && !due) return;
  (void)rank_floor_.share(*e, {}, floor, ids);
  check_lost(*e);
}

void set_thread_gpu(int gpu) { t_gpu_override = gpu < 0 ? -1 : gpu; }

}  // namespace vgpu::nccl
