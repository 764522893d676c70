#include "passthrough/thread_clock.h"

#include <array>
#include <atomic>

#include "timing/outside_cpu_time.h"

namespace vgpu::pt::thread_clock {
namespace {

struct Clock {
  double now = 0;
  OutsideCpuTime outside;  // CPU time outside paused calls (exec/outside_cpu_time.h)
  int paused = 0;
  bool used = false;
  bool blocking = false;     // the outermost pause
  bool polling = false;      // the last query answered "not ready" (see polled_not_ready)
  // What this polling is waiting for (the work asked about and heard "not ready" of).
  std::array<const void*, 8> awaited{};
  int awaiting = 0;
};
thread_local Clock t_clock;

constexpr int kMaxDevices = 1024;
std::array<std::atomic<double>, kMaxDevices> g_horizon{};

void charge(Clock& c) {
  if (c.paused > 0) return;
  c.now += c.outside.take();
}

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
  // A thread without a virtual clock (it never submitted work: NCCL's watchdog, a monitor)
  // keeps real time, its timeouts too: its questions are no waiting of the program's.
  if (!c.used) return;
  if (!c.polling) c.awaiting = 0;  // a new polling
  c.polling = true;
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
  c.now += c.outside.enter();  // also the time since a "not ready": it was work
  c.polling = false;           // any other call ends the polling
  c.blocking = blocking;
}

Pause::Pause(Query) {
  Clock& c = t_clock;
  if (c.paused++ > 0) return;
  const double outside = c.outside.enter();
  if (!c.polling) c.now += outside;  // while polling, the time since the last question was waiting
  c.blocking = false;
}

void Pause::mark_blocking() { t_clock.blocking = true; }

Pause::~Pause() {
  Clock& c = t_clock;
  if (c.paused > 1) {
    --c.paused;
    return;
  }
  // A blocking scope's wall time is mostly waiting: the CPU clock is read; otherwise the CPU
  // time inside is taken as its wall time (both readings bypass the clock shim).
  c.outside.leave(c.blocking);
  c.paused = 0;
}

}  // namespace vgpu::pt::thread_clock
