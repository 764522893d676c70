// The virtual CPU clock of each host thread under the passthrough backend: the rule both
// backends share (timing/thread_clock.h), bracketing every call vgpu times (launches, copies,
// events, synchronizations, whose real waiting the virtual timeline replaces), plus what only
// this backend needs, each virtual device's horizon:
//
// Threads hand work to each other without the driver (PyTorch's autograd engine launches the
// backward pass from its own thread while the main thread waits on a condition variable), so a
// thread's clock alone can lag behind. Hence each virtual device keeps a horizon: the latest
// virtual time some thread synchronized with that device's work. A thread that then submits
// work to the device is at least there; it happens later in real time, so in the virtual
// cluster too. Threads driving different virtual devices stay independent.
// VGPU_HORIZON=submitters: only a thread that issued work to a device itself raises horizons. A
// bystander that synchronizes (a watchdog, a library's helper thread) then moves its own clock
// only: in the real job it is the only thread that waited.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "passthrough/call_thread.h"
#include "passthrough/kept_address.h"
#include "timing/driver_call_cost.h"
#include "timing/thread_clock.h"

namespace vgpu::pt::thread_clock {

// The calling thread's virtual clock, seconds, raised to the horizon of `device` (< 0: none).
double now(int device = -1);
// Synchronization with work on `device` that finishes at `t`: the thread's clock jumps there
// (never back) and the device's horizon follows.
void advance_to(double t, int device);
// The thread goes on from work another thread handed it at virtual time `t` (it woke from a
// condition variable that thread signalled: vgpu's clock table, slot 3): its clock moves there,
// never back; the device's horizon does not follow (the handing thread's work may be unrelated).
void handoff(double t);
// The NCCL plugin's own work on the calling thread (its profiler callbacks, which the real job
// does not run): like a driver call that does no work, the CPU time in between is not charged
// and a polling thread stays polling. Always in pairs; nest.
void own_work_begin();
void own_work_end();
// Whether the thread has a virtual clock: it submitted or synchronized work since it started.
bool has_clock();
// Whether the thread is inside a call vgpu times (a Pause is open).
bool paused();

// Polling (the rule: timing/thread_clock.h) is asked of the thread's clock itself, through the
// query's Pause (timed_api.cpp, poll_answer.h).

// What Pause reads inline (thread_clock.cpp has the rest).
namespace detail {
// The calling thread's call state (call_thread.h): constant-initialized, so that a use needs no
// guard and no wrapper call, only the thread-local's address.
extern constinit thread_local CallThread t_call_thread;
// The thread's call state with its clock set, reached through __tls_get_addr, and its slot
// claimed (below) on its first call (out of line).
CallThread& call_thread_first_use();

// Where a thread finds its call state without __tls_get_addr: a slot of a process-wide table,
// chosen by the thread pointer (%fs), holding the address of the thread's t_call_thread. Why: a
// library loaded by dlopen, as libcuda is, reaches a thread-local through __tls_get_addr, which
// reads six cache lines (the thread's DTV, its generation and ld.so's, the variable's GOT
// entries) that a framework's work and the real driver's call evict between two driver calls:
// a quarter of what an event record misses (issue 21). The initial-exec model would not do: its
// static TLS block (this library's 400 KB of thread-locals) cannot be had after start-up, and
// TLS descriptors take glibc's slower dynamic path there (docs/results.md, callcost6). The slot
// costs the thread pointer's line and its own. A thread whose slot another thread holds keeps
// __tls_get_addr (call_thread_first_use). The slot is given back when the thread exits (a
// thread-local's destructor) and, in a forked child, for every thread but the forking one: a
// later thread may get the same thread pointer, and must not find a dead thread's state.
struct ThreadSlot {
  std::atomic<uintptr_t> key{0};  // the owner's thread pointer | 1; 0: free
  std::atomic<CallThread*> thread{nullptr};  // the owner's t_call_thread, its clock set
};
constexpr size_t kThreadSlotBits = 10;
extern std::array<ThreadSlot, size_t{1} << kThreadSlotBits> g_thread_slots;
// The calling thread's key and slot.
inline uintptr_t thread_key() {
#if defined(__x86_64__)
  uintptr_t tp;
  asm("mov %%fs:0, %0" : "=r"(tp));  // the TCB's pointer to itself: what __builtin_thread_pointer
                                     // gives with GCC, which clang offers on x86 only lately
  return tp | 1;
#else
  return reinterpret_cast<uintptr_t>(__builtin_thread_pointer()) | 1;
#endif
}
inline ThreadSlot& thread_slot(uintptr_t key) {
  // Thread pointers lie a thread's stack apart (megabytes): a multiplicative hash of the page.
  return g_thread_slots[static_cast<size_t>(((key >> 12) * 0x9E3779B97F4A7C15ull) >> (64 - kThreadSlotBits))];
}
// The calling thread's, its clock set.
inline CallThread& call_thread_with_clock() {
  const uintptr_t key = thread_key();
  ThreadSlot& s = thread_slot(key);
  // Only the owner ever finds its key there, and only it writes `thread` (call_thread_first_use).
  if (s.key.load(std::memory_order_relaxed) == key) [[likely]]
    return *s.thread.load(std::memory_order_relaxed);
  return call_thread_first_use();
}
// Each virtual device's horizon (see above), indexed by device, each on its own cache line: every
// timed call reads its device's, and a synchronization on another device writes that one (eight
// to a line, device 1's synchronizations took the line device 0's calls read from their cores).
constexpr int kMaxDevices = 1024;
struct alignas(64) Horizon {
  std::atomic<double> t{0};
};
extern std::array<Horizon, kMaxDevices> g_horizon;
// now(device) of `c`'s thread.
inline double now_of(timing::ThreadClock& c, int device) {
  c.start_keeping_time();
  const double n = c.now();
  if (device < 0 || device >= kMaxDevices) return n;
  c.note_submits();  // asked for an issue time: it submits work
  const double h = g_horizon[static_cast<size_t>(device)].t.load(std::memory_order_relaxed);
  if (!(h > n)) return n;  // the common case, the thread ahead of the horizon: nothing to move
  return c.advance_to(h, timing::ClockTally::horizon) ? h : n;
}
// now_of(c, device) inside a call, for a thread known to keep time and to have submitted to
// `device` before (a valid index): a settled event record's memo says so (record_memo.h), and
// the tests now_of repeats were ~10 of the record's instructions (issue 21).
inline double now_inside(timing::ThreadClock& c, int device) {
  const double n = c.reading();  // inside a call now() charges nothing
  const double h = g_horizon[static_cast<size_t>(device)].t.load(std::memory_order_relaxed);
  if (!(h > n)) [[likely]] return n;
  return c.advance_to(h, timing::ClockTally::horizon) ? h : n;
}
}  // namespace detail

// Excludes the real CPU time spent inside its scope from the thread's clock (ThreadClock::enter
// and leave). Nests. `blocking`: the scope waits (a synchronization). Inline, with its clock's
// common cases: the calls into thread_clock.cpp and the registers they saved were ~40
// instructions of every timed call (issue 21).
class Pause {
 public:
  [[gnu::always_inline]] explicit Pause(bool blocking = false)
      : thread_(&detail::call_thread_with_clock()), clock_(thread_->clock) {
    clock_->enter(blocking);
  }
  // The same for the calling thread's call state `thread`, already looked up
  // (detail::call_thread_with_clock(): its clock is set).
  [[gnu::always_inline]] explicit Pause(CallThread& thread, bool blocking = false)
      : thread_(&thread), clock_(thread.clock) {
    clock_->enter(blocking);
  }
  // The scope of a call whose clock its caller entered already (its clock's enter()): the
  // settled event record enters before it knows which way it goes (timed_api.cpp).
  struct Entered {};
  [[gnu::always_inline]] Pause(CallThread& thread, Entered) : thread_(&thread), clock_(thread.clock) {}
  // A query's scope: while the thread polls, the CPU time since its last question is dropped.
  struct Query {};
  explicit Pause(Query);
  [[gnu::always_inline]] ~Pause() {
    if (!left_) leave_now();
  }
  // Closes the scope here rather than at its end: what the caller does after it is the
  // program's time, as the code around every timed call is (its entry point's own wrapper, the
  // return). For an event record's last few stores, which then overlap the clock's reading
  // (timed_api.cpp). reopen() undoes it, for a caller that finds it must wait after all.
  [[gnu::always_inline]] void leave_now() {
    left_ = true;
    clock_->charge_driver(driver_seconds_);
    driver_seconds_ = 0;
    clock_->leave();
  }
  void reopen() {
    left_ = false;
    clock_->enter();
  }
  // The scope turned out to wait after all (a launch measured alone).
  void mark_blocking() { clock_->mark_blocking(); }
  // now(device) of the thread whose scope this is, without looking its clock up again (a
  // thread-local lookup, a call into the C library, on every timed call: issue 21).
  double now(int device) const { return detail::now_of(*clock_, device); }
  // The calling thread's call state (call_thread.h), looked up once with the clock.
  CallThread& thread() const { return *thread_; }
  // Runs `call`, the real driver's entry point of kind `kind`, and, when the scope closes (after
  // the op took its issue time), charges the thread's clock what such a call costs a thread on a
  // real machine: timing/driver_call_cost.h, the figure the sim backend charges too, when
  // VGPU_DRIVER_TIME asks for it (not by default here: see there why). Never the call's own time.
  template <class Call>
  auto real(timing::DriverCall kind, Call&& call) {
    auto r = call();
    if (thread_->charges_driver < 0)
      thread_->charges_driver = timing::charge_driver_time(timing::Backend::passthrough) ? 1 : 0;
    if (thread_->charges_driver > 0) driver_seconds_ += timing::real_driver_seconds(kind, timing::Backend::passthrough);
    return r;
  }
  Pause(const Pause&) = delete;
  Pause& operator=(const Pause&) = delete;

 private:
  double driver_seconds_ = 0;  // charged when the scope closes (after the op took its issue time)
  bool left_ = false;  // leave_now() closed it
  CallThread* thread_;           // the thread's, looked up once (a thread-local lookup per use)
  timing::ThreadClock* clock_;  // thread_->clock
};

}  // namespace vgpu::pt::thread_clock
