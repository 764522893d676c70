// Kernels beside a collective's kernel slow down, on the sim backend: the rule and its rates are
// the passthrough's (timing/collective_overlap.h: 0.5 of their rate while an NCCL kernel on the
// same GPU moves data, 0.75 while it waits for its peers). What differs is where a kernel's start
// comes from. The sim places work on simcore's engine, which simulates lazily: a start is known
// only by asking the engine for the finish of what the work starts after. So it is asked only
// where the answer can matter:
//
//   - an NCCL kernel (Work::collective), once placed: its window on its GPU runs from when it
//     became resident (its stream's previous op's finish, or the issuing thread's clock if later)
//     to its finish, waiting until its start (the sim starts a collective's kernel when its last
//     rank arrived) and moving data from then on. Kernels placed before it that ran inside it
//     (kept as event ids until then, kUntimedKept a GPU) are asked for their intervals now: the
//     work they lost is the GPU's debt, carried by its next kernel.
//   - any other kernel: when every window known on its GPU ends before the issuing thread's clock
//     and the GPU carries no debt, it keeps its duration and is not asked about (the common case:
//     no query; its id is kept for a later window); otherwise its start is asked of the engine
//     and it lasts what its work takes beside the windows.
//
// Approximations beyond the rule's own: a window is fixed when its kernel is placed (a
// collective whose transfers a shared link slows ends later by its "collective end" op, not by
// a longer window); a kernel moved by a later rollback keeps the duration it was given.
//
// Not thread-safe: called under the streams' lock (sim/exec/stream.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "timing/collective_overlap.h"

namespace simcore {
class Engine;
}

namespace vgpu {

class ComputeBesideCollectives {
 public:
  static constexpr size_t kUntimedKept = 64;  // untouched kernels kept a GPU for a later window

  // `moving`, `waiting`: the rates (VGPU_COMPUTE_BESIDE_COLLECTIVE, ..._WAITING_COLLECTIVE).
  ComputeBesideCollectives(simcore::Engine& engine, double moving, double waiting);

  bool enabled() const { return overlap_.enabled(); }

  // The duration of a kernel (not a collective's) of `seconds` alone on `gpu` that starts after
  // the events `after`, not before `not_before`. *remembered: whether its interval is kept
  // already (else kernel_placed() keeps its event). *carried: of that duration, the debt of
  // kernels before it that it paid (the timeline shows it: TaskSpec::carried).
  double kernel(int gpu, std::span<const uint64_t> after, double not_before, double seconds, bool* remembered,
                double* carried);
  void kernel_placed(int gpu, uint64_t event);
  // A collective's kernel, event `event`, placed on `gpu`, resident there from `resident`.
  void collective_placed(int gpu, uint64_t event, double resident);

 private:
  std::vector<uint64_t>* untimed(int gpu);

  simcore::Engine& engine_;
  timing::CollectiveOverlap overlap_;
  std::vector<std::vector<uint64_t>> untimed_;  // by GPU: kernels placed without a start asked
};

}  // namespace vgpu
