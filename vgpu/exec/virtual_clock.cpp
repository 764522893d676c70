#include "exec/virtual_clock.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "common/log.h"
#include "core/driver_state.h"
#include "core/thread_state.h"
#include "simcore/engine.h"

namespace vgpu::vclock {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

thread_local int t_depth = 0;

// Charge the CPU time spent outside the driver since the thread last left it.
void charge_outside_time() {
  ThreadState& t = this_thread();
  const double cpu = thread_cpu_seconds();
  if (t.last_real_cpu >= 0 && cpu > t.last_real_cpu) t.virtual_now += cpu - t.last_real_cpu;
  t.last_real_cpu = cpu;
}

void write_timeline() {
  const char* path = std::getenv("VGPU_TIMELINE");
  DriverState* d = DriverState::get();
  if (path == nullptr || *path == '\0' || d == nullptr) return;
  try {
    // The engine is never destroyed (DriverState lives to the end of the process) and is
    // thread-safe, so reading it here is safe even while other threads still submit.
    const std::string json = d->engine().timeline_json();
    if (FILE* f = std::fopen(path, "w")) {
      std::fwrite(json.data(), 1, json.size(), f);
      std::fclose(f);
    } else {
      log::warn("VGPU_TIMELINE: cannot write {}", path);
    }
  } catch (...) {
    // Never let an exit handler throw out of the host process.
  }
}

}  // namespace

CallScope::CallScope() {
  if (t_depth++ == 0) charge_outside_time();
}

CallScope::~CallScope() {
  if (--t_depth == 0) this_thread().last_real_cpu = thread_cpu_seconds();
}

double now() {
  if (t_depth == 0) charge_outside_time();
  return this_thread().virtual_now;
}

void advance_to(double t) {
  ThreadState& s = this_thread();
  if (t > s.virtual_now) s.virtual_now = t;
}

void install_timeline_writer() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* path = std::getenv("VGPU_TIMELINE");
    if (path != nullptr && *path != '\0') std::atexit(write_timeline);
  });
}

}  // namespace vgpu::vclock
