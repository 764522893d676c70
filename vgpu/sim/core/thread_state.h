// What the driver keeps per host thread: the context stack (cuCtxPush/Pop, cuCtxSetCurrent
// replaces the top) and its rank in the simcore engine (its virtual CPU clock is
// timing/thread_clock.h, the rule both backends share). A new
// thread starts with an empty stack; cudart then binds its device's primary context, exactly as
// with the real driver.
//
// Ranks. Every host thread that submits work is a rank of the engine (simcore/engine.h), and its
// floor is its virtual clock: every op a thread submits starts at or after the thread's clock
// (sim/core/virtual_clock.h), so the clock is a promise the thread keeps. The engine finalizes and
// reclaims what finishes before the lowest promise; without ranks it would keep every event of
// the run. A thread joins on its first submission and leaves when it exits.
#pragma once

#include <mutex>
#include <unordered_map>
#include <vector>

#include "front/driver/cuda_api.h"

namespace simcore { class Engine; }

namespace vgpu {

struct ThreadState {
  static constexpr int kNoRank = 0;      // not (yet) a rank of the engine
  static constexpr int kRetired = -1;    // the thread is exiting: never a rank again

  std::vector<CUcontext> context_stack;
  int rank = kNoRank;           // this thread's rank in the engine (ThreadRanks)
  double promised = 0;          // the floor it last promised the engine, seconds

  CUcontext current() const { return context_stack.empty() ? nullptr : context_stack.back(); }

  ThreadState() = default;
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
  // A thread that exits stops holding the engine's floor back.
  ~ThreadState();
};

ThreadState& this_thread();
// The calling thread's state if it has one already (never creates it: safe from inside
// clock_gettime, an allocator, or a thread being torn down).
ThreadState* this_thread_if_any();

// The host threads that are ranks of the engine, with the floor each promised. One per driver
// (DriverState owns it). It mirrors the floors so that a thread joining late learns where the
// engine starts it (the other ranks' floor: nothing final may become tentative again), and
// moves its clock there instead of submitting into the finalized past.
class ThreadRanks {
 public:
  explicit ThreadRanks(simcore::Engine& engine) : engine_(engine) {}

  // Registers a new rank. Returns its id (never kNoRank or kRetired) and, in *start, the floor
  // the engine gives it.
  int join(double* start);
  // Rank `rank` will submit nothing that starts before `t`. Ignored when not above its last
  // promise.
  void promise(int rank, double t);
  void leave(int rank);
  // The least floor a registered rank promised: the engine's floor, where a submission may start
  // without breaking a promise (`otherwise` while no rank is registered).
  double lowest_floor(double otherwise);

 private:
  simcore::Engine& engine_;
  std::mutex mu_;  // held across the engine calls: the mirror and the engine agree
  std::unordered_map<int, double> floors_;
  int next_rank_ = 1;
};

}  // namespace vgpu
