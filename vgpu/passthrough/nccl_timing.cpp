#include "passthrough/nccl_timing.h"

#include <cstddef>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <cstring>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "common/settings.h"
#include "front/nccl/nccl_plugin_client.h"
#include "front/driver/cuda_api.h"
#include "simcore/collective_model.h"
#include "simcore/rank_gpu.h"
#include "passthrough/passthrough_state.h"
#include "passthrough/thread_clock.h"
#include "passthrough/virtual_time.h"
#include "timing/nccl_group_hooks.h"

namespace vgpu::pt::nccl_timing {
namespace {

constexpr int kMaxGpus = 4096;
std::array<std::atomic<double>, kMaxGpus> g_kernel_start{};

double clock_hook(int gpu) {
  return gpu >= 0 && gpu < kMaxGpus ? g_kernel_start[gpu].load(std::memory_order_relaxed) : 0;
}

// NCCL kernels on the timeline by launch tag, the latest kKept of them: their transfers ask for
// their start, also after the kernel itself was timed (sends may leave after their kernel ended).
class Launches {
 public:
  void add(uint64_t tag, const OpRef& op) {
    std::lock_guard l(mu_);
    if (ops_.emplace(tag, op).second) order_.push_back(tag);
    while (order_.size() > kKept) {
      ops_.erase(order_.front());
      order_.pop_front();
    }
  }
  OpRef find(uint64_t tag) {
    std::lock_guard l(mu_);
    auto it = ops_.find(tag);
    return it == ops_.end() ? nullptr : it->second;
  }

 private:
  static constexpr size_t kKept = 16384;
  std::mutex mu_;
  // Held, not weak: nothing else keeps a timed op once resolved (and then it holds no deps).
  std::unordered_map<uint64_t, OpRef> ops_;
  std::deque<uint64_t> order_;
};

Launches& launches() {
  static Launches* l = new Launches;  // used until exit
  return *l;
}

// The transfers' clock for the plugin: the virtual start of the kernel launch they belong to,
// once its stream predecessors resolve (for a send the kernel is running, so they have), else
// its issue time, a lower bound.
double launch_clock_hook(int gpu, uint64_t launch) {
  OpRef op = launches().find(launch);
  if (!op) {
    log::debug("nccl timing: launch {} of gpu {} is not on the timeline (yet, or any more)", launch, gpu);
    return -1;
  }
  VirtualTime* vt = VirtualTime::get();
  if (vt != nullptr) {
    if (const std::optional<double> s = vt->start_of(op)) return *s;
  }
  return op->issue;
}

// The NCCL kernels of each GPU whose transfers may still ask launch_clock_hook: from their
// attribution (inside the launch call, before its issue time is taken) to their finish() (their
// real execution complete, so are their transfers), each with a time its launch clock cannot go
// below: the device's horizon at the attribution (the issue time, taken after, is at or above
// it), then its issue (its start is at or above it). Few at once: a scan answers least().
class OpenLaunches {
 public:
  void open(uint64_t tag, int gpu, double bound) {
    std::lock_guard l(mu_);
    open_[tag] = {gpu, bound};
  }
  void issued(uint64_t tag, double issue) {
    std::lock_guard l(mu_);
    if (auto it = open_.find(tag); it != open_.end()) it->second.second = std::max(it->second.second, issue);
  }
  void close(uint64_t tag) {
    std::lock_guard l(mu_);
    open_.erase(tag);
  }
  double least(int gpu) {
    std::lock_guard l(mu_);
    double t = std::numeric_limits<double>::infinity();
    for (const auto& [tag, e] : open_)
      if (e.first == gpu) t = std::min(t, e.second);
    return t;
  }

