// How busy a device was over the last stretch of virtual time: the fraction of the window
// [now - width, now] covered by the union of its work intervals, as NVML's utilization is "the
// percent of time over the past sample period during which one or more kernels was executing".
// Overlapping work (kernels of several streams at once) counts once.
//
// Intervals may arrive in any order (several streams, a simulator that places work late); the
// window keeps the disjoint union of what lies inside it, and drops what ended before it.
// Memory stays bounded: past kMaxPieces the oldest pieces are summarized into kBins time bins
// (their covered length per bin, exact, since pieces are disjoint). Only work arriving late into
// a summarized stretch can then count twice (each bin is capped at its width). Not thread-safe:
// its owner locks.
#pragma once

#include <cstddef>
#include <map>

namespace vgpu::status {

class ActivityWindow {
 public:
  static constexpr size_t kMaxPieces = 4096;
  static constexpr int kBins = 256;

  explicit ActivityWindow(double width_s) : width_(width_s) {}

  // Adds [start, finish] (seconds of virtual time); an empty or inverted interval is ignored.
  void add(double start, double finish);
  // The covered fraction of [now - width, now] (clipped at 0: a job younger than the window is
  // measured over its own life), 0..1. Drops what ended before the window. Amortized O(1):
  // the covered length is kept as pieces come and go.
  double utilization(double now);
  // The latest finish seen (the window's natural "now").
  double latest() const { return latest_; }
  size_t pieces() const { return pieces_.size(); }

 private:
  void prune(double begin);
  void summarize_oldest();
  double bin_width() const { return width_ / kBins; }
  double width_;
  double latest_ = 0;
  double covered_ = 0;               // total length of pieces_
  std::map<double, double> pieces_;  // start -> finish, disjoint, sorted
  std::map<long long, double> bins_; // bin index (start / bin_width) -> covered length in it
};

}  // namespace vgpu::status
