// The process-wide state of the driver, created by cuInit and never destroyed (driver calls
// may come from other libraries' static destructors, after ours would have run).
//
// It owns one manager per concern; each manager lives in its own file and owns its objects
// and their handle table. Entry points reach them through DriverState::get():
//
//   auto* d = DriverState::get();            // nullptr before a successful cuInit
//   if (!d) return CUDA_ERROR_NOT_INITIALIZED;
//   d->memory().allocate(...);
#pragma once

#include <memory>
#include <vector>

#include "front/device/device.h"
#include "front/driver/cuda_api.h"
#include "simcore/cluster_spec.h"

namespace simcore { class Engine; }
namespace vgpu::status { class Writer; }

namespace vgpu {

class ContextManager;   // sim/core/context.h      contexts, primary contexts, per-thread current
class MemoryManager;    // sim/memory/memory.h        every allocation path, pointer queries, copies
class StreamManager;    // sim/exec/stream.h       streams, events, ordering, host functions
class StreamQueue;      // sim/core/stream_queue.h  the streams as the layers below exec/ see them
class ModuleManager;    // sim/exec/module_registry.h modules, libraries, functions, launches
class GraphManager;     // sim/exec/graph.h        graphs, capture, instantiation, launch
class ExportTables;     // darkapi/            cuGetExportTable
class ThreadRanks;      // sim/core/thread_state.h  host threads as ranks of the engine

class DriverState {
 public:
  // cuInit: builds the state once (thread-safe); later calls return the first call's result.
  static CUresult initialize(unsigned int flags);
  static DriverState* get();

  const simcore::ClusterSpec& cluster() const { return cluster_; }
  // The devices this process sees, numbered 0.. as CUDA_VISIBLE_DEVICES lists them (every GPU
  // of the cluster when unset). Everything above the engine (contexts, streams, memory, modules,
  // CUdevice values) uses these ordinals; the engine, the collective model and the status region
  // use the cluster's GPU, global_gpu(ordinal).
  int device_count() const { return static_cast<int>(visible_.size()); }
  // nullptr for an ordinal out of range (the caller returns CUDA_ERROR_INVALID_DEVICE).
  Device* device(int ordinal) const {
    return ordinal >= 0 && ordinal < device_count() ? devices_[visible_[ordinal]].get() : nullptr;
  }
  // The cluster's GPU of a visible ordinal; -1 out of range.
  int global_gpu(int ordinal) const { return ordinal >= 0 && ordinal < device_count() ? visible_[ordinal] : -1; }

  simcore::Engine& engine() const { return *engine_; }
  ThreadRanks& ranks() const { return *ranks_; }
  // The job's status region (vgpu-smi, NVML); nullptr when it could not be opened.
  status::Writer* status() const { return status_.get(); }
  ContextManager& contexts() const { return *contexts_; }
  MemoryManager& memory() const { return *memory_; }
  StreamManager& streams() const { return *streams_; }
  StreamQueue& stream_queue() const;  // the same streams, for memory/ (below exec/)
  ModuleManager& modules() const { return *modules_; }
  GraphManager& graphs() const { return *graphs_; }

 private:
  DriverState(simcore::ClusterSpec cluster, std::vector<int> visible);

  simcore::ClusterSpec cluster_;
  std::unique_ptr<status::Writer> status_;
  std::vector<std::unique_ptr<Device>> devices_;  // every GPU of the cluster, by global GPU
  std::vector<int> visible_;                      // ordinal -> global GPU (CUDA_VISIBLE_DEVICES)
  std::unique_ptr<simcore::Engine> engine_;
  std::unique_ptr<ThreadRanks> ranks_;
  std::unique_ptr<ContextManager> contexts_;
  std::unique_ptr<MemoryManager> memory_;
  std::unique_ptr<StreamManager> streams_;
  std::unique_ptr<ModuleManager> modules_;
  std::unique_ptr<GraphManager> graphs_;
};

}  // namespace vgpu
