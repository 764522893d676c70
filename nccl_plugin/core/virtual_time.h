// Virtual time for the plugin: which simcore Engine judges the transfers (in-process, or the
// job's vgpud), which global GPU a rank is, its virtual clock, and the record of completions
// that vtime_api.h exposes. The bytes move whatever happens here: without an engine the
// transfers simply carry no virtual time.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "simcore/cluster_spec.h"
#include "simcore/engine.h"
#include "vtime_api.h"

namespace vgpu::nccl {

// The one place that decides where simcore runs: VGPU_SIMCORE=daemon -> the job's vgpud
// (ranks as processes), anything else -> an engine inside this process. nullptr with *error set
// when the daemon cannot be reached.
std::unique_ptr<simcore::Engine> open_engine(const simcore::ClusterSpec& cluster, int rank,
                                             std::string* error);

// Process-wide settings behind vtime_api.h.
void set_clock_hook(vgpu_nccl_clock_fn fn);
void set_thread_gpu(int gpu);

class VirtualTime {
 public:
  explicit VirtualTime(const simcore::ClusterSpec& cluster) : cluster_(cluster) {}

  // The calling thread's rank GPU; -1 with *error saying what to change when it is not in the
  // cluster.
  int rank_gpu(std::string* error) const;
  static double now(int gpu);           // the installed clock, else 0
  bool shared_engine() const;           // one engine for every process of the job (daemon)

  // Reports a transfer; 0 when virtual time is off.
  uint64_t add_flow(int src_gpu, int dst_gpu, uint64_t bytes, double not_before);
  bool query(uint64_t flow, double* start, double* finish);

  void record(vgpu_nccl_completion c);  // assigns seq; updates the per-GPU latest
  bool latest(int gpu, double* finish);
  int completions(uint64_t after_seq, vgpu_nccl_completion* out, int max);
  static bool last_on_thread(vgpu_nccl_completion* out);

 private:
  simcore::Engine* engine();

  const simcore::ClusterSpec& cluster_;
  std::mutex engine_mu_;
  bool engine_tried_ = false;
  std::unique_ptr<simcore::Engine> engine_;
  bool daemon_ = false;

  std::mutex log_mu_;
  uint64_t next_seq_ = 1;
  std::deque<vgpu_nccl_completion> log_;
  std::map<int, double> latest_;
};

}  // namespace vgpu::nccl
