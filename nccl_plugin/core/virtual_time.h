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
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "contracts/nccl_plugin.h"
#include "flow_pins.h"
#include "simcore/cluster_spec.h"
#include "simcore/engine.h"
#include "simcore/job_rank_floor.h"

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

  // --- Bounded memory in the job's vgpud (daemon mode; every call a no-op otherwise) ---------
  // This process registers one rank in vgpud (simcore/job_rank_floor.h: RANK, WORLD_SIZE) when it
  // connects: at its first flow placed or transfer completed (not at a receive merely posted: on
  // the sim backend, whose own collectives register the process's rank, the plugin's receives
  // never complete, and a rank of its own would count twice and hold vgpud's floor), releases the ids of the flows it placed once no later
  // flow can name them (flow_pins.h; pin/unpin), and moves its floor there (settle(), after each
  // completed transfer, with the ids: one request when either is due). Every process moves one,
  // one that only sends too (vgpud's floor is the least of the registered ranks'). Why no later
  // flow of this process starts below the floor it sends (own_floor()):
  // - Only the receiving end places a flow, at not_before = max(the sender's clock, the
  //   receive's): at or above the receive's not_before, taken when it was posted (now()) and
  //   only raised at its match.
  // - A receive holds the floor from before it takes now() until its last flow was placed
  //   (hold/unhold) at the rule's bound for its GPU then (below), which its now() is at or above.
  //   own_floor() reads the rule before the holds: a hold it misses was made after that read, so
  //   its receive's now() came later still and is at or above the bound own_floor() read.
  // - A receive posted later takes now() of its GPU then, which is at or above what this
  //   process's rule for that GPU gives now, for each GPU it sent or received on (use_gpu, hold): with the
  //   driver's gpu_floor, the driver's promise for both of its clocks (contracts/nccl_plugin.h;
  //   the passthrough: a device's horizon and the start of every NCCL kernel not yet timed);
  //   without any driver clock, the GPU's latest completion (now()'s own rule: it only grows).
  //   With the driver's clocks but no gpu_floor, nothing is promised. A GPU first used after a
  //   floor was sent, or a rule that changes (a driver installed late), stops the floors for
  //   good (one line): its receives may lie below.
  // - The floor sent is that less JobRankFloor::kFloorLag, and only once every process of the
  //   job registered; other processes' placements are theirs to keep above their own floors.
  void use_gpu(int gpu);  // a send's GPU (a receive's: hold())
  bool hold(int gpu, double* held_at);  // false: not held (no daemon)
  void unhold(double held_at);
  void pin(uint64_t flow) {
    if (pinning_) pins_.pin(flow);
  }
  void unpin(uint64_t flow) {
    if (pinning_) pins_.unpin(flow);
  }
  void settle();
  // The floor this process may promise now (above); < 0: none.
  double own_floor();
  // Ids released per request once that many wait (the floor, when due, takes what waits).
  static constexpr size_t kReleaseBatch = 256;

 private:
  simcore::Engine* engine();
  void check_lost(const simcore::Engine& e);
  std::atomic<bool> lost_{false};

  const simcore::ClusterSpec& cluster_;
  const EngineMode mode_;
  std::mutex engine_mu_;  // guards the first open only
  std::atomic<bool> engine_tried_{false};  // set under engine_mu_; read alone by settle()
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

  // Daemon mode: the ids this process placed and who still names them; its rank and floor.
  const bool pinning_;
  FlowPins pins_;
  simcore::JobRankFloor rank_floor_{simcore::JobRankFloor::User::nccl_plugin};
  std::mutex holds_mu_;
  std::multiset<double> holds_;     // not_before of receives posted, not all placed
  std::vector<int> gpus_used_;      // GPUs this process sent or received on
  void note_gpu(int gpu);           // under holds_mu_
  enum class FloorRule { none, driver, completions };
  FloorRule floor_rule() const;
  double rule_bound(FloorRule rule, int gpu) const;  // < 0: no promise
  FloorRule rule_ = FloorRule::none;  // the rule of the floors sent so far
  bool floor_stopped_ = false;
};

}  // namespace vgpu::nccl
