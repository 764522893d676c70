// The launch signatures a sim-backend job asked the kernel-time database for and did not find,
// with the duration the fallback model gave them: what `vgpu-run --kernel-db DB` lists at the
// end, so a user sees which kernels of the simulated job are estimated rather than measured.
//
// VGPU_KERNEL_DB_MISSES=FILE: at exit the process appends one line per missing signature to
// FILE (tab-separated: launches, seconds given each, kernel name, grid, block, signature hex).
// Several processes of one job append to the same file. Unset: nothing is kept.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "front/launch/launch_signature.h"

namespace vgpu {

class KernelDbMisses {
 public:
  // From the environment; disabled when VGPU_KERNEL_DB_MISSES is unset (note() is then free).
  KernelDbMisses();
  bool enabled() const { return !path_.empty(); }

  void note(const LaunchSignature& signature, double seconds);
  // Appends the lines to the file (once; later calls do nothing). False on a write error.
  bool write();

  static constexpr size_t kMaxSignatures = 100000;  // beyond: counted, not listed

 private:
  struct Miss {
    uint64_t launches = 0;
    double seconds = 0;
  };
  std::string path_;
  std::mutex mu_;
  std::unordered_map<std::string, Miss> misses_;  // by signature bytes
  uint64_t dropped_ = 0;
  bool written_ = false;
};

}  // namespace vgpu
