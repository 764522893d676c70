#include "passthrough/thread_clock.h"

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdint>

#include "common/settings.h"
#include "passthrough/kept_address.h"
#include "timing/thread_clock.h"

namespace vgpu::pt::thread_clock {
namespace {

using detail::g_horizon;
using detail::kMaxDevices;
using timing::this_thread_clock;

// Whether the thread's synchronizations raise horizons: VGPU_HORIZON, read once per thread
// (asked on synchronizations only, never on a launch).
bool may_raise_horizon(const timing::ThreadClock& c) {
  thread_local int only_submitters = -1;  // -1: not read yet
  if (only_submitters < 0) only_submitters = settings::text(settings::Id::horizon) == "submitters" ? 1 : 0;
  return only_submitters == 0 || c.submits();
}

// Raises the horizon to `t`. Returns how far it moved ahead of a horizon already set (0 when it
// did not move, or when this set it for the first time: that is no push ahead of anyone).
double raise_horizon(int device, double t) {
  if (device < 0 || device >= kMaxDevices) return 0;
  std::atomic<double>& h = g_horizon[static_cast<size_t>(device)].t;
  double seen = h.load(std::memory_order_relaxed);
  while (t > seen) {
    if (h.compare_exchange_weak(seen, t, std::memory_order_relaxed)) return seen > 0 ? t - seen : 0;
  }
  return 0;
}

}  // namespace

namespace detail {
std::array<Horizon, kMaxDevices> g_horizon{};
constinit thread_local CallThread t_call_thread;
std::array<ThreadSlot, size_t{1} << kThreadSlotBits> g_thread_slots{};

namespace {

// In a forked child only the forking thread lives on: the others' slots are freed (their
// thread pointers may come back for new threads, whose thread-locals are not theirs).
void free_others_slots_in_child() {
  const uintptr_t key = thread_key();
  for (ThreadSlot& s : g_thread_slots) {
    if (s.key.load(std::memory_order_relaxed) == key) continue;
    s.thread.store(nullptr, std::memory_order_relaxed);
    s.key.store(0, std::memory_order_relaxed);
  }
}

// Frees the thread's slot when the thread exits (its thread-locals' destructors run first: a
// call from one made after this finds no slot and takes __tls_get_addr, to the same state).
struct SlotRelease {
  ThreadSlot* slot;
  uintptr_t key;
  ~SlotRelease() {
    if (slot->key.load(std::memory_order_relaxed) != key) return;
    slot->thread.store(nullptr, std::memory_order_relaxed);
    slot->key.store(0, std::memory_order_release);
  }
};

void claim_slot(CallThread& t) {
  static const bool at_fork = pthread_atfork(nullptr, nullptr, &free_others_slots_in_child) == 0;
  if (!at_fork) return;  // no fork handler: no slots (a child could find a dead thread's)
  const uintptr_t key = thread_key();
  ThreadSlot& s = thread_slot(key);
  uintptr_t free = 0;
  if (!s.key.compare_exchange_strong(free, key, std::memory_order_acq_rel, std::memory_order_relaxed)) return;
  s.thread.store(&t, std::memory_order_relaxed);
  thread_local SlotRelease release{&s, key};
  (void)release;
}

}  // namespace

CallThread& call_thread_first_use() {
  CallThread& t = kept_address(t_call_thread);
  if (t.clock == nullptr) t.clock = &this_thread_clock();
  if (!t.slot_asked) {
    t.slot_asked = true;
    claim_slot(t);
  }
  return t;
}
}  // namespace detail

double now(int device) { return detail::now_of(this_thread_clock(), device); }

void advance_to(double t, int device) {
  timing::ThreadClock& c = this_thread_clock();
  c.start_keeping_time();
  c.advance_to(t);
  if (may_raise_horizon(c)) {
    if (const double moved = raise_horizon(device, c.now()); moved > 0) c.note_raised(moved);
  }
}

void handoff(double t) { this_thread_clock().advance_to(t, timing::ClockTally::handoff); }

bool has_clock() { return this_thread_clock().keeps_time(); }
void own_work_begin() { this_thread_clock().enter_neutral(); }
void own_work_end() { this_thread_clock().leave(); }
bool paused() { return this_thread_clock().inside(); }

}  // namespace vgpu::pt::thread_clock

namespace vgpu::pt {
CallThread& this_call_thread() { return thread_clock::detail::call_thread_with_clock(); }
}  // namespace vgpu::pt

namespace vgpu::pt::thread_clock {
Pause::Pause(Query) : thread_(&detail::call_thread_with_clock()), clock_(thread_->clock) { clock_->enter_query(); }
}  // namespace vgpu::pt::thread_clock
