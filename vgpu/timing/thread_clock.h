// The virtual CPU clock of a host thread and the one rule that moves it, for both backends.
//
// A thread's clock advances by the CPU time the thread spends outside the driver calls vgpu
// brackets (read cheaply: outside_cpu_time.h), never by vgpu's own time inside them, and jumps
// forward (never back) to the virtual finish of the work the thread synchronizes with.
//
// Polling: a thread that asks whether work is done (cuStreamQuery, cuEventQuery) and hears "not
// ready" is waiting, however it spends the time until the next question (spinning, checking
// NCCL for errors, reading the clock). Under vgpu the physical GPU finishes later than the
// virtual cluster would (several virtual GPUs share it), so that wait must not become virtual
// time: from a "not ready" until the thread does anything else with the driver, its clock stands
// still; the CPU time in between is dropped if the next call is another question (the thread was
// spinning) and charged if it is anything else (the thread went off to do work: PyTorch's
// allocator asks once about an old block's event and carries on). The answer "ready" moves the
// clock to the virtual finish of the work asked about, as a synchronization does; an answer
// about other work moves nothing (PyTorch's allocator asks about several events in a row).
// Only a thread that keeps virtual time polls (keeps_time()): others, such as NCCL's watchdog,
// keep real time and their timeouts.
//
// What differs between the backends stays in each (sim/core/virtual_clock.h: the thread's
// promise to simcore's engine; passthrough/thread_clock.h: each virtual device's horizon); the
// rule is this class.
#pragma once

#include <array>
#include <cstdint>
#include <atomic>

#include "timing/clock_trace.h"
#include "timing/outside_cpu_time.h"

