#include "sim/core/virtual_clock.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "common/job_trace.h"
#include "common/log.h"
#include "common/settings.h"
#include "sim/core/driver_state.h"
#include "sim/core/thread_state.h"
#include "timing/thread_clock.h"
#include "simcore/chrome_trace.h"
#include "simcore/engine.h"

namespace vgpu::vclock {
namespace {

using timing::this_thread_clock;

// Renews the thread's promise to the engine when its clock is at least `step` past it.
void publish_floor(ThreadState& t, double step) {
  const double now = this_thread_clock().reading();
  const double ahead = now - t.promised;
  if (t.rank <= ThreadState::kNoRank || !(ahead > 0 && ahead >= step)) return;
  DriverState* d = DriverState::get();
  if (d == nullptr) return;
  t.promised = now;
  d->ranks().promise(t.rank, now);
}

void write_timeline() {
  const char* path = timeline_path();
  DriverState* d = DriverState::get();
  if (path == nullptr || d == nullptr) return;
  try {
    // The engine is never destroyed (DriverState lives to the end of the process) and is
    // thread-safe, so reading it here is safe even while other threads still submit. A job's
    // processes (torchrun's ranks) each leave a part and the last merges them.
    job_trace::write(path, settings::text(settings::Id::job_id), d->engine().timeline_json(),
                     simcore::merge_chrome_traces);
  } catch (...) {
    // Never let an exit handler throw out of the host process.
  }
}

// before_next_call's function, per thread.
thread_local void (*t_before_next_call)() = nullptr;
// How many threads have one set: every driver call of every thread asks, and nearly always none
// has (a send/recv held for its NCCL tasks, or a collective of rank processes awaiting its shared
// answer: nccl_collectives.cpp), so a call reads this one shared line
// and not its thread's slot (a thread-local of a shared library: a __tls_get_addr call). A
// thread that sets its own counts itself first, so its own next call always looks; one that
// exits with its function set leaves the count up, which only costs the look.
std::atomic<int> g_threads_with_work{0};

void run_before_next_call(bool outermost) {
  if (!outermost || g_threads_with_work.load(std::memory_order_relaxed) == 0) return;
  void (*fn)() = t_before_next_call;
  if (fn == nullptr) return;
  t_before_next_call = nullptr;  // the work may make driver calls of its own
  g_threads_with_work.fetch_sub(1, std::memory_order_relaxed);
  fn();
}

}  // namespace


void enter_call() {
  timing::ThreadClock& clock = this_thread_clock();  // one thread-local lookup for the call
  const bool outermost = !clock.inside();
  clock.enter();
  run_before_next_call(outermost);
}
void enter_neutral_call() { this_thread_clock().enter_neutral(); }
void enter_query_call() {
  timing::ThreadClock& clock = this_thread_clock();
  const bool outermost = !clock.inside();
  clock.enter_query();
  run_before_next_call(outermost);
}

void before_next_call(void (*fn)()) {
  if ((t_before_next_call == nullptr) != (fn == nullptr))
    g_threads_with_work.fetch_add(fn != nullptr ? 1 : -1, std::memory_order_relaxed);
  t_before_next_call = fn;
}

void leave_call() {
  // The clock will only creep from here until the thread's next call: a valid floor.
  if (this_thread_clock().leave()) publish_floor(this_thread(), kFloorStep);
}

bool in_call() { return this_thread_clock().inside(); }

double now() { return this_thread_clock().now(); }

void advance_to(double t, bool floor_now) {
  if (this_thread_clock().advance_to(t)) publish_floor(this_thread(), floor_now ? 0 : kFloorStep);
}

double earliest_start() {
  ThreadState& t = this_thread();
  if (t.rank == ThreadState::kNoRank) {
    if (DriverState* d = DriverState::get()) {
      double start = 0;
      t.rank = d->ranks().join(&start);
      t.promised = start;
      // Joining late: the engine finalized everything before `start`, so this thread's work
      // starts there at the earliest. Its clock says so too, and then keeps its promise.
      this_thread_clock().start_keeping_time();
      this_thread_clock().advance_to(start);
      publish_floor(t, 0);
    }
  }
  return now() + kLaunchLatency;
}

namespace {

// Whether an object loaded before this library defines the driver's cuInit: this library is then
// the "real driver" a passthrough libcuda loaded beneath itself (with RTLD_LOCAL, so the symbol
// is not in the global scope to ask). Objects are listed in load order, and the top driver was
// loaded first.
bool loaded_beneath_another_driver() {
  struct Walk {
    const void* mine = nullptr;
    bool other = false;
  } walk;
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&loaded_beneath_another_driver), &self) == 0) return false;
  walk.mine = self.dli_fbase;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* w = static_cast<Walk*>(data);
        if (reinterpret_cast<const void*>(info->dlpi_addr) == w->mine) return 1;  // reached us
        if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
        void* h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        if (h == nullptr) return 0;
        Dl_info at{};
        void* init = dlsym(h, "cuInit");
        // The object's own definition (a dependency's, found through it, may be this library).
        if (init != nullptr && dladdr(init, &at) != 0 && at.dli_fbase != w->mine &&
            dlsym(h, "cuGetProcAddress_v2") != nullptr)
          w->other = true;
        dlclose(h);
        return w->other ? 1 : 0;
      },
      &walk);
  return walk.other;
}

}  // namespace

const char* timeline_path() {
  static const char* path = [] () -> const char* {
    static const std::string p = settings::text(settings::Id::timeline);
    if (p.empty() || loaded_beneath_another_driver()) return nullptr;
    return p.c_str();
  }();
  return path;
}

void install_timeline_writer() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (timeline_path() != nullptr) std::atexit(write_timeline);
  });
}

}  // namespace vgpu::vclock
