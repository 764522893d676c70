#include "sim/core/thread_state.h"

#include <algorithm>

#include "sim/core/driver_state.h"
#include "simcore/engine.h"

namespace vgpu {

namespace {
thread_local ThreadState* t_state = nullptr;  // set while the thread's state exists
}

ThreadState::~ThreadState() {
  if (t_state == this) t_state = nullptr;
  // The driver state is never destroyed, so it is still there at any thread's exit (the main
  // thread's included). A driver call made after this point (another library's static
  // destructor) must not make the thread a rank again: nobody would ever unregister it.
  const int r = rank;
  rank = kRetired;
  if (r > kNoRank)
    if (DriverState* d = DriverState::get()) d->ranks().leave(r);
}

ThreadState& this_thread() {
  thread_local ThreadState state;
  t_state = &state;
  return state;
}

ThreadState* this_thread_if_any() { return t_state; }

int ThreadRanks::join(double* start) {
  std::lock_guard lock(mu_);
  // Where the engine starts a new rank: the others' floor, or, with none, where history was
  // reclaimed (its stats' floor never exceeds the ranks' floor, so the max is exact either way).
  double at = engine_.stats().floor;
  if (!floors_.empty()) {
    double low = floors_.begin()->second;
    for (const auto& [r, f] : floors_) low = std::min(low, f);
    at = std::max(at, low);
  }
  const int rank = next_rank_++;
  engine_.register_rank(rank);
  floors_[rank] = at;
  *start = at;
  return rank;
}

void ThreadRanks::promise(int rank, double t) {
  std::lock_guard lock(mu_);
  auto it = floors_.find(rank);
  if (it == floors_.end() || !(t > it->second)) return;
  it->second = t;
  engine_.set_rank_floor(rank, t);
}

double ThreadRanks::lowest_floor(double otherwise) {
  std::lock_guard lock(mu_);
  if (floors_.empty()) return otherwise;
  double low = floors_.begin()->second;
  for (const auto& [r, f] : floors_) low = std::min(low, f);
  return low;
}

void ThreadRanks::leave(int rank) {
  std::lock_guard lock(mu_);
  if (floors_.erase(rank) == 0) return;
  engine_.unregister_rank(rank);
}

}  // namespace vgpu
