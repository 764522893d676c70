// The launch signatures a sim-backend job asked the kernel-time database for and did not find,
// with the duration the fallback model gave them: what `vgpu-run --kernel-db DB` lists at the
// end, so a user sees which kernels of the simulated job are estimated rather than measured.
//
// VGPU_KERNEL_DB_MISSES=FILE: at exit the process appends one line per missing signature to
// FILE (tab-separated: launches, seconds given each, kernel name, grid, block, signature hex,
// cause). Launches are listed by their signature with the by-value words that their family's
// recorded groups do not key zeroed (KernelTimeDb::explain_miss), so launches that differ only
// in stack garbage make one line. The cause says how far the database got:
//   new-kernel    no launch of this function with this grid, block, shared memory and
//                 parameter layout was recorded;
//   keyed-words   some were, none with these keyed words (a size, a flag: another problem);
//   ranges        some with these keyed words, but a word the recording found not to matter
//                 lies outside the values it measured (signature_settling.h: a size measured
//                 only below 2^24 is not extrapolated).
// After keyed-words and ranges, the cause column names (after a space) the words in which the
// first launch of the line differed from the nearest recorded group (w<index>=<here>/<recorded>,
// or w<index>=<here> outside <lo>..<hi>): what the replay's launches differ in.
// Launches the database answered are not listed, but counted by the level that answered them
// (KernelDbLevel): each process appends one more line,
//   #answered <TAB> exact=N <TAB> group=N <TAB> work-key=N <TAB> family=N <TAB> fallback=N
// (fallback: the listed launches, timed by the model), then <TAB> collective=N where the process
// launched NCCL kernels (timed by the collective model, not listed), which vgpu-run sums over the job's
// processes (vgpu/tools/vgpu_run/kernel_db.py; readers of the 7-column lines skip it).
// Several processes of one job append to the same file. Unset: nothing is kept.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "front/launch/kernel_time_db.h"
#include "front/launch/launch_signature.h"
#include "front/launch/signature_settling.h"

namespace vgpu {

class KernelDbMisses {
 public:
  // From the environment; disabled when VGPU_KERNEL_DB_MISSES is unset (note() is then free).
  KernelDbMisses();
  bool enabled() const { return !path_.empty(); }

  // `signature`: the keyed form (see above); `cause`: cause_name() of why it was missed.
  void note(const LaunchSignature& signature, double seconds, std::string_view cause = "new-kernel",
            std::string_view detail = {});
  static const char* cause_name(SettlingSignatures::Uncovered why);
  // One launch answered by `level` (KernelDbLevel::none: the fallback model; note() lists it).
  void count(KernelDbLevel level) {
    if (enabled()) answered_[static_cast<size_t>(level)].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t counted(KernelDbLevel level) const {
    return answered_[static_cast<size_t>(level)].load(std::memory_order_relaxed);
  }
  // One launch of an NCCL kernel: the collective model times it (sim/exec/nccl_collectives.h),
  // whatever the database holds, so it is neither listed nor counted at a level; the "#answered"
  // line adds collective=N when there were any.
  void count_collective() {
    if (enabled()) collective_.fetch_add(1, std::memory_order_relaxed);
  }
  // Appends the lines to the file (once; later calls do nothing). False on a write error.
  bool write();

  static constexpr size_t kMaxSignatures = 100000;  // beyond: counted, not listed

 private:
  struct Miss {
    uint64_t launches = 0;
    double seconds = 0;
    std::string cause;
  };
  std::string path_;
  std::mutex mu_;
  std::unordered_map<std::string, Miss> misses_;  // by signature bytes
  uint64_t dropped_ = 0;
  std::array<std::atomic<uint64_t>, 5> answered_{};  // by KernelDbLevel
  std::atomic<uint64_t> collective_{0};
  bool written_ = false;
};

}  // namespace vgpu
