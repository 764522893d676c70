#include "passthrough/thread_clock.h"

#include <array>
#include <atomic>

#include "common/settings.h"
#include "timing/thread_clock.h"

namespace vgpu::pt::thread_clock {
namespace {

using timing::this_thread_clock;

constexpr int kMaxDevices = 1024;
std::array<std::atomic<double>, kMaxDevices> g_horizon{};

// What this thread knows of itself: whether it issued work to a device (a submitter), and
// VGPU_HORIZON read once (1: only submitters raise horizons).
struct ThreadRole {
  bool submitter = false;
  int only_submitters = -1;  // -1: not read yet
};
thread_local ThreadRole t_role;

bool may_raise_horizon() {
  if (t_role.only_submitters < 0)
    t_role.only_submitters = settings::text(settings::Id::horizon) == "submitters" ? 1 : 0;
  return t_role.only_submitters == 0 || t_role.submitter;
}

// Returns how far the horizon moved.
double raise_horizon(int device, double t) {
  if (device < 0 || device >= kMaxDevices) return 0;
  std::atomic<double>& h = g_horizon[static_cast<size_t>(device)];
  double seen = h.load(std::memory_order_relaxed);
  while (t > seen) {
    if (h.compare_exchange_weak(seen, t, std::memory_order_relaxed)) return t - seen;
  }
  return 0;
}

}  // namespace

double now(int device) {
  timing::ThreadClock& c = this_thread_clock();
  c.start_keeping_time();
  const double n = c.now();
  if (device < 0 || device >= kMaxDevices) return n;
  t_role.submitter = true;  // asked for an issue time: it submits work
  const double h = g_horizon[static_cast<size_t>(device)].load(std::memory_order_relaxed);
  return c.advance_to(h, timing::ClockTally::horizon) ? h : n;
}

void advance_to(double t, int device) {
  timing::ThreadClock& c = this_thread_clock();
  c.start_keeping_time();
  c.advance_to(t);
  // The first raise of a run moves the horizon from 0 to the thread's clock: not a push ahead.
  if (may_raise_horizon()) {
    const double moved = raise_horizon(device, c.now());
    if (moved > 0 && moved < c.now()) c.note_raised(moved);
  }
}

void handoff(double t) { this_thread_clock().advance_to(t, timing::ClockTally::handoff); }

void polled_not_ready(const void* awaited) { this_thread_clock().polled_not_ready(awaited); }
bool polled_ready(const void* awaited, double finish) { return this_thread_clock().polled_ready(awaited, finish); }
bool polling() { return this_thread_clock().polling(); }
bool has_clock() { return this_thread_clock().keeps_time(); }
bool paused() { return this_thread_clock().inside(); }

Pause::Pause(bool blocking) : clock_(&this_thread_clock()) { clock_->enter(blocking); }
Pause::Pause(Query) : clock_(&this_thread_clock()) { clock_->enter_query(); }
void Pause::mark_blocking() { clock_->mark_blocking(); }
Pause::~Pause() {
  clock_->charge_driver(driver_seconds_);
  clock_->leave();
}
}  // namespace vgpu::pt::thread_clock
