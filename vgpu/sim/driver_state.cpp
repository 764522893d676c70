// The sim backend's root object, assembled: every folder's manager made and wired together
// (the only file of the backend that includes them all; the folders include only those below).
#include "sim/core/driver_state.h"

#include <cstdlib>
#include <mutex>
#include <new>

#include "common/log.h"
#include "common/settings.h"
#include "common/visible_devices.h"
#include "front/driver/init_from_config.h"
#include "sim/core/context.h"
#include "sim/core/thread_state.h"
#include "sim/core/virtual_clock.h"
#include "sim/darkapi/context_local_storage.h"
#include "sim/exec/graph.h"
#include "sim/exec/module_registry.h"
#include "sim/exec/stream.h"
#include "sim/memory/memory.h"
#include "sim/memory_report.h"
#include "status/status_region.h"
#include "simcore/cluster_config.h"
#include "simcore/engine.h"

namespace vgpu {
namespace {
std::once_flag g_init_once;
CUresult g_init_result = CUDA_ERROR_NOT_INITIALIZED;
DriverState* g_state = nullptr;  // set once under g_init_once, then only read

// The GPUs this process sees, as the real driver numbers them (common/visible_devices.h).
std::vector<int> visible_gpus(const simcore::ClusterSpec& cluster) {
  std::vector<std::string> uuids;
  for (int i = 0; i < cluster.total_gpus(); ++i) uuids.push_back(uuid_string(Device(cluster, i, nullptr).uuid()));
  if (auto v = visible_devices_from_env(uuids, "sim")) return std::move(v->gpus);
  std::vector<int> all;
  for (int i = 0; i < cluster.total_gpus(); ++i) all.push_back(i);
  return all;
}

}  // namespace

DriverState::DriverState(simcore::ClusterSpec cluster, std::vector<int> visible)
    : cluster_(std::move(cluster)), visible_(std::move(visible)) {
  status_ = status::Writer::attach(status::current_job_id(), "sim", status_devices(cluster_));
  if (status_)
    std::atexit([] {
      if (!g_state || !g_state->status_) return;
      if (g_state->streams_) g_state->streams_->flush_activity();  // the last batch of work
      g_state->status_->detach();
    });
  for (int i = 0; i < cluster_.total_gpus(); ++i)
    devices_.push_back(std::make_unique<Device>(cluster_, i, status_.get()));
  // The engine keeps every event for the timeline only when one is asked for: otherwise a long
  // run's memory stays bounded (reclaimed events keep just their final interval).
  simcore::EngineOptions options;
  options.record_timeline = vclock::timeline_path() != nullptr;
  engine_ = simcore::make_engine(cluster_, options);
  ranks_ = std::make_unique<ThreadRanks>(*engine_);
  contexts_ = std::make_unique<ContextManager>(*this, [this](CUcontext ctx) {
    // The runtime's context-local storage first: its destructors may still use the streams.
    darkapi::context_local_storage_context_destroyed(ctx);
    streams_->context_destroyed(ctx);
    modules_->context_destroyed(ctx);
    memory_->context_destroyed(ctx);
  });
  memory_ = std::make_unique<MemoryManager>(*this);
  streams_ = std::make_unique<StreamManager>(*this);
  modules_ = std::make_unique<ModuleManager>(*this);
  graphs_ = std::make_unique<GraphManager>(*this);
  arm_memory_report();
}

CUresult DriverState::initialize(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::call_once(g_init_once, [] {
    g_init_result = init_from_cluster_config([](simcore::ClusterSpec cluster) {
      std::vector<int> visible = visible_gpus(cluster);
      // As the real driver: CUDA_VISIBLE_DEVICES leaving no GPU fails cuInit.
      if (visible.empty()) return CUDA_ERROR_NO_DEVICE;
      g_state = new DriverState(std::move(cluster), std::move(visible));
      log::info("initialized: {} virtual GPUs ({} x {} {}), from {}", g_state->device_count(),
                g_state->cluster_.nodes, g_state->cluster_.gpus_per_node, g_state->cluster_.model.id,
                g_state->cluster_.source);
      return CUDA_SUCCESS;
    });
  });
  return g_init_result;
}

DriverState* DriverState::get() { return g_state; }

StreamQueue& DriverState::stream_queue() const { return *streams_; }

}  // namespace vgpu
