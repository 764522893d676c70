// Kernels beside a collective's kernel on the same GPU (issue 18): one rule for the backends.
//
// NCCL's kernels hold SMs (a block per channel: 24 of an H200's 132 between two NVLink GPUs) for
// as long as they are resident, waiting for their peers included, and memory bandwidth while they
// move data; the kernels beside them on the same GPU slow down. Measured in real DDP steps of
// GPT-2 small on 2 x H200 (2026-11-28, torch.profiler on both ranks, each launch matched to the
// same launch of the one-GPU step; docs/results.md, twenty-second session): kernels that
// overlapped an all-reduce kernel while it moved data progressed at 0.49-0.54 of their rate alone
// (858 / 929 / 731 / 662 us more over 1,700 / 1,951 / 1,570 / 1,424 us of overlap), and at about
// 0.75 while it waited for a late peer (two ranks whose all-reduce kernels waited 11.7 and 17.2 ms
// a step: 3.2 and 3.7 ms more over 10.2 and 13.1 ms of overlap with the waiting part, i.e. 0.76 with
// 0.5 taken for the moving part; a least-squares fit over every launch of the six ranks gives 0.52
// moving and 0.68 waiting: tests/gpu/fidelity/collective_overlap_fit.py); kernels that overlapped none
// took what they took alone (within 0.2%). Every duration vgpu measures or looks up is the
// kernel's alone, so the slowdown is applied where kernels are placed in virtual time:
//
//   - while a collective's kernel is resident on a GPU, every other kernel there progresses at
//     `moving` of its own rate from when the collective's transfers began (all of its ranks had
//     arrived) to its end (VGPU_COMPUTE_BESIDE_COLLECTIVE, 0.5), at `waiting` before that
//     (VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE, 0.75);
//   - ops are placed in submission order, not in time order, so whichever of the two is placed
//     second accounts for their overlap: a kernel placed after a collective's window is known
//     ends where its work at those rates takes it (kernel_finish); a window placed after kernels
//     that ran inside it leaves the work they could not have done there, (1 - rate) x their busy
//     time inside it, as a debt that the device's next kernel carries (a DDP step's all-reduce
//     resolves when its peers arrive, after the host launched more of the backward pass: the step
//     ends later by the debt, as the real one does).
//
// Approximations, kept because they are small where it matters: a collective's own slowdown
// beside the kernels is not modelled (its duration is the collective model's from the moment its
// ranks arrived: the real all-reduce kernels of that step moved for 140-210 us against ~110
// alone, hidden but for the last); windows that ended more than kKeepBehindS before a kernel's
// start are forgotten (kernels of one GPU are placed close to time order); where windows overlap
// each other a kernel takes them one after the other; kernels running side by side on two streams
// both pay for the same window.
//
// Not thread-safe: its owner's lock covers it (the passthrough's timeline; on the sim backend the
// streams' lock: sim/exec/compute_beside_collectives.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace vgpu::timing {

class CollectiveOverlap {
 public:
  static constexpr double kDefaultMoving = 0.5;
  static constexpr double kDefaultWaiting = 0.75;
  static constexpr double kKeepBehindS = 1e-3;     // windows kept this long behind a kernel's start
  static constexpr size_t kKernelsKept = 512;      // kernel intervals kept per device (debts)
  static constexpr size_t kWindowsKept = 128;      // parts of windows, at most, per device
  static constexpr int kMaxDevices = 4096;

  // The rates in [0, 1] of the other kernels while a collective's kernel moves data and while it
  // waits for its peers (1 and 1: no slowdown, the rule off; below 0.01 taken as 0.01).
  explicit CollectiveOverlap(double moving = kDefaultMoving, double waiting = kDefaultWaiting);

  bool enabled() const { return moving_ < 1.0 || waiting_ < 1.0; }

  // A kernel (not a collective's) of `seconds` alone, starting at `start` on `device`: where it
  // finishes beside the collective windows known there, with the device's debt added to its work
  // (the debt is then paid). Records its interval for windows placed later. `carried` (optional):
  // the debt it took, seconds of work at full rate (what earlier kernels lost beside a collective,
  // which a timeline shows apart: the kernel's own duration is not what stretched it).
  double kernel_finish(int device, double start, double seconds, double* carried = nullptr);
  // A collective's kernel resident on `device` over [start, finish], waiting for its peers until
  // `moving_from` (clamped into the window; `start`: it moved data throughout).
  void collective(int device, double start, double moving_from, double finish);

  // Whether a kernel starting at `start` or later on `device` is sure to be unaffected: no debt,
  // and every window known there ends by `start` (the sim backend then needs no start time).
  bool quiet_after(int device, double start) const;
  // A kernel placed without kernel_finish (quiet then) that ran over [start, finish]: remembered,
  // unstretched, for the windows placed later.
  void kernel_ran(int device, double start, double finish);

  // The work (seconds at full rate) the device's next kernel carries (tests).
  double debt(int device) const;

 private:
  struct Interval {
    double start, finish;
  };
  struct Window {
    double start, finish, rate;  // the other kernels' rate inside it
  };
  struct Device {
    std::deque<Window> windows;       // the parts of collectives' windows, by start
    std::vector<Interval> kernels;    // a ring of the last kKernelsKept kernels' intervals
    size_t next_kernel = 0;
    double debt = 0;
    double latest_finish = -1;  // of every window ever placed (quiet_after: no scan per launch)
  };
  Device* device(int d);
  static void remember(Device& dev, Interval kernel);  // into the ring of kernels
  // One part of a window at `rate`: the debt of the kernels inside it, then kept.
  void part(Device& dev, double start, double finish, double rate);

  double moving_, waiting_;
  std::vector<Device> devices_;
};

}  // namespace vgpu::timing
