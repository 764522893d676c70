#include "passthrough/thread_clock.h"

#include <time.h>

#include <array>
#include <atomic>

namespace vgpu::pt::thread_clock {
namespace {

struct Clock {
  double now = 0;
  double last_cpu = -1;  // thread CPU time when the clock was last charged; < 0: never
  int paused = 0;
  bool used = false;
  bool blocking = false;     // the outermost pause
  double pause_wall = 0;     // monotonic time when it began
  bool polling = false;      // the last query answered "not ready" (see polled_not_ready)
  // What this polling is waiting for (the work asked about and heard "not ready" of).
  std::array<const void*, 8> awaited{};
  int awaiting = 0;
};
thread_local Clock t_clock;

constexpr int kMaxDevices = 1024;
std::array<std::atomic<double>, kMaxDevices> g_horizon{};

double wall_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double thread_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void charge(Clock& c) {
  if (c.paused > 0) return;
  const double cpu = thread_cpu_seconds();
  if (c.last_cpu >= 0 && cpu > c.last_cpu) c.now += cpu - c.last_cpu;
  c.last_cpu = cpu;
}

// The CPU time since the thread's last call is dropped: it was spent polling.
void drop(Clock& c) { c.last_cpu = thread_cpu_seconds(); }

void raise_horizon(int device, double t) {
  if (device < 0 || device >= kMaxDevices) return;
  std::atomic<double>& h = g_horizon[static_cast<size_t>(device)];
  double seen = h.load(std::memory_order_relaxed);
  while (t > seen && !h.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {
  }
}

}  // namespace

double now(int device) {
  Clock& c = t_clock;
  // A poller's clock stands still until it either asks again (the time was waiting) or does
  // something else with the driver (the time was work, charged then).
  if (!c.polling) charge(c);
  c.used = true;
  if (device >= 0 && device < kMaxDevices) {
    const double h = g_horizon[static_cast<size_t>(device)].load(std::memory_order_relaxed);
    if (h > c.now) c.now = h;
  }
  return c.now;
}

void advance_to(double t, int device) {
  Clock& c = t_clock;
  charge(c);
  c.used = true;
  if (t > c.now) c.now = t;
  raise_horizon(device, c.now);
}

void polled_not_ready(const void* awaited) {
  Clock& c = t_clock;
  if (!c.polling) c.awaiting = 0;  // a new polling
  c.polling = true;
  c.used = true;
  for (int i = 0; i < c.awaiting; ++i)
    if (c.awaited[i] == awaited) return;
  if (c.awaiting < static_cast<int>(c.awaited.size())) c.awaited[c.awaiting++] = awaited;
}

bool polled_ready(const void* awaited, double finish) {
  Clock& c = t_clock;
  if (!c.polling) return false;
  for (int i = 0; i < c.awaiting; ++i) {
    if (c.awaited[i] != awaited) continue;
    c.awaited[i] = c.awaited[--c.awaiting];
    if (c.awaiting == 0) c.polling = false;
    if (finish > c.now) c.now = finish;
    c.used = true;
    return true;
  }
  return false;
}

bool polling() { return t_clock.polling; }

bool has_clock() { return t_clock.used; }
bool paused() { return t_clock.paused > 0; }

Pause::Pause(bool blocking) {
  Clock& c = t_clock;
  if (c.paused++ > 0) {
    c.blocking = c.blocking || blocking;
    return;
  }
  --c.paused;
  charge(c);
  c.polling = false;  // any other call ends the polling (its CPU time since was charged above)
  ++c.paused;
  c.blocking = blocking;
  c.pause_wall = wall_seconds();
}

Pause::Pause(Query) {
  Clock& c = t_clock;
  if (c.paused++ > 0) return;
  --c.paused;
  if (c.polling)
    drop(c);  // the time since the last question was spent waiting for the answer
  else
    charge(c);
  ++c.paused;
  c.blocking = false;
  c.pause_wall = wall_seconds();
}

void Pause::mark_blocking() { t_clock.blocking = true; }

Pause::~Pause() {
  Clock& c = t_clock;
  if (c.paused > 1) {
    --c.paused;
    return;
  }
  // Read while still paused: under `vgpu-run --virtual-clock` a paused thread's clock reads
  // stay real (darkapi/vgpu_clock_table.h).
  if (c.blocking || c.last_cpu < 0)
    c.last_cpu = thread_cpu_seconds();
  else
    c.last_cpu += wall_seconds() - c.pause_wall;  // CPU time inside taken as its wall time
  c.paused = 0;
}

}  // namespace vgpu::pt::thread_clock
