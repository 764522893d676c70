// One process's rank in the job's vgpud and the floor it moves there, for every user of the
// shared engine that is a rank process of a job (the sim backend's collectives,
// vgpu/sim/exec/nccl_shared_fabric.h; the NCCL net plugin's transfers, nccl_plugin/core/virtual_time.h).
// The rules are the same for both; what each may promise as its floor is its own (the comments
// beside each caller say why no later placement of theirs goes below it).
//
// - The rank: RANK as torchrun sets it, offset by the user's base (two users in one process
//   register apart); without RANK, the pid offset by the user's pid base: ids never collide.
// - A floor moves only once vgpud has had every process of the job (WORLD_SIZE) registered at
//   once, as each reply says: a process that registers late starts at the others' floor, and its
//   first flows could land below it. Without RANK and WORLD_SIZE no floor moves (vgpud keeps
//   everything, as it did before floors).
// - The floor sent is the caller's floor less kFloorLag, and goes out only once it moved
//   kFloorStep past the last one sent, with a request the caller makes anyway (no round trip of
//   its own); one request at a time carries a floor, in order.
// A process that exits (or dies) closes its connection, and vgpud unregisters its rank.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "simcore/remote_engine.h"

namespace simcore {

class JobRankFloor {
 public:
  enum class User { sim_collectives, nccl_plugin };
  explicit JobRankFloor(User user);  // reads RANK and WORLD_SIZE

  // Registers the rank in `engine` (once connected); false when the engine is lost.
  bool register_in(Engine& engine);
  // share_collectives with this rank, `own_floor - kFloorLag` as the floor where allowed (above;
  // own_floor < 0: no promise), and `release`: ids the caller will never name again.
  std::vector<SharedResult> share(Engine& engine, std::span<const SharedCollective> collectives, double own_floor,
                                  std::span<const EventId> release = {});
  // Whether a share() is due for the floor: it would move the floor to `own_floor - kFloorLag`
  // or, until every process was seen registered, ask how many are (as often as a floor would go:
  // a caller that makes no request of its own, as an NCCL rank that only sends, learns it so).
  bool floor_due(double own_floor) const;
  // WORLD_SIZE when RANK and WORLD_SIZE are both set: floors may move; 0: they never do.
  uint32_t expected() const { return expected_; }
  int rank() const { return rank_; }
  // Whether a floor went out yet.
  bool floor_sent() const { return floor_sent_.load(std::memory_order_acquire) >= 0; }

  static constexpr int kRankBase = 1 << 20;  // + RANK (< kRankBase), + kRankBase per user
  static constexpr int kPidBase = 1 << 29;   // + pid (mod kPidBase), + kPidBase per user, + 1 << 30
  static constexpr double kFloorLag = 1e-3;   // seconds below the caller's floor
  static constexpr double kFloorStep = 1e-3;  // seconds the floor must move before it is sent

 private:
  int rank_ = 0;
  uint32_t expected_ = 0;
  bool registered_ = false;
  std::mutex floor_mu_;                      // held across a request that carries a floor
  std::atomic<bool> everyone_seen_{false};   // vgpud once had every process of the job registered
  std::atomic<double> floor_sent_{-1};       // the last floor sent (-1: none)
  std::atomic<double> asked_{-1};            // the floor when the count was last asked
};

}  // namespace simcore
