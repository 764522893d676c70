// A rank process's rank and floor in the job's vgpud (simcore/job_rank_floor.h says the rules).
#include "simcore/job_rank_floor.h"

#include <unistd.h>

#include <cstdlib>
#include <optional>

namespace simcore {

JobRankFloor::JobRankFloor(User user) {
  const int k = user == User::sim_collectives ? 0 : 1;
  const char* job_rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  char* end = nullptr;
  const long r = job_rank != nullptr ? std::strtol(job_rank, &end, 10) : -1;
  const bool by_rank = job_rank != nullptr && end != job_rank && *end == '\0' && r >= 0 && r < kRankBase;
  rank_ = by_rank ? kRankBase * (1 + k) + static_cast<int>(r)
                  : (1 << 30) + kPidBase * k + static_cast<int>(::getpid() % kPidBase);
  const long w = world != nullptr ? std::strtol(world, nullptr, 10) : 0;
  expected_ = by_rank && w > 0 && w < kRankBase ? static_cast<uint32_t>(w) : 0;
}

bool JobRankFloor::register_in(Engine& engine) {
  engine.register_rank(rank_);
  registered_ = engine.lost().empty();
  return registered_;
}

bool JobRankFloor::floor_due(double own_floor) const {
  const double promise = own_floor - kFloorLag;
  if (!registered_ || expected_ == 0 || !(own_floor >= 0) || !(promise > 0)) return false;
  // Until vgpud was seen with every process registered, a request only asks (its reply says how
  // many are), as often as a floor would go out.
  const double last = (everyone_seen_.load(std::memory_order_acquire) ? floor_sent_ : asked_).load(std::memory_order_acquire);
  return promise >= last + kFloorStep;
}

std::vector<SharedResult> JobRankFloor::share(Engine& engine, std::span<const SharedCollective> collectives,
                                              double own_floor, std::span<const EventId> release) {
  // One thread's request at a time carries a floor (floors go out in order); the lock is held
  // across the reply, which vgpud may hold until other processes' ranks came, so another thread
  // meanwhile sends its request without a floor rather than wait behind it.
  std::unique_lock l(floor_mu_, std::try_to_lock);
  std::optional<double> floor;
  const bool seen = everyone_seen_.load(std::memory_order_acquire);
  if (l.owns_lock() && seen && floor_due(own_floor)) floor = own_floor - kFloorLag;
  uint32_t registered = 0;
  std::vector<SharedResult> out = share_collectives(engine, collectives, rank_, floor, &registered, release);
  if (!l.owns_lock() || !engine.lost().empty()) return out;
  if (floor) floor_sent_.store(*floor, std::memory_order_release);
  if (!seen && own_floor >= 0) asked_.store(own_floor - kFloorLag, std::memory_order_release);
  if (expected_ > 0 && registered >= expected_) everyone_seen_.store(true, std::memory_order_release);
  return out;
}

}  // namespace simcore
