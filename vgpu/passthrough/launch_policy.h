// Which kernel launches really run under the passthrough backend, and where each launch's
// virtual duration comes from (VGPU_LAUNCH_POLICY):
//
//   all    (default) every launch runs. Each launch signature is measured on the real GPU on
//          its first VGPU_MEASURE_SAMPLES launches (default 3); later launches take the median
//          of those (without the first, which includes the first launch's latency) and are not
//          measured again. A signature the kernel-time database
//          (VGPU_KERNEL_DB) already holds for the physical GPU takes the recorded duration and
//          is not measured at all: record a job alone once, and its multi-process runs reuse
//          durations that no other process disturbed. The program computes exactly what it would on
//          a real GPU, and after the first iterations a step costs no timing work at all.
//   first  only the measured launches run; later launches of a signature are skipped and take
//          its median. Much faster for large virtual clusters on one GPU, but the program's
//          numbers are wrong from then on (losses, data-dependent control flow, MoE routing,
//          NaN checks), so it is for timing studies of code whose control flow does not depend
//          on data.
//   none   nothing runs; every launch takes the duration recorded in the kernel-time database
//          (VGPU_KERNEL_DB, recorded on a GPU of the virtual model) or the fallback model.
//
// Under every policy NCCL's kernels run: ranks spin-wait on each other inside them, and the
// vgpu net plugin moves their bytes, so skipping one on one rank would hang the others.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace vgpu::pt {

enum class LaunchPolicy { all, first, none };

// From VGPU_LAUNCH_POLICY, read once; a value that is none of the above logs one line and
// means `all`.
LaunchPolicy launch_policy();
const char* policy_name(LaunchPolicy p);

// The measured duration of each launch signature in this process.
class KernelDurations {
 public:
  static KernelDurations& get();
  // Samples wanted per signature (VGPU_MEASURE_SAMPLES, 1..1000, default 3).
  static int samples_wanted();

  // The signature's duration once it has all its samples, in seconds.
  std::optional<double> settled(const std::string& signature);
  // Whether the signature has been measured (or settled) in this process at all.
  bool seen(const std::string& signature);
  // Adds a measurement; returns the signature's duration when this sample settled it.
  std::optional<double> add_sample(const std::string& signature, double seconds);
  // The signature's duration is known already (the kernel-time database): no measuring.
  void settle(const std::string& signature, double seconds);

 private:
  struct Entry {
    std::vector<double> samples;
    double median = -1;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace vgpu::pt
