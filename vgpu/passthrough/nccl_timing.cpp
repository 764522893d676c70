#include "passthrough/nccl_timing.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "common/log.h"
#include "nccl_plugin/core/vtime_api.h"
#include "passthrough/passthrough_state.h"

namespace vgpu::pt::nccl_timing {
namespace {

using CompletionsFn = int (*)(uint64_t, vgpu_nccl_completion*, int);
using IntervalFn = int (*)(uint64_t, double*, double*);

// How many of a kernel's latest transfers are asked again for their final placement.
constexpr size_t kRequery = 16;
using SetClockFn = void (*)(vgpu_nccl_clock_fn);

constexpr int kMaxGpus = 4096;
std::array<std::atomic<double>, kMaxGpus> g_kernel_start{};

double clock_hook(int gpu) {
  return gpu >= 0 && gpu < kMaxGpus ? g_kernel_start[gpu].load(std::memory_order_relaxed) : 0;
}

// The completions read from the plugin so far, per global GPU (seq, virtual finish).
class CompletionLog {
 public:
  bool present() {
    std::lock_guard l(mu_);
    return load();
  }
  uint64_t position() {
    std::lock_guard l(mu_);
    pull();
    return cursor_;
  }
  // The latest virtual finish among `gpu`'s transfers logged after `since`. A finish is logged
  // when NCCL saw the transfer complete, but simcore may still move it later: transfers that
  // arrive afterwards in real time can start earlier in virtual time and take a share of the
  // same links. So the latest-logged transfers (which, sharing links fairly, finish last) are
  // asked for their placement now.
  double latest_between(int gpu, uint64_t since, uint64_t until, double floor) {
    std::lock_guard l(mu_);
    pull();
    double out = floor;
    auto it = by_gpu_.find(gpu);
    if (it == by_gpu_.end()) return out;
    size_t asked = 0;
    for (auto e = it->second.rbegin(); e != it->second.rend() && e->seq > since; ++e) {
      if (until != 0 && e->seq > until) continue;
      double finish = e->finish;
      double start = 0, now_finish = 0;
      if (interval_ != nullptr && e->flow != 0 && asked < kRequery && interval_(e->flow, &start, &now_finish) == 0) {
        ++asked;
        finish = std::max(finish, now_finish);
      }
      out = std::max(out, finish);
    }
    return out;
  }

 private:
  bool load() {
    if (completions_ != nullptr) return true;
    // NCCL dlopens the plugin (RTLD_LOCAL): find it by name among the loaded libraries.
    void* lib = dlopen("libnccl-net-vgpu.so", RTLD_NOLOAD | RTLD_LAZY);
    void* completions = lib ? dlsym(lib, "vgpu_nccl_completions") : dlsym(RTLD_DEFAULT, "vgpu_nccl_completions");
    void* set_clock = lib ? dlsym(lib, "vgpu_nccl_set_clock") : dlsym(RTLD_DEFAULT, "vgpu_nccl_set_clock");
    void* interval = lib ? dlsym(lib, "vgpu_nccl_flow_interval") : dlsym(RTLD_DEFAULT, "vgpu_nccl_flow_interval");
    interval_ = reinterpret_cast<IntervalFn>(interval);
    if (completions == nullptr || set_clock == nullptr) return false;
    completions_ = reinterpret_cast<CompletionsFn>(completions);
    reinterpret_cast<SetClockFn>(set_clock)(&clock_hook);
    log::info("passthrough: NCCL kernels are timed by the vgpu net plugin's transfers");
    return true;
  }
  void pull() {
    if (!load()) return;
    vgpu_nccl_completion buf[256];
    for (;;) {
      const int n = completions_(cursor_, buf, 256);
      if (n <= 0) break;
      for (int i = 0; i < n; ++i) {
        cursor_ = std::max(cursor_, buf[i].seq);
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
  CompletionsFn completions_ = nullptr;
  IntervalFn interval_ = nullptr;
  uint64_t cursor_ = 0;
  std::unordered_map<int, std::deque<Entry>> by_gpu_;
};

CompletionLog& completion_log() {
  static CompletionLog* log = new CompletionLog;  // used until exit
  return *log;
}

}  // namespace

bool is_nccl_kernel(std::string_view name) {
  return name.starts_with("ncclDevKernel") || name.starts_with("ncclKernel") ||
         name.starts_with("_Z13ncclDevKernel") || name.find("ncclDevKernel_") != std::string_view::npos;
}

int global_gpu(int v) {
  if (const char* g = std::getenv("VGPU_GLOBAL_RANK_GPU"); g != nullptr && *g != '\0')
    return std::atoi(g);
  int node = 0;
  if (const char* n = std::getenv("VGPU_NODE_INDEX"); n != nullptr && *n != '\0') node = std::atoi(n);
  PassState* s = PassState::get();
  const int per_node = s ? s->cluster().gpus_per_node : 8;
  return node * per_node + v;
}

bool plugin_present() { return completion_log().present(); }

Window open_window(int gpu) {
  static std::mutex mu;
  static auto* open = new std::unordered_map<int, std::shared_ptr<std::atomic<uint64_t>>>;
  Window w;
  w.since = completion_log().position();
  w.until = std::make_shared<std::atomic<uint64_t>>(0);
  std::lock_guard l(mu);
  auto& previous = (*open)[gpu];
  if (previous) previous->store(w.since == 0 ? 1 : w.since, std::memory_order_release);
  previous = w.until;
  return w;
}

double finish(int gpu, const Window& w, double start) {
  const uint64_t until = w.until ? w.until->load(std::memory_order_acquire) : 0;
  return completion_log().latest_between(gpu, w.since, until, start + kMinSeconds);
}

void set_kernel_start(int gpu, double start) {
  if (gpu < 0 || gpu >= kMaxGpus) return;
  std::atomic<double>& s = g_kernel_start[gpu];
  double seen = s.load(std::memory_order_relaxed);
  while (start > seen && !s.compare_exchange_weak(seen, start, std::memory_order_relaxed)) {
  }
}

}  // namespace vgpu::pt::nccl_timing
