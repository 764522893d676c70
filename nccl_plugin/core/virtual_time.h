// Virtual time for the plugin: which simcore Engine judges the transfers (in-process, or the
// job's vgpud), which global GPU a rank is, its virtual clock, and the record of completions
// that the plugin's side of the driver contract exposes (contracts/nccl_plugin.h). The bytes move whatever happens here: without an engine the
// transfers simply carry no virtual time.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "simcore/cluster_spec.h"
#include "simcore/engine.h"
#include "contracts/nccl_plugin.h"

namespace vgpu::nccl {

// Where simcore runs, decided once from VGPU_SIMCORE: "daemon" -> the job's vgpud (ranks as
// processes; every call is a socket round trip), "off" -> nowhere (the bytes move without
// virtual time, e.g. to measure the data path alone), anything else -> inside this process.
enum class EngineMode { local, daemon, off };
EngineMode engine_mode_from_env();

// Opens the engine of `mode`; nullptr with *error set when the daemon cannot be reached or the
// engine is off.
std::unique_ptr<simcore::Engine> open_engine(EngineMode mode, const simcore::ClusterSpec& cluster,
                                             int rank, std::string* error);

// The calling thread's rank GPU for comms it creates from now on (the contract's
// set_thread_gpu); -1 clears.
void set_thread_gpu(int gpu);

class VirtualTime {
 public:
  explicit VirtualTime(const simcore::ClusterSpec& cluster);

  // The calling thread's rank GPU; -1 with *error saying what to change when it is not in the
  // cluster.
  int rank_gpu(std::string* error) const;
  // The GPU's virtual "now", the earliest start of a transfer it takes part in: the installed
  // clock; without one, the latest virtual finish among the GPU's requests completed in this
  // process (a rank cannot issue work that waits on a transfer before that transfer ended), so
  // that virtual time advances instead of piling every transfer up at 0. With a launch tag and
  // the driver's launch clock, the virtual start of that very kernel launch when the driver knows
  // it.
  double now(int gpu, uint64_t launch = 0) const;
  EngineMode mode() const { return mode_; }
  bool shared_engine() const { return mode_ == EngineMode::daemon; }  // one for every process
  // Queries are calls into this process (no round trip): worth repeating for a fresher answer.
  bool cheap_queries() const { return mode_ == EngineMode::local; }

  // Reports a transfer that starts no earlier than `not_before` and than the flows `after_a`
  // and `after_b` finished (0: none); returns its flow, 0 when virtual time is off.
  uint64_t add_flow(int src_gpu, int dst_gpu, uint64_t bytes, double not_before,
                    uint64_t after_a = 0, uint64_t after_b = 0);
  bool query(uint64_t flow, double* start, double* finish);
  // Whether the shared engine (vgpud) was lost: it exited, was stopped or dropped the
  // connection. The job's virtual time can then no longer be kept, so transfers fail from then
  // on (README: Reliability) after one line saying why.
  bool lost() const { return lost_.load(std::memory_order_acquire); }

  void record(vgpu_nccl_completion c);  // assigns seq; updates the per-GPU and per-launch latest
  bool latest(int gpu, double* finish);
  // The contract's launch_transfers / forget_launch.
  bool launch_transfers(uint64_t launch, double* finish, uint64_t* count);
  // The contract's launch_window: also when the launch's peers had all begun (its receives' ready).
  bool launch_window(uint64_t launch, double* ready, double* last_finish, uint64_t* count);
  void forget_launch(uint64_t launch);
  // The latest `ready` of the launch's receives completed so far; < 0: none.
  double launch_ready(uint64_t launch);
  // Launch records kept at most (the driver forgets each once its kernel is timed; sends that
  // complete after that make new records, which age out).
  static constexpr size_t kLaunchRecords = 16384;
  int completions(uint64_t after_seq, vgpu_nccl_completion* out, int max);
  static bool last_on_thread(vgpu_nccl_completion* out);

 private:
  simcore::Engine* engine();
  void check_lost(const simcore::Engine& e);
  std::atomic<bool> lost_{false};

  const simcore::ClusterSpec& cluster_;
  const EngineMode mode_;
  std::mutex engine_mu_;  // guards the first open only
  bool engine_tried_ = false;
  std::unique_ptr<simcore::Engine> engine_;
  std::atomic<simcore::Engine*> engine_ptr_{nullptr};  // set once opened: the lock-free path

  std::mutex log_mu_;
  uint64_t next_seq_ = 1;
  std::deque<vgpu_nccl_completion> log_;
  // Per launch tag (under log_mu_): the latest finish, how many completed, and the flows of the
  // latest few (asked again at launch_transfers: simcore may still move them).
  struct LaunchRecord {
    double ready = -1;  // the latest `ready` of its receives; < 0: none known yet
    double finish = -1;
    uint64_t count = 0;
    std::deque<uint64_t> flows;
  };
  static constexpr size_t kRequeryFlows = 16;
  std::unordered_map<uint64_t, LaunchRecord> launches_;
  std::deque<uint64_t> launch_order_;  // insertion order, for the bound
  // Per global GPU: the latest finish of a completed request, -1 while none (read lock-free on
  // every isend/irecv).
  std::unique_ptr<std::atomic<double>[]> latest_;
  int gpus_ = 0;
};

}  // namespace vgpu::nccl
