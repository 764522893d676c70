// The state of the virtual NVML in one process: initialization (reference counted, like NVML's),
// the device handles, and the live view of the job's status region.
//
// Devices are fixed at the first successful nvmlInit (the job's region if the job is running,
// else the configured cluster) and their handles stay valid for the life of the process, also
// across nvmlShutdown/nvmlInit, as real NVML's do. Memory, utilization and processes are read
// from the current job's region (status::current_job_id(): VGPU_JOB_ID, else the session id, as
// the driver names it) at every call, matched by UUID; without a region they are zero/empty.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nvml/job_view.h"
#include "nvml/nvml_abi.h"

// What an nvmlDevice_t points to. Lives in a vector that never changes after it is built, so a
// handle is valid exactly when it points at one of its elements (checked before any use).
struct nvmlDevice_st {
  vgpu::inspect::DeviceFacts facts;
};

namespace vgpu::nvml {

// The dynamic state of one device, read now.
struct LiveDevice {
  inspect::DeviceActivity activity;
  std::vector<std::pair<unsigned, uint64_t>> processes;  // pid, bytes on this device (> 0)
};

class Library {
 public:
  static Library& get();

  nvmlReturn_t init() noexcept;
  nvmlReturn_t shutdown();

  // NVML_ERROR_UNINITIALIZED before init; NVML_ERROR_INVALID_ARGUMENT for a handle that is not one
  // of ours (never dereferenced in that case).
  nvmlReturn_t check(nvmlDevice_t device) const;
  nvmlReturn_t check_initialized() const;

  // The devices enumerated by index. A cluster of more than kMaxEnumerated GPUs (NCCL refuses
  // an NVML with more than 32 devices, as no real host has one) enumerates, in a process that
  // is a rank, the devices of its virtual node as that node's NVML would, each indexed by its
  // position in the node: the node of VGPU_NODE_INDEX, else of the process's current CUDA device
  // at its latest nvmlInit (NCCL initializes NVML after the rank has set its device; its ordinal
  // read through CUDA_VISIBLE_DEVICES), else of the GPUs CUDA_VISIBLE_DEVICES lists when they
  // are all on one node. A process with none of these (vgpu-run's probe, monitoring tools)
  // enumerates the whole cluster. Lookups by
  // UUID and PCI bus id find every device of the cluster (NCCL, which sees every rank of the
  // job on one host, asks for its peers').
  static constexpr unsigned kMaxEnumerated = 32;
  unsigned count() const;
  nvmlDevice_t handle(unsigned index);
  unsigned index_of(const nvmlDevice_st& d) const;  // nvmlDeviceGetIndex
  nvmlDevice_t any(unsigned i) { return &devices_[i]; }  // i < devices().size()
  const std::vector<nvmlDevice_st>& devices() const { return devices_; }
  const simcore::NvlinkSpec& nvlink() const { return nvlink_; }
  // Devices on the same virtual node as `d` (itself included).
  int devices_on_node(const nvmlDevice_st& d) const;

  // The device's activity and processes from the job's region now; zeros without a region.
  LiveDevice live(const nvmlDevice_st& d) const noexcept;

 private:
  Library() = default;
  mutable std::mutex mutex_;             // guards init/shutdown
  std::atomic<int> refs_{0};
  bool built_ = false;                   // devices_ is filled (once)
  std::vector<nvmlDevice_st> devices_;
  std::vector<unsigned> node_first_;     // per node: position in devices_ of its first device
  std::atomic<int> node_{-1};            // the node enumerated; -1: every device
  simcore::NvlinkSpec nvlink_;
  std::string backend_;                  // the job's ("sim", "passthrough"); empty without a job
};

// Copies `text` into a caller's buffer of `length` bytes: NVML_ERROR_INSUFFICIENT_SIZE if it does not
// fit with its terminator.
nvmlReturn_t copy_string(const std::string& text, char* out, unsigned int length);

}  // namespace vgpu::nvml
