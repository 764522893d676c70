// VGPU_CLOCK_TRACE, a debugging aid: each host thread that keeps virtual time records its clock's
// recent moves (a call entered and the CPU time it charged, a query, a jump to work polled or
// synchronized with), each with the wall time, the clock after the move and the code that called
// the driver, and at exit the process appends them to the file the setting names. It answers what
// a clock report's sums cannot: where, between which two calls of which library, a thread's
// virtual time went (nccl-tests' first timed iteration read 35-120 us of host time against the
// real machine's ~20: which stretch of NCCL's host code, or vgpu's, is it?).
//
// Each thread's line: {"pid", "tid", "name", "dropped" (older moves not kept), "moves": [[wall_us,
// move, charged_us, now_us, caller, entry, slept, preempted, cpu_us, core], ...]}, caller and entry
// as "library+0xoffset" and the nearest exported symbol ("" unknown); at a jump or a wait and at
// the move after it (-1 at other moves) slept and preempted, the thread's voluntary and involuntary
// context switches so far, and cpu_us, its CPU time so far (getrusage); core, the processor the
// move ran on (every move).
// Between two jumps, wall minus CPU time is what the thread spent off its core; a change of core
// before a slow stretch says its caches were another core's.
//
// Off (the setting absent), a thread clock holds a null buffer and every move costs one test of it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace vgpu::timing::clock_trace {

enum class Move : std::uint8_t {
  call,     // a bracketed driver call entered: `charged` = the CPU time since the last one
  query,    // a query entered while not polling: `charged` as for a call
  ready,    // a query heard "ready" after polling: `charged` = the jump to the work's finish
  sync,     // a synchronization moved the clock: `charged` = the jump
  horizon,  // raised to a device's horizon: `charged` = the jump
  read,     // the clock read outside a call (the program's clock, an issue time): `charged` as for a call
  wait,     // inside a call, a contended lock of vgpu's: `charged` = the wall time waited (not charged)
};

struct Record {
  double wall;         // seconds, the process's monotonic clock
  double charged;      // seconds (see Move)
  double now;          // the thread's virtual clock after the move, seconds
  const void* caller;  // the return address into the driver's caller (null: unknown)
  const void* entry;   // an address inside the driver's entry point that moved it (null: unknown)
  // At a jump (ready, sync) or a wait: the thread's CPU time so far (seconds) and its context
  // switches, voluntary (it slept: a lock, a blocking wait) and involuntary (preempted), from
  // getrusage; -1 at other moves. A stretch that ran cold after a wait shows which kind of wait
  // it was.
  double cpu = -1;
  std::int32_t slept = -1, preempted = -1;
  std::int32_t core = -1;  // sched_getcpu() at the move (-1: unknown)
  Move move;
};

// One thread's recent moves, the last kCapacity kept.
class Buffer {
 public:
  static constexpr std::uint32_t kCapacity = 1u << 17;
  void add(Move move, double charged, double now, const void* caller, const void* entry = nullptr);
  // The moves kept, oldest first, as one JSON line for the report (`tid`, `name`: the thread's).
  void append_json(std::string_view header, std::string& out) const;

 private:
  std::array<Record, kCapacity> records_{};
  std::atomic<std::uint64_t> next_{0};  // written by its thread only; read at exit
  bool after_wait_ = false;  // the last move was a jump or a wait: the next one reads getrusage too
};

// An address inside the code it is inlined into (x86-64; null elsewhere): in the driver's entry
// point, dladdr names the entry.
[[gnu::always_inline]] inline const void* here() {
  const void* pc = nullptr;
#if defined(__x86_64__)
  asm volatile("lea 0(%%rip), %0" : "=r"(pc));
#endif
  return pc;
}

// Every registered thread's moves, one JSON line each (what the exit report appends).
std::string lines();

// The calling thread's buffer, registered for the exit report; null when VGPU_CLOCK_TRACE is unset.
Buffer* buffer_for_this_thread();

}  // namespace vgpu::timing::clock_trace