 private:
  std::mutex mu_;
  std::unordered_map<uint64_t, std::pair<int, double>> open_;
};

OpenLaunches& open_launches() {
  static OpenLaunches* o = new OpenLaunches;  // used until exit
  return *o;
}

// The least horizon of this process's virtual devices that are cluster GPU `gpu`
// (thread_clock.h: a thread that submits to a device is raised to its horizon first); +inf when
// none is.
double horizon_of(int gpu) {
  PassState* s = PassState::get();
  double t = std::numeric_limits<double>::infinity();
  if (s == nullptr) return t;
  for (int v = 0; v < s->device_count() && v < thread_clock::detail::kMaxDevices; ++v)
    if (global_gpu(v) == gpu)
      t = std::min(t, thread_clock::detail::g_horizon[static_cast<size_t>(v)].t.load(std::memory_order_acquire));
  return t;
}

// The contract's gpu_floor: no launch clock or GPU clock this backend answers for `gpu` from now
// on, for a kernel launched later (issued at or above its device's horizon) or one still open
// (above), lies below it; clock_hook only grows. -1 when no device of this process is that GPU.
double gpu_floor_hook(int gpu) {
  const double h = horizon_of(gpu);
  if (!std::isfinite(h)) return -1;
  return std::min({h, open_launches().least(gpu), clock_hook(gpu)});
}

// The passthrough's side of the contract: the rank's current device, as cuCtxGetDevice says.
int current_device(int* device) {
  CUdevice d = 0;
  if (cuCtxGetDevice(&d) != CUDA_SUCCESS) return -1;
  *device = d;
  return 0;
}

// NCCL's host cost model over this backend's cluster configuration ([collectives.host]).
using GroupHooks = timing::NcclGroupHooks<&timing::nccl_group_costs_of<PassState>>;

using Plugin = vgpu_nccl_plugin_side;

// The driver's half of the plugin contract, with the passthrough's clock hooks.
contracts::NcclPluginClient& client() {
  static auto* c = new contracts::NcclPluginClient(  // used until exit
      vgpu_nccl_driver_side{0, 0, &clock_hook, &launch_clock_hook, &current_device, nullptr,
                            &thread_clock::own_work_begin, &thread_clock::own_work_end, &GroupHooks::begin,
                            &GroupHooks::operation, &GroupHooks::launch, &GroupHooks::end,
                            nullptr,  // launch_tasks_done: the real kernels meet their peers themselves
                            &gpu_floor_hook});
  return *c;
}

// The plugin's table once NCCL loaded it and the two sides agreed; nullptr until then.
const Plugin* plugin() { return client().plugin(); }

// Attribution by launch order (the fallback): the completions read from the plugin so far, per
// global GPU.
class CompletionLog {
 public:
  uint64_t position() {
    std::lock_guard l(mu_);
    pull();
    return cursor_;
  }
  // The latest virtual finish among `gpu`'s transfers logged after `since` (and not after
  // `until`, when closed). A finish is logged when NCCL saw the transfer complete, but simcore
  // may still move it later: transfers that arrive afterwards in real time can start earlier in
  // virtual time and take a share of the same links. So the latest-logged transfers (which,
  // sharing links fairly, finish last) are asked for their placement now.
  double latest_between(int gpu, uint64_t since, uint64_t until, double floor) {
    std::lock_guard l(mu_);
    pull();
    const Plugin* p = plugin();
    double out = floor;
    auto it = by_gpu_.find(gpu);
    if (p == nullptr || it == by_gpu_.end()) return out;
    size_t asked = 0;
    for (auto e = it->second.rbegin(); e != it->second.rend() && e->seq > since; ++e) {
      if (until != 0 && e->seq > until) continue;
      double finish = e->finish;
      double start = 0, now_finish = 0;
      if (e->flow != 0 && asked < kRequery && p->flow_interval(e->flow, &start, &now_finish) == 0) {
        ++asked;
        finish = std::max(finish, now_finish);
      }
      out = std::max(out, finish);
    }
    return out;
  }

 private:
  static constexpr size_t kRequery = 16;  // latest transfers asked again for their placement
  void pull() {
    const Plugin* p = plugin();
    if (p == nullptr) return;
    vgpu_nccl_completion buf[256];
    for (;;) {
      const int n = p->completions(cursor_, buf, 256);
      if (n <= 0) break;
      for (int i = 0; i < n; ++i) {
        cursor_ = std::max(cursor_, buf[i].seq);
        if (buf[i].launch != 0) continue;  // attributed exactly (finish() asks by launch)
        auto& q = by_gpu_[buf[i].gpu];
        if (buf[i].finish == buf[i].finish) q.push_back({buf[i].seq, buf[i].flow_id, buf[i].finish});  // not NaN
        if (q.size() > 8192) q.pop_front();
      }
      if (n < 256) break;
    }
  }

