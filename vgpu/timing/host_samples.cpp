// VGPU_HOST_SAMPLES (see host_samples.h).
#include "timing/host_samples.h"

#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/exit_report.h"
#include "common/log.h"
#include "common/settings.h"
#include "timing/code_address.h"

namespace vgpu::timing::host_samples {
namespace {

constexpr int kDepth = 16;
constexpr size_t kCapacity = size_t{1} << 17;  // ~13 MiB: 2 minutes of 1 busy thread at 1 kHz
constexpr long kIntervalUs = 1000;
constexpr size_t kTopStacks = 12;

struct Sample {
  std::atomic<int> depth{0};  // 0 while being written (or never): skipped
  int tid = 0;
  void* pc[kDepth] = {};
};

// Never destroyed: the signal may arrive while static destructors run.
struct Sampler {
  Sample* samples = new Sample[kCapacity];
  std::atomic<size_t> next{0};
  std::atomic<bool> recording{false};
  std::mutex mu;  // below: not touched by the signal handler
  bool ranged = false;
  // The first sample of the ranges (the slots before it are start-up). Slots are never reused: a
  // reset of `next` could hand a slot to one thread's handler while another's still writes it.
  size_t first = 0;
  std::map<int, std::string> names;  // tid -> thread name, as last seen
};
std::atomic<Sampler*> g_sampler{nullptr};

// Async-signal-safe apart from backtrace(), whose first call (which may load the unwinder) is
// made at arming time; it unwinds through the signal frame.
void on_sigprof(int, siginfo_t*, void* context) {
  const int saved_errno = errno;
  Sampler* s = g_sampler.load(std::memory_order_acquire);
  if (s != nullptr && s->recording.load(std::memory_order_relaxed)) {
    const size_t i = s->next.fetch_add(1, std::memory_order_relaxed);
    if (i < kCapacity) {
      Sample& x = s->samples[i];
      x.depth.store(0, std::memory_order_relaxed);
      x.tid = static_cast<int>(::syscall(SYS_gettid));
      void* pc = nullptr;
#if defined(__x86_64__)
      pc = reinterpret_cast<void*>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
#endif
      void* frames[kDepth + 4];
      const int n = backtrace(frames, kDepth + 4);
      // frames: this handler, the signal trampoline, then the interrupted code from its exact pc.
      int from = std::min(n, 2);
      for (int k = 0; k < n; ++k)
        if (frames[k] == pc) { from = k; break; }
      int d = 0;
      if (pc != nullptr && (from >= n || frames[from] != pc)) x.pc[d++] = pc;
      for (int k = from; k < n && d < kDepth; ++k) x.pc[d++] = frames[k];
      x.depth.store(d, std::memory_order_release);
    }
  }
  errno = saved_errno;
}

void snapshot_names(Sampler& s) {  // s.mu held
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[320], name[64] = "";
    std::snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    if (FILE* f = std::fopen(path, "r")) {
      if (std::fgets(name, sizeof name, f) != nullptr) name[std::strcspn(name, "\n")] = 0;
      std::fclose(f);
    }
    s.names[std::atoi(e->d_name)] = name;
  }
  ::closedir(dir);
}

// "library!symbol" of a code address (code_address.h), each looked up once.
struct Symbols {
  std::unordered_map<void*, std::string> cache;
  const std::string& of(void* pc, bool is_return) {
    auto [it, fresh] = cache.try_emplace(pc);
    if (!fresh) return it->second;
    const std::optional<CodeAddress> c = describe_code(pc, is_return);
    if (!c) return it->second = "?";
    it->second = (c->library.empty() ? "main" : c->library) + "!" + (c->symbol.empty() ? "?" : c->symbol);
    return it->second;
  }
};

std::string library_of(const std::string& frame) { return frame.substr(0, frame.find('!')); }

struct ThreadTally {
  size_t samples = 0;
  std::map<std::string, size_t> libs;    // inclusive: the library appears on the stack
  std::map<std::string, size_t> stacks;  // innermost first, like frames collapsed
};

template <class Map>
std::vector<std::pair<size_t, std::string>> top(const Map& m, size_t k) {
  std::vector<std::pair<size_t, std::string>> v;
  for (const auto& [key, n] : m) v.emplace_back(n, key);
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (v.size() > k) v.resize(k);
  return v;
}

Sampler& install() {
  Sampler* s = new Sampler;
  void* warm[4];
  backtrace(warm, 4);  // loads the unwinder outside the handler
  struct sigaction sa {};
  sa.sa_sigaction = on_sigprof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  g_sampler.store(s, std::memory_order_release);
  if (::sigaction(SIGPROF, &sa, nullptr) != 0) {
    log::warn("VGPU_HOST_SAMPLES: cannot handle SIGPROF ({}): no samples", std::strerror(errno));
    return *s;
  }
  // A POSIX timer on the process's CPU clock, not ITIMER_PROF: an interval timer survives
  // execve(), where SIGPROF's default action (terminate) would kill a program that execs itself;
  // a POSIX timer is deleted by it (and, like the interval timer, not inherited by fork()).
  sigevent ev{};
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGPROF;
  timer_t timer{};
  itimerspec t{};
  t.it_interval.tv_nsec = kIntervalUs * 1000;
  t.it_value.tv_nsec = kIntervalUs * 1000;
  s->recording.store(true, std::memory_order_relaxed);
  if (::timer_create(CLOCK_PROCESS_CPUTIME_ID, &ev, &timer) != 0 || ::timer_settime(timer, 0, &t, nullptr) != 0)
    log::warn("VGPU_HOST_SAMPLES: cannot start the CPU-time timer ({}): no samples", std::strerror(errno));
  return *s;
}

Sampler& sampler() {
  static Sampler& s = install();
  return s;
}

}  // namespace

