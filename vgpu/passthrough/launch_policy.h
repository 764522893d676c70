// Which kernel launches really run under the passthrough backend, and where each launch's
// virtual duration comes from (VGPU_LAUNCH_POLICY):
//
//   all    (default) every launch runs. Each launch signature is measured on the real GPU on
//          its first VGPU_MEASURE_SAMPLES launches (default 3; 2 when those agree within 5%,
//          more while they disagree); later launches take the smallest of those once a second agrees (without the first, which
//          includes the first launch's latency: signature_settling.h) and are not measured again. A signature the kernel-time database
//          (VGPU_KERNEL_DB) already holds for the physical GPU takes the recorded duration and
//          is not measured at all: record a job alone once, and its multi-process runs reuse
//          durations that no other process disturbed. The program computes exactly what it would on
//          a real GPU, and after the first iterations a step costs no timing work at all.
//   first  only the measured launches run; later launches of a signature are skipped and take
//          its settled duration. Much faster for large virtual clusters on one GPU, but the program's
//          numbers are wrong from then on (losses, data-dependent control flow, MoE routing,
//          NaN checks), so it is for timing studies of code whose control flow does not depend
//          on data.
//   none   nothing runs; every launch takes the duration recorded in the kernel-time database
//          (VGPU_KERNEL_DB, recorded on a GPU of the virtual model) or the fallback model.
//
// A launch's signature settles as front/launch/signature_settling.h says: by-value words that
// were seen to vary while the measured durations agreed (stack garbage, seeds) stop keying, so
// PyTorch's launches settle although their bytes never repeat.
//
// VGPU_LAUNCH_STATS=<file>: the file holds one line of KernelDurations::Counts,
// "signatures=N launches=N settled=N from_database=N measured=N" (fixed width, rewritten in
// place), so that a script can read how many launches were measured between two points of a run
// (tests/gpu/measured_per_step.py reads it after each step). It is rewritten after every launch
// that is measured or takes the database's duration, after settled launches (and launches that
// take another rank's duration for their work) at most once a millisecond (a write is a system
// call, and vgpu-run sets the variable for every passthrough job), and by every synchronization
// (cuCtx/cuStream/cuEventSynchronize) and at exit when launches went unwritten: what a script
// reads after synchronizing is exact. A "%p" in the path
// becomes the process id (one file per rank of a multi-process job).
//
// Under every policy NCCL's kernels run: ranks spin-wait on each other inside them, and the
// vgpu net plugin moves their bytes, so skipping one on one rank would hang the others.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <vector>

#include "front/launch/launch_signature.h"
#include "front/launch/signature_settling.h"
#include "passthrough/futex_lock.h"

namespace vgpu::pt {

enum class LaunchPolicy { all, first, none };

// From VGPU_LAUNCH_POLICY, read once; a value that is none of the above logs one line and
// means `all`.
LaunchPolicy launch_policy();
const char* policy_name(LaunchPolicy p);

// The measured duration of each launch signature in this process.
class KernelDurations {
 public:
  // The backend root's (passthrough.h), made on first use.
  static KernelDurations& get();
  // Samples wanted per signature (VGPU_MEASURE_SAMPLES, 1..1000, default 3).
  static int samples_wanted();

  // The signature's duration once it has all its samples, in seconds. `hash`: a hash of its
  // bytes (SharedDurations::key_of), under which the answer is remembered until anything changes
  // (SettlingSignatures::settled).
  std::optional<double> settled(const LaunchSignature& signature, uint64_t hash);
  // Whether the signature has been measured (or settled) in this process at all.
  bool seen(const LaunchSignature& signature);
  // Adds a measurement; returns the signature's duration when this sample settled it. `learn`
  // false: the sample may include host work (the function's first launch in its context), so it
  // teaches nothing about which bytes matter.
  // `least`: the duration the measured launch takes (SettlingSignatures::add_sample).
  std::optional<double> add_sample(const LaunchSignature& signature, double seconds, bool learn = true,
                                   double* least = nullptr);
  // The signature's duration is known already (the kernel-time database): no measuring.
  void settle(const LaunchSignature& signature, double seconds);
  // A launch that settled() did not answer takes a duration another process of the job settled
  // for its work (launch_api.cpp's work key) without settling its signature here: counted as
  // `from_database`, not as measured.
  void taken_from_job();
  // A launch that settled() did not answer is measured (VGPU_LAUNCH_STATS is written at once).
  void measuring();
  // What the kernel-time database keeps of settling (kernel_recording.h): the settled group
  // covering this launch, and every group with a duration (at exit).
  std::optional<SettledGroup> settled_group(const LaunchSignature& signature);
  std::vector<SettledGroup> export_groups();

  // What the launches with a signature did so far (launches that cannot be described are
  // measured every time and not counted): `launches` asked settled() (one per launch under
  // the policies all and first), `settled` found a duration there, `from_database` took it from
  // the kernel-time database or from another process of the job (shared_durations.h: for the
  // signature, or for its work) instead;
  // the rest were measured. `signatures`: distinct durations
  // kept (settling groups, signature_settling.h).
  struct Counts {
    unsigned long long signatures = 0, launches = 0, settled = 0, from_database = 0;
    unsigned long long measured() const { return launches - settled - from_database; }
  };
  Counts counts();
  // Writes the counts to VGPU_LAUNCH_STATS if launches went unwritten (a synchronization, exit).
  void publish_pending();

  KernelDurations();

 private:
  static constexpr double kPublishEvery = 1e-3;  // seconds between writes for settled launches
  void publish(bool now);  // under mu_: VGPU_LAUNCH_STATS, now or when kPublishEvery has passed
  Counts counts_locked() const;  // under mu_

  Counts counts_;
  std::atomic<unsigned long long> from_job_{0};  // taken_from_job()'s, beside counts_.from_database
  int stats_fd_ = -1;
  double published_at_ = -1;           // wall seconds of the last write
  std::atomic<bool> pending_{false};  // launches counted since
  FutexLock mu_;  // futex_lock.h: taken on every launch
  SettlingSignatures entries_{samples_wanted()};
};

}  // namespace vgpu::pt