  struct Entry {
    uint64_t seq, flow;
    double finish;
  };
  std::mutex mu_;
  uint64_t cursor_ = 0;
  std::unordered_map<int, std::deque<Entry>> by_gpu_;
};

CompletionLog& completion_log() {
  static CompletionLog* log = new CompletionLog;  // used until exit
  return *log;
}

// The collective model's time for what launch `launch` does (NCCL's profiler told the plugin),
// or nullopt when the launch's work is unknown.
std::optional<double> modelled_seconds(int gpu, uint64_t launch) {
  vgpu_nccl_launch w{};
  if (!describe(launch, &w) || w.count <= 0) return std::nullopt;
  PassState* s = PassState::get();
  if (s == nullptr) return std::nullopt;
  const simcore::ClusterSpec& cluster = s->cluster();
  // The communicator's ranks on the virtual cluster, filling nodes in order from the rank's own
  // (what torchrun and Slurm do). NCCL's own node count is not used: under vgpu it counts
  // hosts as vgpu's topology presents them, not the virtual cluster's nodes.
  const int nranks = std::max(1, w.nranks);
  const int per_node = std::max(1, cluster.gpus_per_node);
  const int nnodes = (nranks + per_node - 1) / per_node;
  const int first_node = std::max(0, gpu) / per_node;
  std::vector<int> gpus;
  for (int r = 0; r < nranks; ++r) gpus.push_back((first_node + r / per_node) * per_node + r % per_node);
  double seconds = 0;
  for (const simcore::CollectiveCall& call : contracts::collective_calls(w, gpus, true)) {
    const simcore::CollectiveEstimate e = simcore::estimate_collective(cluster, call);
    log::debug("nccl timing: launch {} {} {} B over {} ranks ({} nodes): {:.9f} s ({})", launch,
               simcore::collective_name(call.op), call.bytes, call.gpus.size(), nnodes, e.seconds, e.protocol);
    seconds += e.seconds;
  }
  if (seconds <= 0) return std::nullopt;
  return seconds;
}

}  // namespace

bool is_nccl_kernel(std::string_view name) {
  return name.starts_with("ncclDevKernel") || name.starts_with("ncclKernel") ||
         name.starts_with("_Z13ncclDevKernel") || name.find("ncclDevKernel_") != std::string_view::npos;
}

int global_gpu(int v) {
  PassState* s = PassState::get();
  if (s == nullptr) return v;
  // The one mapping (simcore/rank_gpu.h), as the NCCL plugin places this rank's transfers.
  const simcore::RankGpu r = simcore::rank_gpu(s->cluster(), v);
  if (r.gpu >= 0) return r.gpu;
  log::once(log::Level::warn, "pt-rank-gpu",
            fmt::format("passthrough: {}; NCCL kernels of device {} are timed as GPU {}", r.error, v, v));
  return v;
}

bool plugin_present() { return plugin() != nullptr; }

bool describe(uint64_t launch, vgpu_nccl_launch* out) {
  const Plugin* p = plugin();
  return p != nullptr && launch != 0 && out != nullptr && p->describe_launch(launch, out) == 0;
}

int local_ranks(uint64_t comm) {
  const Plugin* p = plugin();
  const bool has = p != nullptr && p->size > offsetof(vgpu_nccl_plugin_side, local_ranks) && p->local_ranks != nullptr;
  return has ? p->local_ranks(comm) : 0;
}

Attribution attribute(int gpu) {
  Attribution a;
  if (const Plugin* p = plugin()) a.launch = p->current_launch();
  if (a.launch != 0) {
    open_launches().open(a.launch, gpu, std::min(horizon_of(gpu), clock_hook(gpu)));
    return a;
  }
  static std::mutex mu;
  static auto* open = new std::unordered_map<int, std::shared_ptr<std::atomic<uint64_t>>>;
  a.since = completion_log().position();
  a.until = std::make_shared<std::atomic<uint64_t>>(0);
  std::lock_guard l(mu);
  auto& previous = (*open)[gpu];
  if (previous) previous->store(a.since == 0 ? 1 : a.since, std::memory_order_release);
  previous = a.until;
  return a;
}

void launched(const Attribution& a, const OpRef& op) {
  if (a.launch != 0 && op) {
    launches().add(a.launch, op);
    open_launches().issued(a.launch, op->issue);
  }
}

double finish(int gpu, const Attribution& a, double start, double* sync) {
  const double floor = start + kMinSeconds;
  if (a.launch != 0) open_launches().close(a.launch);  // its transfers are done (real execution complete)
  if (a.launch == 0) {
    const uint64_t until = a.until ? a.until->load(std::memory_order_acquire) : 0;
    return completion_log().latest_between(gpu, a.since, until, floor);
  }
  // The launch stays on record (until it ages out): a kernel may end before its last sends
  // leave (it only had to put their data in NCCL's buffers), and those still ask for its start.
  const Plugin* p = plugin();
  if (p == nullptr) return floor;
  double f = floor;
  // The collective model: the kernel lasts what its collective takes on the virtual cluster,
  // from the moment all of its ranks have begun (its receives say when the kernels at both of
  // their ends began; the plugin's own placement of the transfers, chained through NCCL's
  // buffers at the network model's rates, is not the collective's time).
  if (const std::optional<double> modelled = modelled_seconds(gpu, a.launch)) {
    double ready = -1, last = -1;
    const double from = p->launch_window(a.launch, &ready, &last, nullptr) == 0 ? std::max(start, ready) : start;
    f = from + *modelled;
    if (sync != nullptr) *sync = from;
  } else if (p->launch_transfers(a.launch, &f, nullptr) != 0) {
    f = floor;
  }
  p->forget_launch(a.launch);
  return std::max(floor, f);
}

void set_kernel_start(int gpu, double start) {
  if (gpu < 0 || gpu >= kMaxGpus) return;
  std::atomic<double>& s = g_kernel_start[gpu];
  double seen = s.load(std::memory_order_relaxed);
  while (start > seen && !s.compare_exchange_weak(seen, start, std::memory_order_relaxed)) {
  }
}

}  // namespace vgpu::pt::nccl_timing

// The passthrough's client of the plugin contract (the plugin's knock reaches it).
vgpu::contracts::NcclPluginClient* vgpu::contracts::backend_nccl_plugin_client() {
  return &vgpu::pt::nccl_timing::client();
}