void arm() {
  try {
    static std::once_flag exit_report;
    sampler();
    std::call_once(exit_report, [] { append_report_at_exit(settings::Id::host_samples, report); });
  } catch (...) {  // a debugging aid is never worth failing the program's call
  }
}

void arm_if_wanted() {
  static const bool on = settings::is_set(settings::Id::host_samples);
  if (on) arm();
}

void range_start() {
  Sampler* s = g_sampler.load(std::memory_order_acquire);
  if (s == nullptr) return;
  std::lock_guard lock(s->mu);
  if (!s->ranged) {  // the first range: what came before it is start-up
    s->ranged = true;
    s->first = std::min(s->next.load(std::memory_order_relaxed), kCapacity);
  }
  s->recording.store(true, std::memory_order_relaxed);
}

void range_stop() {
  Sampler* s = g_sampler.load(std::memory_order_acquire);
  if (s == nullptr) return;
  std::lock_guard lock(s->mu);
  if (!s->ranged) return;
  s->recording.store(false, std::memory_order_relaxed);
  snapshot_names(*s);  // threads may end before the report
}

std::string report() {
  Sampler* s = g_sampler.load(std::memory_order_acquire);
  if (s == nullptr) return "";
  std::lock_guard lock(s->mu);
  snapshot_names(*s);
  const size_t taken = s->next.load(std::memory_order_relaxed) - s->first;
  const size_t kept = std::min(taken, kCapacity - s->first);
  Symbols symbols;
  std::map<int, ThreadTally> threads;
  for (size_t i = s->first; i < s->first + kept; ++i) {
    const Sample& x = s->samples[i];
    const int depth = x.depth.load(std::memory_order_acquire);
    if (depth <= 0) continue;
    ThreadTally& t = threads[x.tid];
    ++t.samples;
    std::string stack, last;
    std::set<std::string> seen_lib;
    for (int d = 0; d < depth; ++d) {
      const std::string& f = symbols.of(x.pc[d], d > 0);
      seen_lib.insert(library_of(f));
      if (f == last) continue;
      if (!stack.empty()) stack += " < ";
      stack += f;
      last = f;
    }
    for (const std::string& lib : seen_lib) ++t.libs[lib];
    ++t.stacks[stack];
  }
  std::string out = fmt::format("{{\"pid\": {}, \"samples\": {}, \"dropped\": {}, \"interval_us\": {}, \"ranged\": {}, \"threads\": [",
                                ::getpid(), kept, taken - kept, kIntervalUs, s->ranged ? "true" : "false");
  std::vector<std::pair<size_t, int>> order;
  for (const auto& [tid, t] : threads) order.emplace_back(t.samples, tid);
  std::sort(order.rbegin(), order.rend());
  bool first_thread = true;
  for (const auto& [n, tid] : order) {
    const ThreadTally& t = threads[tid];
    auto name = s->names.find(tid);
    out += fmt::format("{}{{\"tid\": {}, \"name\": \"{}\", \"samples\": {}, \"libs\": {{", first_thread ? "" : ", ", tid,
                       json_safe(name == s->names.end() ? "" : name->second), n);
    first_thread = false;
    bool first = true;
    for (const auto& [c, lib] : top(t.libs, 16)) {
      out += fmt::format("{}\"{}\": {}", first ? "" : ", ", json_safe(lib), c);
      first = false;
    }
    out += "}, \"stacks\": [";
    first = true;
    for (const auto& [c, st] : top(t.stacks, kTopStacks)) {
      out += fmt::format("{}[{}, \"{}\"]", first ? "" : ", ", c, json_safe(st));
      first = false;
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

}  // namespace vgpu::timing::host_samples
