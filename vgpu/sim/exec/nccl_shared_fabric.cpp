// The job's shared engine for collectives of rank processes (nccl_shared_fabric.h says why).
#include "sim/exec/nccl_shared_fabric.h"

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
  floor_.register_in(*engine_);
  if (floor_.expected() == 0)
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
  std::vector<simcore::SharedResult> out = floor_.share(*e, collectives, own_floor);
  answer_calls_.fetch_add(1, std::memory_order_relaxed);
  if (!alive()) return std::vector<simcore::SharedResult>(collectives.size());
  return out;
}

}  // namespace vgpu