namespace vgpu::timing {

// Where a thread's virtual time came from, summed since it started keeping time, for
// VGPU_CLOCK_REPORT (clock_report.h): written only by the thread itself, read by the report at
// exit (relaxed atomics: a plain store on x86, and no race for the reader).
struct ClockTally {
  // `raised` is not part of the thread's own clock: how far this thread's synchronizations moved
  // its device's horizon ahead (the passthrough's thread_clock.h), i.e. what it pushed on others.
  // `nccl`: NCCL's modeled host cost of its groups (NcclGroupCosts), charged in place of the CPU
  // time NCCL spent inside them under vgpu (which is not counted in `cpu`).
  enum Source { cpu, driver, sync, poll, horizon, handoff, dropped, raised, nccl, kSources };
  std::atomic<unsigned long> calls{0};  // first: on the line of seconds[cpu] (ThreadClock's layout)
  std::array<std::atomic<double>, kSources> seconds{};
  void add(Source s, double v) {
    std::atomic<double>& a = seconds[s];
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  }
};

// NCCL's host cost of one group of operations on the calling thread (simcore's NcclHostCosts,
// cluster_spec.h, copied by each backend from its cluster configuration), seconds.
struct NcclGroupCosts {
  double group = 0, communicator = 0, all_reduce_communicator = 0, operation = 0;
  bool enabled = false;  // false: no model; NCCL's host time is charged as measured
};

class alignas(64) ThreadClock {
 public:
  // Entering a bracketed driver call (calls nest: only the outermost counts). The CPU time since
  // the thread last left one is charged first, and any polling ends. `blocking`: the call is
  // known to wait (a synchronization), so its wall time is not read as CPU time. (Inline, as
  // leave(): both run on every timed driver call, issue 21; always, as a large caller such as
  // the passthrough's launch otherwise kept them out of line.)
  [[gnu::always_inline]] void enter(bool blocking = false) {
    if (depth_++ > 0) {
      blocking_ = blocking_ || blocking;
      return;
    }
    const double cpu = outside_.enter();  // also the time since a "not ready": it was work
    now_ += cpu;
    tally_.add(ClockTally::cpu, cpu);
    tally_.calls.store(tally_.calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    polling_ = false;  // any other call ends the polling
    blocking_ = blocking;
    if (trace_ != nullptr) [[unlikely]]
      trace_->add(clock_trace::Move::call, cpu, now_, __builtin_return_address(0), clock_trace::here());
  }
  // Entering a query (cuStreamQuery, cuEventQuery): while the thread polls, the time since its
  // last question was waiting and is dropped.
  void enter_query();
  // Entering a call that neither asks about work nor does any (the current context or device,
  // an attribute): a thread that polls stays polling, and the time since its last question is
  // still waiting. nccl-tests' poll loop sets the device between two questions, and such a call
  // ending the polling charged the whole spin (on the sim backend, where every entry point is
  // bracketed, nccl-tests' 1-8 MiB sizes read 10-300x their model time).
  void enter_neutral() { enter_query(); }
  // The call turned out to wait after all (a launch measured alone).
  void mark_blocking() { blocking_ = true; }
  // Inside a call: `seconds` of it were the real driver's own work, which a real machine's
  // thread spends too (the rest of the call is vgpu's own and is not charged).
  void charge_driver(double seconds) {
    if (seconds > 0) {
      now_ += seconds;
      tally_.add(ClockTally::driver, seconds);
    }
  }
  // Leaving a call; true when it was the outermost one (the clock creeps again from here).
  [[gnu::always_inline]] bool leave() {
    if (depth_ == 0) return false;  // unbalanced: nothing to leave
    if (--depth_ > 0) return false;
    // A blocking call's wall time is mostly waiting: the CPU clock is read; otherwise the CPU time
    // inside is taken as its wall time.
    outside_.leave(blocking_);
    return true;
  }
  bool inside() const { return depth_ > 0; }

  // The clock, seconds, with the CPU time since the last call charged (unless inside a call or
  // polling: then it stands still). Inline: every timed call asks it for its issue time from
  // inside its bracket, where nothing is charged (issue 21).
  double now() {
    if (depth_ == 0 && !polling_) charge();
    return now_;
  }
  // Synchronization with work finishing at `t`: the clock jumps there, never back. Returns
  // whether it moved. `why`: what the jump is counted as (ClockTally::sync or ::horizon).
  bool advance_to(double t, ClockTally::Source why = ClockTally::sync);
  // The clock as last charged, charging nothing (for promises made from inside a call).
  double reading() const { return now_; }

  // Whether the thread keeps virtual time (it submitted or synchronized work), and from when.
  bool keeps_time() const { return keeps_time_; }
  void start_keeping_time() {
    if (!keeps_time_) started_keeping_time();
  }
  const ClockTally& tally() const { return tally_; }
  // This thread's synchronization moved its device's horizon `seconds` ahead (ClockTally::raised).
  void note_raised(double seconds) { tally_.add(ClockTally::raised, seconds); }
  // The thread asked for an issue time: it submits work itself (VGPU_HORIZON=submitters). Kept
  // here, in the thread's one clock, so that a launch looks up no other thread-local for it.
  void note_submits() { submits_ = true; }
  bool submits() const { return submits_; }

  // Polling (see above): a query about `awaited` answered "not ready" / "ready" (`finish`: the
  // work's virtual finish, < 0 unknown). polled_ready returns whether the clock moved.
  void polled_not_ready(const void* awaited);
  bool polled_ready(const void* awaited, double finish);
  bool polling() const { return polling_; }

  // VGPU_CLOCK_TRACE: whether this thread records its moves, and a wait inside a call for a
  // contended lock of vgpu's (`seconds` of wall time at `site`; nothing is charged for it).
  bool traced() const { return trace_ != nullptr; }
  void note_wait(double seconds, const void* site) {
    if (trace_ != nullptr) trace_->add(clock_trace::Move::wait, seconds, now_, site);
  }

  // A group of NCCL operations on this thread (the NCCL plugin's profiler sees ncclGroupStart and
  // ncclGroupEnd, implicit around a single call, and each call in between: contracts/nccl_plugin.h)
  // costs what NcclGroupCosts models, not the CPU time NCCL spends in it under vgpu, where it runs
  // another transport (the net plugin) whose host path costs otherwise, and where the first group
  // after a long wait ran 5-30x slower than the rest (issue 18). Inside a group the clock is paused
  // as in a driver call (the CPU time before it is charged at its start); the model's cost is
  // charged at its first kernel launch, where a real group launches after its host work, or at its
  // end if that comes first. NCCL may end the group before it launches its kernels (nccl-tests'
  // groups do): the clock then stays paused until the group's last launch (one per communicator
  // it has work on), the thread's next group, or its next wait (a synchronization, a "not ready"
  // answer), whichever comes first. A wait inside a group ends it too (a communicator's set-up in
  // a group synchronizes: its CPU time is charged as measured from there; a lost end can hold the
  // clock no longer than the next wait). Groups nest; only the outermost counts. Without
  // `costs.enabled` nothing is paused or charged: NCCL's CPU time counts as any other.
  void nccl_group_begin(const NcclGroupCosts& costs);
  void nccl_group_operation(std::uint64_t communicator, bool all_reduce);
  void nccl_group_launch();
  void nccl_group_end();

  // How many times the CPU clock itself was read (tests, benches).
  unsigned long exact_reads() const { return outside_.exact_reads(); }

 private:
  void charge();
  void started_keeping_time();  // once: registers the thread with VGPU_CLOCK_REPORT when set

  // What every bracketed call reads and writes (enter, leave, now) fills the clock's first cache
  // line, the trace's pointer (tested on every call), the tally's call count and CPU seconds start
  // the second: the call touches two lines of its clock, not four (a framework's own work between
  // calls evicts them; issue 21).
  double now_ = 0;
  OutsideCpuTime outside_;
  int depth_ = 0;
  bool blocking_ = false;  // the outermost call waits
  bool polling_ = false;   // the last question was answered "not ready" (beside blocking_: enter()
                           // clears both, one store)
  bool keeps_time_ = false;
  bool submits_ = false;
  clock_trace::Buffer* trace_ = nullptr;  // VGPU_CLOCK_TRACE's, null when unset
  ClockTally tally_;
  std::array<const void*, 8> awaited_{};  // what the polling asked about
  int awaiting_ = 0;
  // The NCCL group under way on this thread (nccl_group_begin): its costs, nesting, whether its
  // cost was charged, and what it holds so far (communicators beyond the array count as one each).
  struct NcclGroup {
    NcclGroupCosts costs;
    int depth = 0;
    bool charged = false;
    bool awaiting_launches = false;  // ended before its launches: the clock still paused for them
    int operations = 0, communicators = 0, all_reduce_communicators = 0, launches = 0;
    std::array<std::uint64_t, 8> seen{};
    double cost() const;
  } nccl_;
  void charge_nccl_group();
  void close_nccl_group();  // a group that ended and awaited its launches stops waiting
  void end_nccl_group_at_wait();  // a wait ends any group: open or awaiting its launches
};

// The calling thread's clock.
ThreadClock& this_thread_clock();

}  // namespace vgpu::timing
