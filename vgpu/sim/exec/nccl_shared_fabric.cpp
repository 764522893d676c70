// The job's shared engine for collectives of rank processes (nccl_shared_fabric.h says why).
#include "sim/exec/nccl_shared_fabric.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "common/log.h"
#include "common/settings.h"
#include "simcore/engine.h"

namespace vgpu {

NcclSharedFabric::NcclSharedFabric() : wanted_(settings::text(settings::Id::simcore) == "daemon") {}
NcclSharedFabric::~NcclSharedFabric() = default;

simcore::Engine* NcclSharedFabric::engine() {
  if (simcore::Engine* e = ready_.load(std::memory_order_acquire)) return e;
  if (gave_up_.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard l(mu_);
  if (tried_) return ready_.load(std::memory_order_acquire);
  tried_ = true;
  gave_up_.store(true, std::memory_order_release);  // until connected below
  const std::string mode = settings::text(settings::Id::simcore);
  if (mode != "daemon") {
    log::info("sim nccl: VGPU_SIMCORE={}: collectives of rank processes share links only with their own "
              "process's transfers", mode);
    return nullptr;
  }
  std::string error;
  engine_ = simcore::connect_engine(simcore::RemoteOptions{}, &error);
  if (engine_ == nullptr) {
    log::info("sim nccl: no vgpud ({}): collectives of rank processes share links only with their own "
              "process's transfers", error);
    return nullptr;
  }
  // One rank of this process in vgpud (nccl_shared_fabric.h): its floor lets vgpud reclaim.
  const char* job_rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  char* end = nullptr;
  const long r = job_rank != nullptr ? std::strtol(job_rank, &end, 10) : -1;
  const bool by_rank = job_rank != nullptr && end != job_rank && *end == '\0' && r >= 0 && r < kPidBase - kRankBase;
  rank_ = by_rank ? kRankBase + static_cast<int>(r) : kPidBase + static_cast<int>(::getpid() % kPidBase);
  const long w = world != nullptr ? std::strtol(world, nullptr, 10) : 0;
  expected_ = by_rank && w > 0 && w < kPidBase ? static_cast<uint32_t>(w) : 0;
  engine_->register_rank(rank_);
  registered_ = engine_->lost().empty();
  if (expected_ == 0)
    log::info("sim nccl: no RANK and WORLD_SIZE: the job's vgpud keeps every collective's transfers (its memory grows "
              "with the job)");
  ready_.store(engine_.get(), std::memory_order_release);
  gave_up_.store(false, std::memory_order_release);
  return engine_.get();
}

bool NcclSharedFabric::alive() {
  simcore::Engine* e = ready_.load(std::memory_order_acquire);
  if (e == nullptr) return false;
  const std::string why = e->lost();
  if (why.empty()) return true;
  // The engine object stays (another thread may be in a call on it; its calls return at once).
  gave_up_.store(true, std::memory_order_release);
  if (ready_.exchange(nullptr, std::memory_order_acq_rel) != nullptr)
    log::warn("sim nccl: the job's vgpud was lost ({}): collectives go on with their own process's placement "
              "of their transfers", why);
  return false;
}

std::vector<simcore::SharedResult> NcclSharedFabric::share(std::span<const simcore::SharedCollective> collectives,
                                                           double own_floor) {
  simcore::Engine* e = ready_.load(std::memory_order_acquire);
  if (e == nullptr || collectives.empty()) return std::vector<simcore::SharedResult>(collectives.size());
  // One thread's request at a time carries a floor (floors go out in order); the lock is held
  // across the reply, which vgpud holds until the other processes' ranks came, so another
  // thread meanwhile sends its flows without a floor rather than wait behind it (its own
  // collectives may be what a third process's ranks need first).
  std::unique_lock l(floor_mu_, std::try_to_lock);
  // The promise (nccl_shared_fabric.h): below every flow this process places from now on, and
  // only once every process of the job is registered in vgpud.
  std::optional<double> floor;
  const double promise = own_floor - kFloorLag;
  if (l.owns_lock() && registered_ && everyone_seen_ && promise > 0 && promise >= floor_sent_ + kFloorStep)
    floor = promise;
  uint32_t registered = 0;
  std::vector<simcore::SharedResult> out = simcore::share_collectives(*e, collectives, rank_, floor, &registered);
  answer_calls_.fetch_add(1, std::memory_order_relaxed);
  if (!alive()) return std::vector<simcore::SharedResult>(collectives.size());
  if (!l.owns_lock()) return out;
  if (floor) floor_sent_ = *floor;
  if (expected_ > 0 && registered >= expected_) everyone_seen_ = true;
  return out;
}

}  // namespace vgpu
